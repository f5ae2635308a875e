"""The decoder's phases against decoder_lm's profiles at every batch and context."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.codesign.serving import Decoder
from inferplan.profiles.transformers import decoder_lm

SHAPES = st.fixed_dictionaries(
    {
        "layers": st.integers(1, 4),
        "heads": st.sampled_from([2, 4]),
        "kv_heads": st.sampled_from([1, 2]),
        "ffn_hidden": st.integers(8, 64),
        "vocab_size": st.integers(2, 100),
        "bytes_per_element": st.sampled_from([1, 2, 4]),
        "gated_mlp": st.booleans(),
        "tie_embeddings": st.booleans(),
        "bias": st.booleans(),
        "layer_norm": st.booleans(),
        "positions": st.integers(0, 8),
    }
)


@settings(max_examples=60, deadline=None)
@given(SHAPES, st.integers(1, 8), st.integers(1, 50), st.integers(1, 5))
def test_phases_are_decoder_lm_profiles(shape, width, context, batch) -> None:
    shape = {**shape, "hidden": 4 * width}
    d = Decoder("m", **shape, max_context=128)
    decode = decoder_lm(**shape, seq_len=context, batch=batch, phase="decode")
    prefill = decoder_lm(**shape, seq_len=context, phase="prefill")
    # a decode step: every sequence attends to its context tokens and itself
    assert math.isclose(d.decode_layer_flops(batch, batch * (context + 1)), decode.flops[0])
    assert math.isclose(d.prefill_layer_flops(context), prefill.flops[0])
    assert math.isclose(batch * d.head_flops, decode.flops[-1])
    # the KV cache: 2 x kv_heads x head_dim x bytes per token and layer
    per_token = (
        2 * shape["kv_heads"] * (shape["hidden"] // shape["heads"]) * shape["bytes_per_element"]
    )
    assert d.kv_bytes_per_token_layer == per_token
    assert decode.state_bytes[0] == batch * (context + 1) * per_token
    # weights: the blocks' parameters
    n = d.layers + 1
    assert math.isclose(d.weights_bytes(0, n), sum(decode.params) * shape["bytes_per_element"])
    for cut in range(1, n):
        assert math.isclose(
            d.weights_bytes(0, cut) + d.weights_bytes(cut, n), d.weights_bytes(0, n)
        )
    assert d.cut_bits(1, batch, batch) == decode.activation_bits[1]
    assert d.cut_bits(n, batch, batch) == decode.activation_bits[-1]


def test_an_empty_range_holds_no_weights() -> None:
    # blocks first..last-1: none when first == last, the head's end included
    d = Decoder("d", layers=3, hidden=16, heads=2, kv_heads=1, ffn_hidden=32, vocab_size=50,
                max_context=64)  # fmt: skip
    assert all(d.weights_bytes(k, k) == 0 for k in range(d.layers + 2))
    assert d.weights_bytes(d.layers, d.layers + 1) > 0
