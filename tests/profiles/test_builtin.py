"""Built-in profiles against independent published totals and hand-computed shapes."""

from __future__ import annotations

import json

import pytest

import inferplan
from inferplan import InvalidProfile, load_profile, mlp, save_profile


@pytest.mark.parametrize(
    ("name", "blocks", "gmac", "params"),
    [
        # Published totals: torchvision's model cards and the papers' own counts.
        ("vgg16", 16, 15.47, 138_357_544),
        ("resnet50", 18, 4.09, 25_557_032),
        ("alexnet", 8, 0.71, 61_100_840),
    ],
)
def test_builtin_totals(name, blocks, gmac, params):
    profile = load_profile(name)
    assert profile.n_blocks == blocks
    assert sum(profile.flops) / 2 / 1e9 == pytest.approx(gmac, abs=0.006)
    assert sum(profile.params) == params
    assert profile.activation_bits[0] == 224 * 224 * 3 * 32
    assert profile.activation_bits[-1] == 1000 * 32


def test_vgg16_shapes():
    vgg = inferplan.vgg16()
    # conv1_1 keeps 224x224 with 64 channels; conv1_2 pools to 112x112.
    assert vgg.activation_bits[1] == 224 * 224 * 64 * 32
    assert vgg.activation_bits[2] == 112 * 112 * 64 * 32
    assert vgg.activation_bits[13] == 7 * 7 * 512 * 32
    # conv1_1: 3x3x3x64 weights at 224x224, 2 FLOPs per MAC.
    assert vgg.flops[0] == 2 * 3 * 3 * 3 * 64 * 224 * 224
    assert vgg.flops[13] == 2 * 25088 * 4096  # fc6


def test_resnet50_shapes():
    res = inferplan.resnet50()
    assert res.activation_bits[1] == 56 * 56 * 64 * 32  # after stem (conv1 + maxpool)
    assert res.activation_bits[2] == 56 * 56 * 256 * 32  # first bottleneck
    assert res.activation_bits[17] == 7 * 7 * 2048 * 32  # last bottleneck
    assert res.flops[0] == 2 * 7 * 7 * 3 * 64 * 112 * 112
    assert res.flops[-1] == 2 * 2048 * 1000


def test_bits_per_element_and_input_bits():
    vgg = inferplan.vgg16(bits_per_element=16, input_bits_per_element=8)
    assert vgg.activation_bits[0] == 224 * 224 * 3 * 8
    assert vgg.activation_bits[1] == 224 * 224 * 64 * 16


def test_mlp():
    profile = mlp(100, 3)
    assert profile.flops == (2 * 100 * 100,) * 3
    assert profile.params == (100 * 101,) * 3
    assert load_profile("mlp-100x3") == profile
    with pytest.raises(InvalidProfile, match="width >= 1"):
        mlp(0, 3)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_profile_file_round_trip(tmp_path, suffix):
    path = tmp_path / f"p{suffix}"
    save_profile(inferplan.alexnet(), path)
    assert load_profile(path) == inferplan.alexnet()


def test_minimal_profile_file(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"name": "m", "flops": [1e9, 2e9], "activation_bits": [8, 4, 2]}))
    profile = load_profile(path)
    assert profile.blocks == ("block1", "block2")
    assert profile.params == (0, 0)
