"""Analytic transformer profiles against published sizes and against torch references."""

from __future__ import annotations

import pytest

from inferplan.errors import InvalidProfile
from inferplan.profiles.transformers import decoder_lm, vit


def test_published_parameter_counts():
    # LLaMA-7B: 6.74 B parameters; ViT-B/16: 86.6 M parameters and ~17.6 GMAC per image.
    llama = decoder_lm(layers=32, hidden=4096, heads=32, seq_len=1, vocab_size=32000,
                       ffn_hidden=11008, gated_mlp=True)  # fmt: skip
    assert sum(llama.params) == 6_738_415_616
    base = vit()
    assert round(sum(base.params) / 1e6, 1) == 86.6
    assert round(base.total_flops / 2e9, 1) == 17.6


def test_decode_step_against_prefill_by_hand():
    # One token attending to 101 positions: projections and MLP scale with tokens (1 vs 100),
    # attention with tokens x context.
    kw = {"layers": 2, "hidden": 64, "heads": 4, "vocab_size": 50, "seq_len": 100}
    prefill, decode = decoder_lm(**kw), decoder_lm(**kw, phase="decode")
    dense = 2 * 64 * (3 * 64) + 2 * 64 * 64 + 2 * 64 * 256 * 2
    assert prefill.flops[0] == 100 * dense + 4 * 100 * 100 * 64
    assert decode.flops[0] == dense + 4 * 101 * 64
    assert decode.activation_bits == (32.0, 64 * 16.0, 64 * 16.0, 50 * 16.0)
    assert prefill.flops[-1] == decode.flops[-1] == 2 * 64 * 50


def test_bad_shapes_are_invalid_profiles():
    with pytest.raises(InvalidProfile, match="multiple of heads"):
        decoder_lm(layers=1, hidden=10, heads=3, seq_len=4)
    with pytest.raises(InvalidProfile, match="seq_len: must be a positive integer"):
        decoder_lm(layers=1, hidden=8, heads=2, seq_len=0)
    with pytest.raises(InvalidProfile, match="multiple of patch_size"):
        vit(image_size=30)
