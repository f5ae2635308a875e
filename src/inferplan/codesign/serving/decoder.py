"""A decoder-only language model in its two serving phases: prefill and decode.

:class:`Decoder` holds a model's shape (the arguments of
:func:`~inferplan.profiles.transformers.decoder_lm`) and its longest context. Every count it
gives is read off ``decoder_lm``'s profiles, the one place of the FLOPs and parameter formulas;
the KV cache's bytes per token per layer are
:func:`~inferplan.profiles.transformers.kv_bytes_per_token`'s. The model's blocks are
``decoder_lm``'s: the ``L`` layers (the embedding lookup folded into the first) and the final
norm + head as block ``L + 1``.

Per layer, one prefill of ``P`` tokens costs ``P x (a + c x P)`` FLOPs and one decode step of
``b`` sequences whose contexts (cached tokens plus the new one) sum to ``S`` costs
``b x a + c x S``: ``a`` the per-token FLOPs of the projections and the MLP, ``c`` those of
attention per token of context.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from inferplan.errors import InvalidProfile
from inferplan.profiles.profile import Profile
from inferplan.profiles.transformers import decoder_lm, kv_bytes_per_token

__all__ = ["Decoder"]


@dataclass(frozen=True)
class Decoder:
    """A decoder LM's shape, as :func:`~inferplan.profiles.transformers.decoder_lm` takes it.

    Attributes
    ----------
    name
        A label.
    layers, hidden, heads, kv_heads, ffn_hidden, vocab_size
        Depth, width, attention heads, key/value heads (GQA), MLP width, vocabulary.
    max_context
        The longest sequence (prompt plus output tokens) the model takes.
    bytes_per_element
        Bytes of one weight, activation and cached key or value element (2 for fp16/bf16).
    gated_mlp, tie_embeddings, bias, layer_norm, positions
        As :func:`~inferplan.profiles.transformers.decoder_lm`.

    Examples
    --------
    >>> d = Decoder("tiny", layers=2, hidden=64, heads=4, kv_heads=2, ffn_hidden=256,
    ...             vocab_size=100, max_context=128)
    >>> d.kv_bytes_per_token_layer  # 2 x 2 heads x 16 x 2 bytes
    128
    >>> d.prefill_layer_flops(10) == 10 * (d.token_flops + d.context_flops * 10)
    True
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab_size: int
    max_context: int
    bytes_per_element: int = 2
    gated_mlp: bool = False
    tie_embeddings: bool = False
    bias: bool = False
    layer_norm: bool = False
    positions: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.max_context, int) or self.max_context < 1:
            raise InvalidProfile(f"must be a positive integer, got {self.max_context!r}",
                                 field="max_context")  # fmt: skip
        self.profile("prefill", 1)  # decoder_lm's own checks of the shape

    def shape(self) -> dict[str, Any]:
        """The keyword arguments of ``decoder_lm`` that give this model."""
        return {
            "layers": self.layers, "hidden": self.hidden, "heads": self.heads,
            "kv_heads": self.kv_heads, "ffn_hidden": self.ffn_hidden,
            "vocab_size": self.vocab_size, "bytes_per_element": self.bytes_per_element,
            "gated_mlp": self.gated_mlp, "tie_embeddings": self.tie_embeddings,
            "bias": self.bias, "layer_norm": self.layer_norm, "positions": self.positions,
        }  # fmt: skip

    def profile(self, phase: str, seq_len: int, batch: int = 1) -> Profile:
        """``decoder_lm``'s profile of this model: a prefill of ``seq_len`` tokens, or a decode
        step with ``seq_len`` tokens cached, for ``batch`` sequences."""
        return decoder_lm(**self.shape(), seq_len=seq_len, batch=batch, phase=phase,  # type: ignore[arg-type]
                          name=self.name)  # fmt: skip

    @cached_property
    def _decode_1(self) -> Profile:
        return self.profile("decode", 1)

    @cached_property
    def context_flops(self) -> float:
        """``c``: a layer's attention FLOPs per token of context of one sequence's step."""
        return self.profile("decode", 2).flops[0] - self._decode_1.flops[0]

    @cached_property
    def token_flops(self) -> float:
        """``a``: a layer's FLOPs per token besides attention (projections, MLP)."""
        return self._decode_1.flops[0] - 2 * self.context_flops  # context 2: one cached + new

    @cached_property
    def head_flops(self) -> float:
        """The norm + head's FLOPs per sequence (the last position's logits)."""
        return self._decode_1.flops[-1]

    def prefill_layer_flops(self, prompt: int) -> float:
        """One layer's FLOPs for a prefill of ``prompt`` tokens."""
        return prompt * (self.token_flops + self.context_flops * prompt)

    def decode_layer_flops(self, batch: float, context_sum: float) -> float:
        """One layer's FLOPs of a decode step of ``batch`` sequences whose contexts sum to
        ``context_sum``."""
        return batch * self.token_flops + self.context_flops * context_sum

    @cached_property
    def embedding_bytes(self) -> float:
        """Bytes of the embedding tables (held by the first block, read a row per token)."""
        return float((self.vocab_size + self.positions) * self.hidden * self.bytes_per_element)

    @cached_property
    def layer_bytes(self) -> float:
        """Bytes of one layer's weights."""
        return self._decode_1.params[0] * self.bytes_per_element - self.embedding_bytes

    @cached_property
    def head_bytes(self) -> float:
        """Bytes of the norm + head's weights, as held (a tied head holds only its norm)."""
        return float(self._decode_1.params[-1] * self.bytes_per_element)

    @cached_property
    def head_read_bytes(self) -> float:
        """Bytes the norm + head reads per step: its matrix, tied to the embedding or not."""
        if not self.tie_embeddings:
            return self.head_bytes
        return self.head_bytes + self.vocab_size * self.hidden * self.bytes_per_element

    @cached_property
    def kv_bytes_per_token_layer(self) -> int:
        """Bytes one token keeps in one layer's KV cache."""
        return kv_bytes_per_token(kv_heads=self.kv_heads, head_dim=self.hidden // self.heads,
                                  bytes_per_element=self.bytes_per_element)  # fmt: skip

    @cached_property
    def hidden_bytes(self) -> float:
        """Bytes of one token's hidden state."""
        return float(self.hidden * self.bytes_per_element)

    def weights_bytes(self, first: int, last: int) -> float:
        """Bytes of the weights of blocks ``first..last - 1`` (0-based, ``L`` the head)."""
        layers = min(last, self.layers) - min(first, self.layers)
        held = layers * self.layer_bytes
        if first == 0 and last > 0:
            held += self.embedding_bytes
        if first <= self.layers < last:  # block L, the head, is in the range
            held += self.head_bytes
        return held

    def cut_bits(self, cut: int, tokens: float, sequences: float) -> float:
        """Bits crossing a cut after ``cut`` blocks for ``tokens`` tokens of ``sequences``
        sequences: token ids before the first block, hidden states between layers, the last
        positions' logits after the head (``decoder_lm``'s activations)."""
        bits = self._decode_1.activation_bits
        if cut == 0:
            return tokens * bits[0]
        if cut <= self.layers:
            return tokens * bits[1]
        return sequences * bits[-1]
