"""The valid-cut rule against a direct simulation of two machines, on random graphs."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferplan.errors import InvalidProfile
from inferplan.profiles.cuts import (
    Operation,
    TensorInfo,
    build_profile,
    owner_of,
    parse_block_spec,
    parse_shape,
)


@st.composite
def graphs(draw):
    """Operations in execution order, each owned by one of a few blocks, reading earlier values."""
    n = draw(st.integers(1, 9))
    owners = draw(st.lists(st.sampled_from("abcd"), min_size=n, max_size=n))
    ops, values = [], {"x": TensorInfo("x", (1,), "float32", float(draw(st.integers(1, 9))))}
    for k in range(n):
        made = list(values)
        inputs = draw(st.lists(st.sampled_from(made), min_size=1, max_size=3, unique=True))
        name = f"v{k}"
        values[name] = TensorInfo(name, (1,), "float32", float(draw(st.integers(1, 9))))
        work = float(draw(st.sampled_from([0, 0, 1, 2, 5])))
        ops.append(Operation(f"op{k}", owners[k], tuple(inputs), (name,), work))
    outputs = [f"v{n - 1}"]
    return ops, values, outputs


def _simulate(ops, values, outputs, order, k):
    """Machine A runs the ops of the first k blocks, B the rest: can it run, and what is sent?"""
    on_a = [order.index(op.owner) < k for op in ops]
    produced_by_b = {v for op, a in zip(ops, on_a, strict=True) if not a for v in op.outputs}
    if any(v in produced_by_b for op, a in zip(ops, on_a, strict=True) if a for v in op.inputs):
        return None
    available_on_a = {"x"} | {v for op, a in zip(ops, on_a, strict=True) if a for v in op.outputs}
    needed_by_b = {v for op, a in zip(ops, on_a, strict=True) if not a for v in op.inputs}
    sent = available_on_a & (needed_by_b | set(outputs))
    return math.fsum(values[v].bits for v in sent)


@given(graphs())
def test_profile_keeps_exactly_the_runnable_cuts(graph):
    ops, values, outputs = graph
    order = list(dict.fromkeys(op.owner for op in ops))
    m = len(order)
    work = [math.fsum(op.flops for op in ops if op.owner == b) for b in order]
    sent = [_simulate(ops, values, outputs, order, k) for k in range(m + 1)]
    if sum(work) == 0:
        with pytest.raises(InvalidProfile):
            build_profile("g", ops, values, ["x"], outputs)
        return
    result = build_profile("g", ops, values, ["x"], outputs)
    assert [c.valid for c in result.cuts] == [s is not None for s in sent]
    assert [c.bits for c in result.cuts if c.valid] == [s for s in sent if s is not None]
    kept = [c.index for c in result.cuts if c.kept]
    assert kept[0] == 0 and kept[-1] == m and all(sent[k] is not None for k in kept)
    assert list(result.profile.activation_bits) == [sent[k] for k in kept]
    assert result.profile.flops == tuple(math.fsum(work[a:b]) for a, b in pairwise(kept))
    valid = [k for k in range(m + 1) if sent[k] is not None]
    for a, b in pairwise(kept):
        # As many blocks as possible: no valid cut splits a block into two with work each ...
        assert not any(sum(work[a:v]) > 0 and sum(work[v:b]) > 0 for v in valid if a < v < b)
    for v in valid:
        if v in kept:
            continue
        # ... and a dropped valid cut only moves zero work, to a cut no larger (or to the ends).
        twins = [j for j in kept if sum(work[min(v, j) : max(v, j)]) == 0]
        assert any(j in (0, m) or sent[j] <= sent[v] for j in twins)


def test_owner_of_and_specs():
    path = ["layer1", "layer1.0", "layer1.0.conv1"]
    assert owner_of(path, None) == "layer1"
    assert owner_of(path, 2) == "layer1.0"
    assert owner_of(path, 5) == "layer1.0.conv1"
    assert owner_of(path, parse_block_spec("layer1.0+stem,layer1")) == "layer1.0+stem"
    assert owner_of(path, parse_block_spec("fc")) is None
    assert owner_of([], None) is None
    for bad in ("depth=0", "a,,b"):
        with pytest.raises(InvalidProfile, match="blocks"):
            parse_block_spec(bad)
    with pytest.raises(InvalidProfile, match="input_shapes"):
        parse_shape("1,0,3")


def test_state_stays_with_its_first_user_and_crosses_only_to_later_users():
    from inferplan.profiles.cuts import Operation, TensorInfo, build_profile

    def info(name, bits):
        return TensorInfo(name, (1,), "float32", bits)

    values = {v: info(v, b) for v, b in
              (("x", 8.0), ("k1", 100.0), ("k2", 1000.0), ("h1", 8.0), ("h2", 8.0),
               ("h3", 8.0), ("kk", 1000.0))}  # fmt: skip
    ops = [
        Operation("a", "l1", ("x", "k1"), ("h1",), 1.0),
        Operation("copy", None, ("k2",), ("kk",), 0.0),  # made from state alone: state
        Operation("b", "l2", ("h1", "kk"), ("h2",), 1.0),
        Operation("c", "l3", ("h2", "kk"), ("h3",), 1.0),  # reads l2's cache too
    ]
    got = build_profile("m", ops, values, ["x"], ["h3"], state=frozenset({"k1", "k2"}))
    assert [sorted(t.name for t in c.tensors) for c in got.cuts] == [
        ["x"],
        ["h1"],
        ["h2", "kk"],
        ["h3"],
    ]
    assert got.placement["copy"] == 2
    plain = build_profile("m", ops, values, ["x", "k1", "k2"], ["h3"])
    assert sorted(t.name for t in plain.cuts[0].tensors) == ["k1", "k2", "x"]
