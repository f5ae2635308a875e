"""The serving planner against the brute force of every path, partition, hardware and batch."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.codesign.serving import (
    Catalog,
    Decoder,
    GpuType,
    Hardware,
    RequestClass,
    Workload,
    plan_serving,
)
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.io import network_from_dict
from tests.codesign.serving.oracle import brute_force, memory_need, serves, stage_seconds

TINY = Decoder(
    "tiny", layers=3, hidden=16, heads=2, kv_heads=1, ffn_hidden=32, vocab_size=50, max_context=64
)
WHOLE = TINY.weights_bytes(0, TINY.layers + 1)

ORDER = ["s", "a", "b", "t"]
EDGES = [(u, v) for k, u in enumerate(ORDER) for v in ORDER[k + 1 :]]


@st.composite
def networks(draw: st.DrawFn) -> object:
    chosen = draw(st.lists(st.sampled_from(EDGES), min_size=1, max_size=len(EDGES), unique=True))
    reached = {"s"}
    for u, v in sorted(chosen, key=lambda e: ORDER.index(e[0])):
        if u in reached:
            reached.add(v)
    if "t" not in reached:
        chosen.append(("s", "t"))
    links = [
        {
            "source": u,
            "target": v,
            "capacity": draw(st.sampled_from([1e4, 1e5, 1e7])),
            "delay_s": draw(st.sampled_from([0.0, 1e-3])),
            "price": 0,
        }
        for u, v in chosen
    ]
    nodes = [{"id": v, "capacity": 1e9, "price": 0} for v in ORDER]
    return network_from_dict({"source": "s", "target": "t", "nodes": nodes, "links": links})


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    n = draw(st.integers(1, 2))
    shares = [0.5, 0.5] if n == 2 else [1.0]
    classes = tuple(
        RequestClass(draw(st.integers(1, 30)), draw(st.integers(1, 20)), s) for s in shares
    )
    return Workload(
        draw(st.sampled_from([0.5, 5.0, 50.0])),
        classes,
        ttft_s=draw(st.sampled_from([None, 0.01, 0.1])),
        tpot_s=draw(st.sampled_from([None, 0.002, 0.02])),
    )


@st.composite
def catalogs(draw: st.DrawFn) -> Catalog:
    types = []
    for k in range(draw(st.integers(1, 2))):
        types.append(
            GpuType(
                f"g{k}",
                draw(st.sampled_from([1e7, 1e8, 1e9])),
                draw(st.sampled_from([1e6, 1e7, 1e8])),
                draw(st.sampled_from([0.3, 0.6, 1.5])) * WHOLE,
                draw(st.sampled_from([1.0, 2.5])),
                draw(st.sampled_from([{1: 1.0}, {1: 1.0, 2: 0.8}])),
            )
        )
    return Catalog(tuple(types))


def _check_plan(plan: object, network: object, w: Workload) -> None:
    """What a plan reports, recomputed: memory within each node, the price, the rate served."""
    from inferplan.codesign.serving import ServingPlan

    assert isinstance(plan, ServingPlan)
    blocks = [(s.first, s.last) for s in plan.stages]
    assert blocks[0][0] == 0 and blocks[-1][1] == TINY.layers + 1
    assert all(x[1] == y[0] for x, y in itertools.pairwise(blocks))
    decode, prefill = 0.0, [0.0] * len(w.classes)
    for s in plan.stages:
        if s.hardware is None:
            continue
        need = memory_need(TINY, w, plan.batch, s.first, s.last)
        assert need <= s.hardware.memory
        assert math.isclose(s.weights_bytes + s.kv_cache_bytes, need)
        secs = stage_seconds(TINY, w, plan.batch, s.first, s.last, s.hardware)
        decode += secs[0]
        prefill = [x + y for x, y in zip(prefill, secs[1:], strict=True)]
    assert decode <= plan.decode_step_s * (1 + 1e-9)  # links come on top
    assert serves(w, plan.batch, plan.decode_step_s, _prefill_of(plan, w), plan.requests_per_s)
    assert math.isclose(
        plan.price_per_hour, sum(s.hardware.price_per_hour for s in plan.stages if s.hardware)
    )


def _prefill_of(plan: object, w: Workload) -> list[float]:
    # each class's prefill: the TTFT less the wait, which is the same for every class
    ttft = plan.ttft_s  # type: ignore[attr-defined]
    stages = [s for s in plan.stages if s.hardware]  # type: ignore[attr-defined]
    own = [sum(s.prefill_s[k] for s in stages) for k in range(len(w.classes))]
    wait = min(t - o for t, o in zip(ttft, own, strict=True))
    return [t - wait for t in ttft]


@settings(max_examples=60, deadline=None)
@given(networks(), workloads(), catalogs(), st.sampled_from([(1,), (1, 4), (2, 8)]))
def test_least_cost_is_the_brute_force_optimum(network, w, catalog, batches) -> None:
    options = {v: catalog.options() for v in network.node_ids}
    expected = brute_force(network, TINY, w, options, batches, "cost")
    try:
        plan = plan_serving(network, TINY, w, catalog=catalog, batches=batches)
    except Infeasible as exc:
        assert expected is None, f"brute force serves it at {expected} $/h: {exc}"
        lifted = {
            "TPOT": replace(w, tpot_s=None),
            "TTFT": replace(w, ttft_s=None),
            "rate": replace(w, requests_per_s=1e-300),
        }
        for name in set(exc.details["binding"]) & set(lifted):  # each named one, lifted alone
            assert brute_force(network, TINY, lifted[name], options, batches, "cost") is not None
        return
    assert expected is not None
    assert math.isclose(plan.price_per_hour, expected, rel_tol=1e-9)
    _check_plan(plan, network, w)


@settings(max_examples=40, deadline=None)
@given(networks(), workloads(), st.data())
def test_most_requests_is_the_brute_force_optimum(network, w, data) -> None:
    hardware = {
        v: Hardware(
            v,
            data.draw(st.sampled_from([1e7, 1e9])),
            data.draw(st.sampled_from([1e6, 1e8])),
            data.draw(st.sampled_from([0.4, 2.0])) * WHOLE,
        )
        for v in data.draw(st.lists(st.sampled_from(ORDER), min_size=1, unique=True))
    }
    expected = brute_force(
        network, TINY, w, {v: [h] for v, h in hardware.items()}, (1, 4), "goodput"
    )
    try:
        plan = plan_serving(
            network, TINY, w, hardware=hardware, objective="goodput", batches=(1, 4)
        )
    except Infeasible:
        assert expected is None
        return
    assert expected is not None
    assert math.isclose(plan.requests_per_s, expected, rel_tol=1e-6)
    assert plan.tokens_per_s == pytest.approx(plan.requests_per_s * w.mean_output_tokens)


def _pair() -> object:
    nodes = [{"id": v, "capacity": 1, "price": 0} for v in "st"]
    links = [{"source": "s", "target": "t", "capacity": 1e9, "price": 0}]
    return network_from_dict({"source": "s", "target": "t", "nodes": nodes, "links": links})


def test_infeasible_names_the_kv_memory() -> None:
    network = _pair()
    tiny_gpu = Catalog((GpuType("g", 1e12, 1e12, 0.01 * WHOLE, 1.0),))
    w = Workload(1.0, (RequestClass(10, 10, 1.0),))
    with pytest.raises(Infeasible) as info:
        plan_serving(network, TINY, w, catalog=tiny_gpu)
    assert info.value.details["binding"] == ["KV memory"]
    assert "KV memory" in str(info.value)


def test_a_class_longer_than_the_context_is_refused() -> None:
    network = _pair()
    w = Workload(1.0, (RequestClass(60, 10, 1.0),))
    with pytest.raises(InvalidArgument, match="longer than the model's context of 64"):
        plan_serving(network, TINY, w, catalog=Catalog((GpuType("g", 1, 1, 1, 1),)))


def test_a_measured_table_times_the_steps() -> None:
    from inferplan.codesign.serving import MeasuredTable

    table = MeasuredTable.of(decode={1: 1e-3, 4: 2e-3}, prefill={1: 1e-3, 64: 4e-3})
    hw = Hardware("m", 1e9, 1e9, 10 * WHOLE, time_model=table)
    w = Workload(1.0, (RequestClass(10, 10, 1.0),))
    plan = plan_serving(_pair(), TINY, w, hardware={"t": hw}, objective="goodput",
                        batches=(1, 2, 4))  # fmt: skip
    (stage,) = [s for s in plan.stages if s.hardware is not None]
    per_layer = {1: 1e-3, 2: 1e-3 + 1e-3 / 3, 4: 2e-3}[plan.batch]
    assert math.isclose(stage.decode_s, stage.layers * per_layer)
    prefill = 1e-3 + 3e-3 * 9 / 63  # 10 tokens, linear between 1 and 64
    assert math.isclose(stage.prefill_s[0], stage.layers * prefill)
