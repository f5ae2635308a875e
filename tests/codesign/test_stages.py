"""The stage arithmetic of one deployment, against the definitions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.codesign import compile_instance
from inferplan.codesign.stages import stages
from tests.oracles import deployments, evaluate
from tests.strategies import small_dags, small_profiles


@settings(max_examples=60, deadline=None)
@given(net=small_dags(max_nodes=5), profile=small_profiles(max_blocks=4), data=st.data())
def test_delays_interval_and_increments_follow_the_definitions(net, profile, data):
    inst = compile_instance(net, profile)
    path, partition = data.draw(st.sampled_from(list(deployments(net, profile.n_blocks))))
    index = {v: k for k, v in enumerate(inst.node_ids)}
    s = stages(inst, [index[v] for v in path], partition)
    oracle = evaluate(net, profile, path, partition, 1.0)
    assert s.interval(inst.capacity, inst.bandwidth) == pytest.approx(oracle.interval, rel=1e-12)
    kind, where = s.bottleneck(inst.capacity, inst.bandwidth)
    compute, transfer = s.delays(inst.capacity, inst.bandwidth)
    slowest = compute[s.nodes.index(where)] if kind == "node" else transfer[s.links.index(where)]
    assert slowest == max(compute + transfer)
    # Buying the increments for an interval reaches exactly that interval (or better).
    beta = 0.5 * oracle.interval
    rho, sigma = s.increments(beta, inst.capacity, inst.bandwidth)
    assert all(x >= 0 for x in [*rho.values(), *sigma.values()])
    assert s.interval(inst.capacity, inst.bandwidth, rho, sigma) <= beta * (1 + 1e-9)
    # all three at once, as a plan reads them, from the stages' own definitions
    interval, (at_kind, at), latency = s.outcome(inst.capacity, inst.bandwidth, rho, sigma)
    assert interval == s.interval(inst.capacity, inst.bandwidth, rho, sigma)
    assert (at_kind, at) == s.bottleneck(inst.capacity, inst.bandwidth, rho, sigma)
    assert latency == s.latency(inst.capacity, inst.bandwidth, rho, sigma)
    compute, transfer = s.delays(inst.capacity, inst.bandwidth, rho, sigma)
    assert latency == pytest.approx(sum(compute) + sum(transfer) + sum(s.propagation))


@settings(max_examples=60, deadline=None)
@given(size=st.integers(0, 6), keys=st.lists(st.integers(-9, 9), max_size=12),
       kept=st.sampled_from([0, 2, 4096]))  # fmt: skip
def test_a_lookup_makes_each_item_once_and_refuses_what_a_tuple_refuses(size, keys, kept):
    from unittest import mock

    from inferplan.codesign import instance
    from inferplan.codesign.instance import Lookup

    made: list[int] = []
    items = Lookup(size, lambda k: made.append(k) or (k, "item"))
    reference = tuple((k, "item") for k in range(size))
    with mock.patch.object(instance, "KEPT_ITEMS", kept):
        for key in keys:
            if -size <= key < size:
                assert items[key] == reference[key]
            else:
                with pytest.raises(IndexError):
                    items[key]
    looked_up = [key for key in keys if -size <= key < size]
    if kept >= len(set(looked_up)):
        assert len(made) == len(set(looked_up))  # each kept, not made again
    else:
        assert len(set(looked_up)) <= len(made) <= len(looked_up)
    assert len(items._made) <= kept  # no more kept than allowed
    assert list(items) == list(reference) and items[:] == reference[:]


def test_a_plans_names_and_memory_table_are_made_when_first_read_and_kept():
    import copy
    import dataclasses
    import pickle

    import inferplan
    from inferplan.codesign import solve_psg, throughput_optimal
    from inferplan.codesign.plan import Later

    inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    plan = solve_psg(inst, 0.5 * throughput_optimal(inst).interval)
    for name in ("layers", "sends", "memory"):
        assert type(vars(plan)[name]) is Later  # nothing made by the solve
    twin = pickle.loads(pickle.dumps(plan))  # pickled as the values
    assert not any(type(vars(twin)[n]) is Later for n in ("layers", "sends", "memory"))
    # the definitions: node l runs blocks done+1..partition[l] and the link after it carries
    # the activation of block partition[l]; it needs memory_need[done, partition[l]]
    blocks = inst.profile.blocks
    ranges = list(zip([0, *plan.partition[:-1]], plan.partition, strict=True))
    assert plan.layers == tuple(tuple(blocks[i:j]) for i, j in ranges)
    assert plan.sends == tuple(("input",) if b == 0 else (blocks[b - 1],)
                               for b in plan.partition[:-1])  # fmt: skip
    assert [m.need for m in plan.memory] == [inst.memory_need[i, j] for i, j in ranges]
    assert all(m.memory is None and m.added == 0 for m in plan.memory)  # unlimited memory
    assert type(vars(plan)["layers"]) is tuple  # kept once made
    assert plan == twin == copy.copy(plan) == dataclasses.replace(plan)
    assert dataclasses.replace(plan, cost=plan.cost + 1) != plan


def _bottleneck_named(inst, kind, at):
    from inferplan.codesign.plan import Bottleneck

    if kind == "node":
        return Bottleneck("node", inst.node_ids[at])
    link = inst.links[at]
    return Bottleneck("link", f"{link.source}->{link.target}")


def test_a_kernels_deployment_reads_its_bottleneck_and_latency_when_asked_as_if_eagerly():
    import pickle

    import inferplan
    from inferplan.codesign import throughput_optimal
    from inferplan.codesign.engine.compiled import available
    from inferplan.codesign.plan import Later

    if not available():
        pytest.skip("needs numba")
    for seed in range(4):
        inst = compile_instance(inferplan.tiered(seed=seed), inferplan.resnet50())
        lazy = throughput_optimal(inst, engine="compiled")
        eager = throughput_optimal(inst, engine="numpy")  # evaluates every stage at once
        assert type(vars(lazy)["latency"]) is Later and type(vars(lazy)["bottleneck"]) is Later
        twin = pickle.loads(pickle.dumps(lazy))
        assert lazy.interval == eager.interval
        if lazy.path == eager.path and lazy.partition == eager.partition:
            assert (lazy.bottleneck, lazy.latency) == (eager.bottleneck, eager.latency)
        index = {v: k for k, v in enumerate(inst.node_ids)}
        s = stages(inst, [index[v] for v in lazy.path], lazy.partition)
        assert lazy.latency == s.latency(inst.capacity, inst.bandwidth)
        kind, at = s.bottleneck(inst.capacity, inst.bandwidth)
        assert lazy.bottleneck == _bottleneck_named(inst, kind, at)
        assert twin == lazy
