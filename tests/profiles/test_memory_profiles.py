"""What a profile says about memory: bytes per parameter from the model's dtype, kept state,
and the need of a block range, against the definition."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings

from inferplan import Profile, load_profile
from inferplan.errors import InvalidProfile
from inferplan.profiles import decoder_lm, memory_need
from tests.oracles import memory_need as definition
from tests.strategies import profiles_with_params


@settings(max_examples=60, deadline=None)
@given(profiles_with_params(6))
def test_need_of_every_block_range_is_the_definition(profile):
    need = memory_need(profile)
    N = profile.n_blocks
    for a in range(N + 1):
        for b in range(N + 1):
            if b < a:
                assert math.isinf(need[a, b])
            else:
                assert need[a, b] == pytest.approx(definition(profile, a, b), rel=1e-12)
    # what a limit needs: fewer blocks never need more (a > b is no transition)
    for a in range(N):
        for b in range(a + 1, N + 1):
            assert need[a + 1, b] <= need[a, b] and need[a, b - 1] <= need[a, b]


@pytest.mark.parametrize("name", ["vgg16", "resnet50", "alexnet"])
def test_a_builtin_model_on_one_node_needs_its_weights_and_largest_working_set(name):
    profile = load_profile(name)
    D = profile.activation_bits
    largest = max((D[n] + D[n + 1]) / 8 for n in range(profile.n_blocks))
    assert memory_need(profile)[0, -1] == 4 * sum(profile.params) + largest
    assert profile.bytes_per_param == 4.0


def test_bytes_per_param_and_state_are_checked():
    with pytest.raises(InvalidProfile, match="bytes_per_param"):
        Profile("p", (1.0,), (1.0, 1.0), bytes_per_param=0)
    with pytest.raises(InvalidProfile, match=r"state_bytes\[0\]"):
        Profile("p", (1.0,), (1.0, 1.0), state_bytes=(-1.0,))
    with pytest.raises(InvalidProfile, match="state_bytes"):
        Profile("p", (1.0,), (1.0, 1.0), state_bytes=(1.0, 2.0))


def test_profile_files_carry_bytes_per_param_and_state(tmp_path):
    from inferplan import save_profile

    p = Profile("p", (1.0, 2.0), (8.0, 8.0, 8.0), params=(3, 4), bytes_per_param=2.0,
                state_bytes=(10.0, 0.0))  # fmt: skip
    save_profile(p, tmp_path / "p.json")
    assert load_profile(tmp_path / "p.json") == p


def test_a_decoder_keeps_its_kv_cache_per_layer_when_decoding():
    kw = dict(layers=3, hidden=64, heads=4, kv_heads=2, seq_len=16, vocab_size=100, batch=2)
    prefill = decoder_lm(**kw)
    decode = decoder_lm(**kw, phase="decode", bytes_per_element=2)
    assert prefill.state_bytes == (0.0,) * 4
    # keys and values, 2 sequences, 17 tokens (16 cached and the new one), 2 heads of 16
    assert decode.state_bytes == (2 * 2 * 17 * 32 * 2,) * 3 + (0.0,)
    assert decode.bytes_per_param == 2.0


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("tracer", ["export", "fx"])
@pytest.mark.parametrize(("dtype", "size"), [("float32", 4.0), ("float16", 2.0),
                                             ("bfloat16", 2.0)])  # fmt: skip
def test_the_torch_front_end_takes_bytes_per_param_from_the_dtype(tracer, dtype, size):
    from inferplan.profiles.cuts import parse_block_spec
    from inferplan.profiles.from_torch import profile_module
    from tests.profiles import reference_models as ref

    with torch.device("meta"):
        model = ref.AlexNet()
    got = profile_module(model, [(1, 3, 224, 224)], blocks=parse_block_spec(ref.ALEXNET_BLOCKS),
                         dtype=dtype, tracer=tracer)  # fmt: skip
    assert got.profile.bytes_per_param == size
    assert sum(got.profile.params) == 61_100_840
