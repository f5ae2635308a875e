"""Analytic profiles of transformers: decoder-only language models and ViT encoders.

Counted as in the other profiles: matrix products only, 2 FLOPs per multiply-accumulate
(projections, both attention products, MLP, patch embedding, output head); softmax,
normalisation, activations and residual additions are not counted. Attention scores are counted
in full (``S x S`` per head in prefill, as dense kernels compute them, causal or not).

A decoder LM serves two workloads that are planned separately:

- **prefill**: the prompt of ``seq_len`` tokens passes once through the model;
- **decode**: one new token per sequence attends to the ``seq_len`` cached tokens and itself.

Blocks are the layers, with the embedding lookup folded into the first (it does no counted work)
and the final normalisation and output head as the last block. Only the last position's logits
are computed, as serving engines do. ``D_0`` is the token ids (``token_bits`` each),
``D_1..D_L`` the hidden states, ``D_N`` the logits. The KV cache stays with the node that runs
each layer, so it never crosses a cut.
"""

from __future__ import annotations

from typing import Literal

from inferplan.errors import InvalidProfile
from inferplan.profiles.profile import Profile

__all__ = ["decoder_lm", "kv_bytes_per_token", "vit"]


def _positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise InvalidProfile(f"must be a positive integer, got {value!r}", field=name)


def kv_bytes_per_token(*, kv_heads: int, head_dim: int, bytes_per_element: int) -> int:
    """Bytes one token keeps in one layer's KV cache: ``2 x kv_heads x head_dim x bytes``.

    A key and a value vector of ``head_dim`` elements per key/value head; the one place of the
    formula (the decode profiles' state and the serving planner's KV memory read it here).

    Examples
    --------
    >>> kv_bytes_per_token(kv_heads=8, head_dim=128, bytes_per_element=2)  # a LLaMA-70B layer
    4096
    """
    return 2 * kv_heads * head_dim * bytes_per_element


def decoder_lm(
    *,
    layers: int,
    hidden: int,
    heads: int,
    seq_len: int,
    batch: int = 1,
    bytes_per_element: int = 2,
    vocab_size: int = 32000,
    kv_heads: int | None = None,
    ffn_hidden: int | None = None,
    gated_mlp: bool = False,
    tie_embeddings: bool = False,
    bias: bool = False,
    layer_norm: bool = False,
    positions: int = 0,
    phase: Literal["prefill", "decode"] = "prefill",
    token_bits: int = 32,
    name: str | None = None,
) -> Profile:
    """A decoder-only language model in ``layers + 1`` blocks (layers, then norm + head).

    Parameters
    ----------
    layers, hidden, heads
        Depth, model width ``d`` and attention heads ``h``.
    seq_len
        Prompt length (prefill) or tokens already in the KV cache (decode).
    batch
        Sequences processed together.
    bytes_per_element
        Size of one activation element and of one parameter (2 for fp16/bf16).
    vocab_size
        Output classes of the head (and rows of the embedding).
    kv_heads
        Key/value heads for grouped-query attention (``heads`` by default).
    ffn_hidden
        MLP width (``4 * hidden`` by default).
    gated_mlp
        Three MLP matrices (SwiGLU, as in LLaMA) instead of two.
    tie_embeddings
        The head reuses the embedding matrix (GPT-2): its ``vocab_size * hidden`` parameters are
        counted once, in the first block.
    bias
        Biased projections and MLP matrices (GPT-2); biases add parameters, not counted FLOPs.
    layer_norm
        LayerNorm (scale and shift, ``2 hidden`` parameters) instead of RMSNorm (``hidden``).
    positions
        Rows of a learned position embedding (GPT-2's ``n_positions``), 0 for none (rotary).
    phase
        ``"prefill"`` or ``"decode"`` (one new token per sequence).
    token_bits
        Bits of one token id in ``D_0``.

    Examples
    --------
    >>> p = decoder_lm(layers=2, hidden=64, heads=4, seq_len=16, vocab_size=100)
    >>> p.blocks, p.activation_bits[1] == 16 * 64 * 16
    (('embed+layer1', 'layer2', 'norm+head'), True)
    >>> gpt2 = dict(layers=12, hidden=768, heads=12, vocab_size=50257, positions=1024, bias=True,
    ...             layer_norm=True, tie_embeddings=True, seq_len=128)
    >>> round(sum(decoder_lm(**gpt2).params) / 1e6, 2)  # GPT-2 small
    124.44
    """
    _positive(layers=layers, hidden=hidden, heads=heads, seq_len=seq_len, batch=batch,
              bytes_per_element=bytes_per_element, vocab_size=vocab_size,
              token_bits=token_bits)  # fmt: skip
    if not isinstance(positions, int) or positions < 0:
        raise InvalidProfile(f"must be a non-negative integer, got {positions!r}",
                             field="positions")  # fmt: skip
    kv = heads if kv_heads is None else kv_heads
    ffn = 4 * hidden if ffn_hidden is None else ffn_hidden
    _positive(kv_heads=kv, ffn_hidden=ffn)
    if hidden % heads or heads % kv:
        raise InvalidProfile(
            f"hidden ({hidden}) must be a multiple of heads ({heads}) and heads of kv_heads ({kv})"
        )
    if phase not in ("prefill", "decode"):
        raise InvalidProfile(f"must be 'prefill' or 'decode', got {phase!r}", field="phase")
    d, kv_width, matrices = hidden, kv * (hidden // heads), 3 if gated_mlp else 2
    queries, context = (seq_len, seq_len) if phase == "prefill" else (1, seq_len + 1)
    tokens = batch * queries
    projections = 2 * tokens * d * (d + 2 * kv_width) + 2 * tokens * d * d
    attention = 2 * 2 * tokens * context * d  # scores Q K^T, then their product with V
    mlp = 2 * tokens * d * ffn * matrices
    norm = 2 * d if layer_norm else d
    layer_params = d * (d + 2 * kv_width) + d * d + matrices * d * ffn + 2 * norm
    if bias:
        layer_params += (d + 2 * kv_width) + d + (matrices - 1) * ffn + d
    bits = 8 * bytes_per_element
    # decode: each layer keeps its keys and values of every token of the context (KV cache)
    per_token = kv_bytes_per_token(kv_heads=kv, head_dim=hidden // heads,
                                   bytes_per_element=bytes_per_element)  # fmt: skip
    kv_bytes = batch * context * per_token if phase == "decode" else 0
    return Profile(
        name=name or f"decoder-{layers}x{hidden}-{phase}",
        blocks=("embed+layer1", *(f"layer{k}" for k in range(2, layers + 1)), "norm+head"),
        flops=(*[float(projections + attention + mlp)] * layers, float(2 * batch * d * vocab_size)),
        activation_bits=(
            float(tokens * token_bits),
            *[float(tokens * d * bits)] * layers,
            float(batch * vocab_size * bits),
        ),
        params=(
            vocab_size * d + positions * d + layer_params,
            *[layer_params] * (layers - 1),
            norm + (0 if tie_embeddings else d * vocab_size),
        ),
        bytes_per_param=float(bytes_per_element),
        state_bytes=(*[float(kv_bytes)] * layers, 0.0),
    )


def vit(
    *,
    image_size: int = 224,
    patch_size: int = 16,
    channels: int = 3,
    hidden: int = 768,
    layers: int = 12,
    heads: int = 12,
    mlp_dim: int | None = None,
    num_classes: int = 1000,
    batch: int = 1,
    bytes_per_element: int = 4,
    name: str | None = None,
) -> Profile:
    """A ViT encoder (ViT-B/16 by default) in ``layers + 2`` blocks: patch embedding, layers, head.

    The class token joins the ``(image_size / patch_size)^2`` patch tokens; layers are pre-norm
    with biased projections and a two-matrix MLP; the head classifies the class token.

    Examples
    --------
    >>> round(vit().total_flops / 2e9, 1)  # ViT-B/16: ~17.6 GMAC
    17.6
    """
    _positive(image_size=image_size, patch_size=patch_size, channels=channels, hidden=hidden,
              layers=layers, heads=heads, num_classes=num_classes, batch=batch,
              bytes_per_element=bytes_per_element)  # fmt: skip
    if image_size % patch_size or hidden % heads:
        raise InvalidProfile(
            f"image_size ({image_size}) must be a multiple of patch_size ({patch_size}) "
            f"and hidden ({hidden}) of heads ({heads})"
        )
    d, mlp = hidden, 4 * hidden if mlp_dim is None else mlp_dim
    _positive(mlp_dim=mlp)
    patches = (image_size // patch_size) ** 2
    patch_inputs = channels * patch_size * patch_size
    tokens = batch * (patches + 1)
    layer_flops = (
        2 * tokens * d * 4 * d + 2 * 2 * tokens * (patches + 1) * d + 2 * 2 * tokens * d * mlp
    )
    layer_params = 4 * d * d + 4 * d + 2 * d * mlp + mlp + d + 4 * d
    bits = 8 * bytes_per_element
    return Profile(
        name=name or f"vit-{layers}x{hidden}-p{patch_size}",
        blocks=("patch_embed", *(f"layer{k}" for k in range(1, layers + 1)), "head"),
        flops=(
            float(2 * batch * patches * patch_inputs * d),
            *[float(layer_flops)] * layers,
            float(2 * batch * d * num_classes),
        ),
        activation_bits=(
            float(batch * channels * image_size**2 * bits),
            *[float(tokens * d * bits)] * (layers + 1),
            float(batch * num_classes * bits),
        ),
        params=(
            patch_inputs * d + d + d + (patches + 1) * d,
            *[layer_params] * layers,
            2 * d + d * num_classes + num_classes,
        ),
        bytes_per_param=float(bytes_per_element),
    )
