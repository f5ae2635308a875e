"""split_model: stages that run in order equal the unsplit model, own exactly their weights,
and pass exactly the tensors the profile counts."""

from __future__ import annotations

import itertools
import math

import pytest

torch = pytest.importorskip("torch")

from inferplan.errors import InvalidArgument  # noqa: E402
from inferplan.profiles.cuts import parse_block_spec  # noqa: E402
from inferplan.profiles.from_torch import profile_module  # noqa: E402
from inferplan.runtime.split import split_model, trace_model  # noqa: E402

from . import models  # noqa: E402

CASES = {
    "resnet": (models.resnet, (1, 3, 16, 16), "depth=2"),
    "unet": (models.unet, (1, 3, 16, 16), None),
    "mlp": (models.mlp, (1, 16), None),
}


def _model(name):
    factory, shape, blocks = CASES[name]
    torch.manual_seed(0)
    return factory().eval(), shape, parse_block_spec(blocks)


def _all_cuts(n):
    """Every increasing set of cuts from 0 to n."""
    for k in range(n):
        for inner in itertools.combinations(range(1, n), k):
            yield [0, *inner, n]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_split_equals_the_unsplit_model(name):
    model, shape, blocks = _model(name)
    traced = trace_model(model, [shape], blocks=blocks)
    n = traced.profile.n_blocks
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        want = model(x)
        for cuts in _all_cuts(n):
            split = traced.split(cuts)
            got = split.run(x)
            assert len(got) == 1 and len(split.stages) == len(cuts) - 1
            torch.testing.assert_close(got[0], want, rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_profile_is_the_profile_of_profile_module(name):
    model, shape, blocks = _model(name)
    # the runtime splits torch.fx's graph: its profile is profile_module's with tracer="fx"
    n = profile_module(model, [shape], blocks=blocks, tracer="fx").profile.n_blocks
    split = split_model(model, [shape], blocks=blocks, cuts=[0, n])
    assert split.profile == profile_module(model, [shape], blocks=blocks, tracer="fx").profile
    exported = profile_module(model, [shape], blocks=blocks).profile
    assert exported.flops == split.profile.flops and exported.params == split.profile.params


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_stage_owns_exactly_its_weights(name):
    model, shape, blocks = _model(name)
    traced = trace_model(model, [shape], blocks=blocks)
    split = traced.split(range(traced.profile.n_blocks + 1))
    parts = [stage.state_dict() for stage in split.stages]
    keys = [set(part) for part in parts]
    assert set().union(*keys) == set(model.state_dict())
    assert sum(len(k) for k in keys) == len(model.state_dict())  # no weight in two stages
    whole = model.state_dict()
    for part in parts:
        for key, value in part.items():
            assert torch.equal(value, whole[key])
    # the parameters each stage holds are those the profile counts for its block
    for stage, params in zip(split.stages, split.profile.params, strict=True):
        assert sum(p.numel() for p in stage.parameters()) == params


@pytest.mark.parametrize("name", sorted(CASES))
def test_crossing_tensors_are_what_stages_pass_and_what_the_profile_counts(name):
    model, shape, blocks = _model(name)
    traced = trace_model(model, [shape], blocks=blocks)
    n = traced.profile.n_blocks
    split = traced.split(range(n + 1))
    values = (torch.randn(shape),)
    assert [(tuple(v.shape), "float32") for v in values] == [
        (s.shape, s.dtype) for s in split.crossing(0)
    ]
    for cut, stage in enumerate(split.stages, start=1):
        values = stage(*values)
        specs = split.crossing(cut)
        assert [(tuple(v.shape), str(v.dtype).removeprefix("torch.")) for v in values] == [
            (s.shape, s.dtype) for s in specs
        ]
        bits = sum(math.prod(s.shape) * 32 for s in specs)
        assert bits == split.profile.activation_bits[cut]


def test_skips_travel_across_cuts():
    model, shape, blocks = _model("unet")
    split = trace_model(model, [shape], blocks=blocks).split([0, 2, 4])
    assert sorted(s.shape for s in split.crossing(2)) == [(1, 8, 16, 16), (1, 16, 8, 8)]
    model, shape, blocks = _model("resnet")
    traced = trace_model(model, [shape], blocks=blocks)
    n = traced.profile.n_blocks
    split = traced.split([0, n])
    assert [len(split.crossing(c)) for c in range(n + 1)] == [1, 1, 2, 1, 2, 1, 1]


def test_constants_are_recomputed_by_each_stage_that_needs_them():
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 4)
            self.b = torch.nn.Linear(4, 4)
            self.scale = torch.nn.Parameter(torch.tensor(3.0))

        def forward(self, x):
            s = self.scale * 2
            return self.b(self.a(x) * s) * s

    torch.manual_seed(0)
    model = Scaled()
    split = split_model(model, [(1, 4)], cuts=[0, 1, 2])
    assert len(split.crossing(1)) == 1  # the scale never travels
    x = torch.randn(1, 4)
    torch.testing.assert_close(split.run(x)[0], model(x))


@pytest.mark.parametrize("cuts", [[0, 2], [1, 4], [0, 2, 2, 4], [0, 5]])
def test_bad_cuts_are_refused(cuts):
    model, shape, blocks = _model("mlp")
    with pytest.raises(InvalidArgument, match="cuts"):
        split_model(model, [shape], blocks=blocks, cuts=cuts)
