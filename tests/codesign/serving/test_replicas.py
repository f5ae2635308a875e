"""Many pipelines (``plan_serving(pipelines="any")``) against the brute force of every set of
node-disjoint paths, each with every partition, hardware and batch."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.codesign.serving import (
    Catalog,
    GpuType,
    Hardware,
    ReplicaPlan,
    RequestClass,
    Workload,
    plan_serving,
    replicas,
)
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network import Network
from inferplan.network.io import network_from_dict
from tests.codesign.serving.oracle import memory_need, paths, serves, stage_seconds
from tests.codesign.serving.test_planner import (
    ORDER,
    TINY,
    WHOLE,
    _check_plan,
    catalogs,
    networks,
    workloads,
)

BATCHES = (1, 4)


def _best_rate(w: Workload, b: int, decode: float, prefill: Sequence[float]) -> float:
    """The most requests/s the model serves within the bounds, by bisection (0: none)."""
    if not serves(w, b, decode, prefill, 1e-300):
        return 0.0
    low, high = 0.0, 1e9
    for _ in range(90):
        mid = (low + high) / 2
        low, high = (mid, high) if serves(w, b, decode, prefill, mid) else (low, mid)
    return low


def _replicas(network: Network, w: Workload, options: Mapping[str, Sequence[Hardware]],
              batches: Sequence[int]
              ) -> dict[frozenset[str], list[tuple[float, float]]]:  # fmt: skip
    """Every replica: (price, most requests/s) by the nodes it holds (its path's inner nodes,
    and the source or the target where it runs blocks), those of another at least as cheap
    serving at least as much left out."""
    links = {(e.source, e.target): e for e in network.links}
    n = TINY.layers + 1
    found: dict[frozenset[str], list[tuple[float, float]]] = {}
    for b in batches:
        for path in paths(network):
            for cuts in itertools.combinations_with_replacement(range(n + 1), len(path) - 1):
                bounds = [0, *cuts, n]
                choices = [
                    [None] if first == last else
                    [h for h in options.get(v, [])
                     if memory_need(TINY, w, b, first, last) <= h.memory]
                    for v, first, last in zip(path, bounds, bounds[1:], strict=False)
                ]  # fmt: skip
                for hws in itertools.product(*choices):
                    times = [0.0] * (1 + len(w.classes))
                    for k, hw in enumerate(hws):
                        if hw is not None:
                            secs = stage_seconds(TINY, w, b, bounds[k], bounds[k + 1], hw)
                            times = [x + y for x, y in zip(times, secs, strict=True)]
                    for k, (u, z) in enumerate(itertools.pairwise(path)):
                        e, cut = links[u, z], bounds[k + 1]
                        bits = [TINY.cut_bits(cut, b, b)]
                        bits += [TINY.cut_bits(cut, c.prompt_tokens, 1) for c in w.classes]
                        times = [x + y / e.capacity + e.delay_s
                                 for x, y in zip(times, bits, strict=True)]  # fmt: skip
                    rate = _best_rate(w, b, times[0], times[1:])
                    if rate <= 0:
                        continue
                    ends = {network.source, network.target}
                    holds = frozenset(v for v, hw in zip(path, hws, strict=True)
                                      if v not in ends or hw is not None)  # fmt: skip
                    price = sum(hw.price_per_hour for hw in hws if hw is not None)
                    found.setdefault(holds, []).append((price, rate))
    for holds, got in found.items():
        found[holds] = [
            (p, r)
            for p, r in got
            if not any(q <= p and s >= r and (q, s) != (p, r) for q, s in got)
        ]
    return found  # fmt: skip


def _disjoint_sets(holds: Sequence[frozenset[str]]) -> list[tuple[frozenset[str], ...]]:
    out: list[tuple[frozenset[str], ...]] = []
    for k in range(1, len(holds) + 1):
        for combo in itertools.combinations(holds, k):
            if all(not (a & b) for a, b in itertools.combinations(combo, 2)):
                out.append(combo)
    return out


def brute_force_many(network: Network, w: Workload, options: Mapping[str, Sequence[Hardware]],
                     objective: str, batches: Sequence[int] = BATCHES) -> float | None:  # fmt: skip
    """The least $/h serving ``w``'s rate (cost) or the most requests/s (goodput) of any set
    of node-disjoint replicas; None when none serves it."""
    found = _replicas(network, w, options, batches)
    best: float | None = None
    for combo in _disjoint_sets(list(found)):
        for chosen in itertools.product(*(found[h] for h in combo)):
            served = sum(r for _, r in chosen)
            if objective == "cost":
                if served >= w.requests_per_s * (1 - 1e-9):
                    price = sum(p for p, _ in chosen)
                    best = price if best is None else min(best, price)
            else:
                best = served if best is None else max(best, served)
    return best


def _check_replicas(plan: ReplicaPlan, network: Network, w: Workload) -> None:
    """Each replica recomputed as a one-path plan (memory, price, rate within the bounds),
    the replicas disjoint but for the source and target, which run blocks in one at most."""
    assert plan.status == "optimal" and plan.gap == 0
    held: list[str] = []
    links = {(e.source, e.target): e for e in network.links}
    for r in plan.replicas:
        _check_plan(r, network, w)
        # the times of its stages and links recomputed: it serves its rate within the bounds
        times = [0.0] * (1 + len(w.classes))
        for s in r.stages:
            if s.hardware is not None:
                secs = stage_seconds(TINY, w, r.batch, s.first, s.last, s.hardware)
                times = [x + y for x, y in zip(times, secs, strict=True)]
        for s, (u, z) in zip(r.stages, itertools.pairwise(r.path), strict=False):
            e = links[u, z]
            bits = [TINY.cut_bits(s.last, r.batch, r.batch)]
            bits += [TINY.cut_bits(s.last, c.prompt_tokens, 1) for c in w.classes]
            times = [x + y / e.capacity + e.delay_s for x, y in zip(times, bits, strict=True)]
        assert math.isclose(times[0], r.decode_step_s, rel_tol=1e-9)
        assert serves(w, r.batch, times[0], times[1:], r.requests_per_s * (1 - 1e-9))
        assert r.requests_per_s <= r.max_requests_per_s * (1 + 1e-12)
        ends = {network.source, network.target}
        held += [s.node for s in r.stages if s.node not in ends or s.hardware is not None]
        assert r.path[0] == network.source and r.path[-1] == network.target
    assert len(held) == len(set(held))
    assert math.isclose(plan.price_per_hour, sum(r.price_per_hour for r in plan.replicas))
    assert math.isclose(plan.requests_per_s, sum(r.requests_per_s for r in plan.replicas))


@settings(max_examples=40, deadline=None)
@given(networks(), workloads(), catalogs())
def test_least_cost_is_the_brute_force_optimum(network, w, catalog) -> None:
    options = {v: catalog.options() for v in network.node_ids}
    expected = brute_force_many(network, w, options, "cost")
    try:
        plan = plan_serving(network, TINY, w, catalog=catalog, batches=BATCHES, pipelines="any")
    except Infeasible as exc:
        assert expected is None, f"brute force serves it at {expected} $/h: {exc}"
        return
    assert expected is not None, plan
    assert math.isclose(plan.price_per_hour, expected, rel_tol=1e-9)
    assert math.isclose(plan.requests_per_s, w.requests_per_s, rel_tol=1e-9)
    _check_replicas(plan, network, w)
    try:  # one pipeline is one of the plans: never cheaper
        one = plan_serving(network, TINY, w, catalog=catalog, batches=BATCHES)
    except Infeasible:
        return
    assert plan.price_per_hour <= one.price_per_hour * (1 + 1e-9)


@settings(max_examples=30, deadline=None)
@given(networks(), workloads(), st.data())
def test_most_requests_is_the_brute_force_optimum(network, w, data) -> None:
    hardware = {
        v: Hardware(v, data.draw(st.sampled_from([1e7, 1e9])),
                    data.draw(st.sampled_from([1e6, 1e8])),
                    data.draw(st.sampled_from([0.4, 2.0])) * WHOLE)
        for v in data.draw(st.lists(st.sampled_from(ORDER), min_size=1, unique=True))
    }  # fmt: skip
    expected = brute_force_many(network, w, {v: [h] for v, h in hardware.items()}, "goodput")
    try:
        plan = plan_serving(network, TINY, w, hardware=hardware, objective="goodput",
                            batches=BATCHES, pipelines="any")  # fmt: skip
    except Infeasible:
        assert expected is None
        return
    assert expected is not None
    assert math.isclose(plan.requests_per_s, expected, rel_tol=1e-6)
    _check_replicas(plan, network, w)
    one = plan_serving(network, TINY, w, hardware=hardware, objective="goodput",
                       batches=BATCHES)  # fmt: skip
    assert plan.requests_per_s >= one.requests_per_s * (1 - 1e-9)


def _parallel(k: int) -> Network:
    """A source, ``k`` parallel nodes and a target."""
    inner = [f"g{j}" for j in range(k)]
    nodes = [{"id": v, "capacity": 1e9, "price": 0} for v in ["s", *inner, "t"]]
    links = [{"source": u, "target": v, "capacity": 1e9, "price": 0}
             for g in inner for u, v in (("s", g), (g, "t"))]  # fmt: skip
    return network_from_dict({"source": "s", "target": "t", "nodes": nodes, "links": links})


def test_one_pipeline_is_the_default() -> None:
    gpus = Catalog((GpuType("g", 1e9, 1e8, 2 * WHOLE, 1.0),))
    w = Workload(1.0, (RequestClass(10, 10, 1.0),), tpot_s=0.02)
    network = _parallel(2)
    assert plan_serving(network, TINY, w, catalog=gpus, pipelines=1) == plan_serving(
        network, TINY, w, catalog=gpus
    )


def test_a_rate_past_what_disjoint_replicas_serve_binds_the_rate() -> None:
    # every path holds one of the 3 inner nodes: 3 replicas at most, each serving at most
    # the most one pipeline serves on the same hardware
    w = Workload(1.0, (RequestClass(10, 10, 1.0),), tpot_s=0.02)
    network = _parallel(3)
    hardware = {v: Hardware("g", 1e9, 1e8, 2 * WHOLE) for v in network.node_ids}
    most = plan_serving(network, TINY, w, hardware=hardware, objective="goodput",
                        batches=BATCHES).requests_per_s  # fmt: skip
    many = plan_serving(network, TINY, w, hardware=hardware, objective="goodput",
                        pipelines="any", batches=BATCHES)  # fmt: skip
    assert len(many.replicas) == 3 and most < many.requests_per_s <= 3 * most * (1 + 1e-9)
    gpus = Catalog((GpuType("g", 1e9, 1e8, 2 * WHOLE, 1.0),))
    near = replace(w, requests_per_s=many.requests_per_s * 0.999)
    served = plan_serving(network, TINY, near, catalog=gpus, pipelines="any",
                          batches=BATCHES)  # fmt: skip
    options = {v: gpus.options() for v in network.node_ids}
    assert served.price_per_hour == brute_force_many(network, near, options, "cost")
    with pytest.raises(Infeasible, match="binding: rate") as info:
        plan_serving(network, TINY, replace(w, requests_per_s=3.01 * most), catalog=gpus,
                     pipelines="any", batches=BATCHES)  # fmt: skip
    assert info.value.details["binding"] == ["rate"]


def test_infeasible_names_the_kv_memory() -> None:
    tiny_gpu = Catalog((GpuType("g", 1e12, 1e12, 0.01 * WHOLE, 1.0),))
    with pytest.raises(Infeasible) as info:
        plan_serving(_parallel(2), TINY, Workload(1.0, (RequestClass(10, 10, 1.0),)),
                     catalog=tiny_gpu, pipelines="any")  # fmt: skip
    assert info.value.details["binding"] == ["KV memory"]


def test_bad_pipelines_and_time_limits_are_refused() -> None:
    gpus = Catalog((GpuType("g", 1e9, 1e8, 2 * WHOLE, 1.0),))
    w = Workload(1.0, (RequestClass(10, 10, 1.0),))
    with pytest.raises(InvalidArgument, match="pipelines"):
        plan_serving(_parallel(2), TINY, w, catalog=gpus, pipelines=2)  # type: ignore[call-overload]
    with pytest.raises(InvalidArgument, match="time_limit"):
        plan_serving(_parallel(2), TINY, w, catalog=gpus, time_limit=1.0)
    with pytest.raises(InvalidArgument, match="time_limit"):
        plan_serving(_parallel(2), TINY, w, catalog=gpus, pipelines="any", time_limit=-1.0)


def test_a_time_limit_is_a_status_with_a_bound() -> None:
    # cut short before any search ends: the bound proven is still below every plan's $/h
    gpus = Catalog((GpuType("g", 1e9, 1e8, 2 * WHOLE, 1.0), GpuType("h", 1e8, 1e7, WHOLE, 0.4)))
    w = Workload(1.0, (RequestClass(10, 10, 1.0),), tpot_s=0.02)
    network = _parallel(3)
    plan = plan_serving(network, TINY, w, catalog=gpus, pipelines="any", time_limit=1e-9,
                        batches=BATCHES)  # fmt: skip
    expected = brute_force_many(network, w, {v: gpus.options() for v in network.node_ids},
                                "cost")  # fmt: skip
    assert plan.status == "time_limit" and expected is not None
    assert plan.bound is not None and plan.bound <= expected * (1 + 1e-9)
    if plan.replicas:
        assert plan.price_per_hour >= expected * (1 - 1e-9)
        assert plan.gap is not None and plan.gap >= 0
    whole = plan_serving(network, TINY, w, catalog=gpus, pipelines="any", batches=BATCHES)
    assert whole.status == "optimal" and math.isclose(whole.price_per_hour, expected)


@settings(max_examples=25, deadline=None)
@given(networks(), workloads(), catalogs(), st.sampled_from([1, 2]))
def test_the_first_bound_holds_whatever_share_it_takes(network, w, catalog, share) -> None:
    # the first bound's stand-in column decides more plans when it stands for columns
    # serving up to all of the rate: the optimum stays the brute force's
    options = {v: catalog.options() for v in network.node_ids}
    expected = brute_force_many(network, w, options, "cost")
    with patch.object(replicas, "BOUND_SHARE", share):
        try:
            plan = plan_serving(network, TINY, w, catalog=catalog, batches=BATCHES,
                                pipelines="any")  # fmt: skip
        except Infeasible:
            assert expected is None
            return
    assert expected is not None
    assert math.isclose(plan.price_per_hour, expected, rel_tol=1e-9)


def _chains(k: int) -> Network:
    """A source, ``k`` chains of two nodes and a target, every link alike."""
    nodes = [{"id": v, "capacity": 1e9, "price": 0}
             for v in ["s", *(f"{x}{j}" for j in range(k) for x in "ab"), "t"]]  # fmt: skip
    hops = [(u, v) for j in range(k) for u, v in (("s", f"a{j}"), (f"a{j}", f"b{j}"),
                                                  (f"b{j}", "t"))]  # fmt: skip
    links = [{"source": u, "target": v, "capacity": 1e9, "price": 0} for u, v in hops]
    return network_from_dict({"source": "s", "target": "t", "nodes": nodes, "links": links})


@pytest.mark.parametrize("share", [1.0, 2.5, 4.5])
def test_replicas_alike_on_paths_alike_are_all_found(share: float) -> None:
    # GPUs too small for the model alone, five chains alike, one batch: the whole network's
    # search keeps one of each alike column, the rate needs several, each serving a fraction
    # of it (less than a quarter at 4.5 times what one serves)
    gpus = Catalog((GpuType("small", 1e9, 1e8, 0.8 * WHOLE, 1.0),))
    network = _chains(5)
    w = Workload(1.0, (RequestClass(10, 10, 1.0),), tpot_s=0.02)
    chain = {v: Hardware(v, 1e9, 1e8, 0.8 * WHOLE) for v in ("a0", "b0")}
    one = plan_serving(network, TINY, w, hardware=chain, objective="goodput", batches=(1,))
    w = replace(w, requests_per_s=share * one.requests_per_s)
    options = {v: gpus.options() for v in network.node_ids}
    expected = brute_force_many(network, w, options, "cost", (1,))
    plan = plan_serving(network, TINY, w, catalog=gpus, batches=(1,), pipelines="any")
    assert expected is not None and math.isclose(plan.price_per_hour, expected)
    _check_replicas(plan, network, w)
