"""Splitting a model at ideals of its layer graph: the stages, run in order, give the unsplit
model's outputs, on a two-branch model and an Inception-style one built here."""

from __future__ import annotations

import itertools
import random

import pytest

torch = pytest.importorskip("torch")

from inferplan.errors import InvalidArgument  # noqa: E402
from inferplan.profiles.ideals import graph_cuts  # noqa: E402
from inferplan.runtime.split import trace_model  # noqa: E402

from .models import Inception, TwoBranch  # noqa: E402

CASES = [(TwoBranch, [(2, 8)], None), (Inception, [(1, 3, 8, 8)], 2)]


@pytest.mark.parametrize(("model", "shapes", "depth"), CASES)
def test_stages_at_any_chain_of_ideals_give_the_models_outputs(model, shapes, depth) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    net = model().eval()
    traced = trace_model(net, shapes, blocks=depth)
    graph = traced.profile.graph
    assert graph is not None
    cuts = graph_cuts(graph)
    assert cuts.n_cuts > graph.n_layers + 1  # branched: more ideals than a chain has cuts
    inputs = [torch.randn(*s) for s in shapes]
    with torch.no_grad():
        expected = net(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        rng = random.Random(0)
        for _ in range(12):
            inner = sorted(rng.sample(range(1, cuts.last), k=min(3, cuts.last - 1)))
            chain = [0]
            for k in inner:  # keep a chain: each ideal inside the next
                if cuts.subset[chain[-1], k]:
                    chain.append(k)
            chain.append(cuts.last)
            layers = [cuts.units_between(a, b) for a, b in itertools.pairwise(chain)]
            split = traced.split_layers(layers)
            got = split.run(*inputs)
            assert len(got) == len(expected)
            for a, b in zip(got, expected, strict=True):
                assert torch.equal(a, b)
            # every value a stage sends is one the next stage receives, in the same order
            assert split.boundaries[0] == tuple(n.name for n in traced.graph_module.graph.nodes
                                                if n.op == "placeholder")  # fmt: skip


def test_splitting_at_sets_that_are_no_ideals_is_refused() -> None:
    traced = trace_model(TwoBranch().eval(), [(2, 8)])
    graph = traced.profile.graph
    assert graph is not None
    with pytest.raises(InvalidArgument, match="reads 'stem', which no stage up to its own runs"):
        traced.split_layers([["a1"], [v for v in graph.layers if v != "a1"]])
    with pytest.raises(InvalidArgument, match="runs twice"):
        traced.split_layers([list(graph.layers), ["stem"]])
    with pytest.raises(InvalidArgument, match="no stage runs"):
        traced.split_layers([list(graph.layers[:-1])])


def test_the_front_end_writes_the_layer_graph_and_plans_use_it() -> None:
    import inferplan
    from inferplan.profiles.io import profile_from_dict

    traced = trace_model(TwoBranch().eval(), [(2, 8)])
    profile = traced.profile
    graph = profile.graph
    assert graph is not None
    reads = {(u, v) for u, v in graph.edges}
    # the join (the concatenation outside every module) is its own layer, so both branches
    # stay apart; the stem's output is returned and read: an output with an edge to output
    assert {("a2", "cat"), ("b1", "cat"), ("cat", "head"), ("stem", "output")} <= reads
    assert sum(graph.flops) == pytest.approx(profile.total_flops)
    assert profile_from_dict(profile.to_dict()) == profile
    net = inferplan.load_network("examples/network.json")
    chain = inferplan.throughput(net, profile, cuts="chain")
    best = inferplan.throughput(net, profile, cuts="graph")
    assert best.interval <= chain.interval
