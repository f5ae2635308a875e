"""PyTorch front end: reference nets match the built-ins; valid cuts on graphs with skips."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from inferplan.errors import InvalidProfile  # noqa: E402
from inferplan.profiles import alexnet, resnet50, vgg16  # noqa: E402
from inferplan.profiles.cuts import parse_block_spec  # noqa: E402
from inferplan.profiles.from_torch import (  # noqa: E402
    load_module_factory,
    profile_module,
    profile_torch,
)

from . import reference_models as ref  # noqa: E402

CASES = {
    "vgg16": (ref.VGG16, ref.VGG16_BLOCKS, vgg16),
    "resnet50": (ref.ResNet50, ref.RESNET50_BLOCKS, resnet50),
    "alexnet": (ref.AlexNet, ref.ALEXNET_BLOCKS, alexnet),
}


def _meta(cls):
    with torch.device("meta"):
        return cls()


@pytest.mark.parametrize("image", [224, 96])
@pytest.mark.parametrize("model", sorted(CASES))
def test_reference_nets_match_builtin_profiles(model, image):
    cls, blocks, builtin = CASES[model]
    got = profile_module(_meta(cls), [(1, 3, image, image)], blocks=parse_block_spec(blocks))
    want = builtin(image_size=image)
    assert got.profile.n_blocks == want.n_blocks
    assert got.profile.flops == want.flops
    assert got.profile.activation_bits == want.activation_bits
    assert got.profile.params == want.params
    assert all(c.valid and c.kept for c in got.cuts)


def test_half_precision_halves_every_activation():
    cls, blocks, builtin = CASES["alexnet"]
    got = profile_module(_meta(cls), [(1, 3, 224, 224)], blocks=parse_block_spec(blocks),
                         dtype="float16")  # fmt: skip
    assert got.profile.activation_bits == builtin(bits_per_element=16).activation_bits


def test_default_blocks_are_top_level_children_with_zero_work_merged():
    # conv1 | bn1 | relu | maxpool do counted work only in conv1: of the four cuts after them,
    # the one after maxpool carries the smallest tensor; likewise avgpool joins layer4.
    got = profile_module(_meta(ref.ResNet50), [(1, 3, 224, 224)]).profile
    assert got.blocks == ("conv1..maxpool", "layer1", "layer2", "layer3",
                          "layer4+avgpool", "fc")  # fmt: skip
    assert got.activation_bits == tuple(
        32.0 * n
        for n in (
            3 * 224 * 224,
            64 * 56 * 56,
            256 * 56 * 56,
            512 * 28 * 28,
            1024 * 14 * 14,
            2048,
            1000,
        )
    )


def test_cuts_inside_a_residual_block_carry_both_branches():
    got = profile_module(_meta(ref.ResNet50), [(1, 3, 64, 64)], blocks=parse_block_spec("depth=3"))
    cut = next(c for c in got.cuts if c.after == "layer1.1.conv1")
    # conv1's output (64 x 16 x 16) and the block's input, kept for the identity shortcut.
    assert sorted(t.shape for t in cut.tensors) == [(1, 64, 16, 16), (1, 256, 16, 16)]
    assert cut.bits == (64 + 256) * 16 * 16 * 32 and cut.valid


def test_unet_skips_cross_every_cut_between_encoder_and_decoder():
    got = profile_module(_meta(ref.TinyUNet), [(1, 3, 16, 16)])
    e1, e2, d2, out = 8 * 16 * 16, 16 * 8 * 8, 8 * 16 * 16, 4 * 16 * 16
    assert got.profile.blocks == ("enc1", "enc2", "dec2", "dec1")
    assert got.profile.activation_bits == tuple(
        32.0 * n for n in (3 * 16 * 16, e1, e1 + e2, e1 + d2, out)
    )
    # after enc2: enc1's output (the skip to dec1) and enc2's
    assert sorted(t.shape for t in got.cuts[2].tensors) == [(1, 8, 16, 16), (1, 16, 8, 8)]
    fx = profile_module(_meta(ref.TinyUNet), [(1, 3, 16, 16)], tracer="fx")
    assert fx.profile == got.profile
    assert sorted(t.name for t in fx.cuts[2].tensors) == ["enc1", "enc2_1"]


def test_a_module_called_twice_makes_the_cuts_between_invalid():
    got = profile_module(_meta(ref.Reused), [(4, 8)])
    assert [c.valid for c in got.cuts] == [True, True, False, True, True]
    assert "needed by 'shared'" in (got.cuts[2].reason or "")
    assert got.profile.blocks == ("first", "shared+middle", "last")
    assert got.profile.flops == (2 * 4 * 64, 3 * 2 * 4 * 64, 2 * 4 * 32)
    assert got.profile.params == (72, 144, 36)


def test_int_inputs_and_transformer_style_blocks():
    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(100, 16)
            self.layers = torch.nn.ModuleList([torch.nn.Linear(16, 16) for _ in range(2)])
            self.head = torch.nn.Linear(16, 100, bias=False)
            self.head.weight = self.embed.weight  # tied: counted once

        def forward(self, ids):
            x = self.embed(ids)
            for layer in self.layers:
                x = layer(x)
            return self.head(x)

    got = profile_module(
        _meta(Tiny),
        [(2, 5)],
        input_dtypes=["int64"],
        blocks=parse_block_spec("embed+layers.0,layers.1,head"),
    ).profile
    assert got.activation_bits[0] == 2 * 5 * 64
    assert got.flops == (2 * 10 * 16 * 16, 2 * 10 * 16 * 16, 2 * 10 * 16 * 100)
    assert got.params == (1600 + 272, 272, 0)


def test_errors_are_one_line_invalid_profile(tmp_path, monkeypatch):
    net = torch.nn.Sequential(torch.nn.Linear(8, 4))
    cases = [
        (lambda: profile_module(net, [(1, 7)]), "does not run on input shape 1x7"),
        (
            lambda: profile_module(net, [(1, 8)], blocks=(("nope",),)),
            "no operation belongs to module(s) 'nope'",
        ),
        (lambda: profile_module(net, [(1, 8)], dtype="float3"), "unknown dtype 'float3'"),
        (lambda: load_module_factory("no_such_module_xyz:make"), "cannot import"),
        (lambda: load_module_factory("nocolon"), "expected module.path:factory"),
    ]
    (tmp_path / "models.py").write_text(
        "import torch\ndef make():\n    return torch.nn.Linear(2, 2)\ndef bad():\n    return 3\n"
    )
    monkeypatch.chdir(tmp_path)
    cases += [
        (lambda: load_module_factory("models:missing"), "has no attribute 'missing'"),
        (lambda: load_module_factory("models:bad"), "returned int, not nn.Module"),
    ]
    for call, message in cases:
        with pytest.raises(InvalidProfile) as info:
            call()
        assert message in str(info.value)
        assert "\n" not in str(info.value)
    got = profile_torch("models:make", [(3, 2)]).profile
    assert got.flops == (2 * 3 * 2 * 2,) and got.name == "make"


def test_example_tensors_give_the_same_profile_as_shapes():
    torch = pytest.importorskip("torch")
    from inferplan.profiles.from_torch import profile_module

    net = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    by_shape = profile_module(net, [(3, 8)]).profile
    assert profile_module(net, torch.zeros(3, 8)).profile == by_shape
    assert profile_module(net, [torch.ones(3, 8)]).profile == by_shape
    assert profile_module(net, (3, 8)).profile == by_shape
    assert profile_module(net, torch.Size([3, 8])).profile == by_shape
    # an integer example keeps its dtype (token ids), a float one takes the model's
    emb = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 2))
    ids = profile_module(emb, torch.zeros(2, 5, dtype=torch.int64)).profile
    assert ids.activation_bits[0] == 2 * 5 * 64
    half = profile_module(net, torch.zeros(3, 8), dtype="float16").profile
    assert half.activation_bits[0] == 3 * 8 * 16


@pytest.mark.parametrize("bad", ["1,8", 3.5, [None], [(0, 8)], [(2, "8")], {"x": "1,8"}, [True]])
def test_anything_else_is_an_error_saying_what_is_accepted(bad):
    torch = pytest.importorskip("torch")
    from inferplan.profiles.from_torch import profile_module

    net = torch.nn.Sequential(torch.nn.Linear(8, 4))
    with pytest.raises(InvalidProfile, match=r"input_shapes: .*a shape per input.*example tensor"):
        profile_module(net, bad)


def test_keyword_inputs_profile_as_positional_ones_and_name_a_bad_keyword():
    net = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    by_position = profile_module(net, [(3, 8)]).profile
    assert profile_module(net, {"input": (3, 8)}).profile == by_position
    assert profile_module(net, {"input": torch.zeros(3, 8)}).profile == by_position
    with pytest.raises(InvalidProfile, match=r"does not run on input shape x=3x8: .*'input'"):
        profile_module(net, {"x": (3, 8)})
    with pytest.raises(InvalidProfile, match="keyword inputs need names"):
        profile_module(net, {1: (3, 8)})
    with pytest.raises(InvalidProfile, match="tracer='fx' takes positional inputs only"):
        profile_module(net, {"input": (3, 8)}, tracer="fx")


def test_data_dependent_control_flow_fails_with_a_line_saying_why():
    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(x) if x.sum() > 0 else x

    with pytest.raises(InvalidProfile) as info:
        profile_module(_meta(Branchy), [(2, 4)])
    message = str(info.value)
    assert "branches on the value of a tensor" in message and "torch.cond" in message
    assert "\n" not in message
