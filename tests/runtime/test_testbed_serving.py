"""``inferplan run NET MODEL --workload W --testbed``: a decoder LM served with its ranks in the
testbed's namespace and cgroups, the hidden states over kernel-shaped links; the links' rates and
the dilation checked by hand, and (as root, with network namespaces and a CPU controller) a run
end to end, its tokens against the unsplit model, nothing left behind on any way out."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from inferplan.runtime.serving import (  # noqa: E402
    ServeRequest,
    ServeStage,
    ServingFailed,
    request_arrivals,
    run_serving,
)
from inferplan.runtime.testbed.linux import missing  # noqa: E402
from inferplan.runtime.testbed.serving import dilated, serving_testbed  # noqa: E402
from tests.cli import app, runner  # noqa: E402

from .pipeline_support import finish, processes_marked, start  # noqa: E402
from .testbed_support import left_by  # noqa: E402

LACKS = missing()
needs_testbed = pytest.mark.skipif(bool(LACKS), reason="testbed: " + "; ".join(LACKS))

from .test_serving_run import CONFIG, MODEL, SHAPE, WORKLOAD  # noqa: E402


def _network(tmp: Path, capacities: list[float], delay_s: float = 0.0) -> Path:
    """The tiny serving chain (gateway, n1, n2, n3, gateway-out) with these link capacities;
    n1's memory 0 so that the plan runs on n2 and n3."""
    nodes = [{"id": "gateway", "capacity": 1e12, "price": 0, "memory": 0,
              "memory_bandwidth": 1e12}]  # fmt: skip
    nodes += [{"id": v, "capacity": 5e7, "price": 0, "memory": m, "memory_bandwidth": 2e7}
              for v, m in (("n1", 0), ("n2", 300e3), ("n3", 300e3))]  # fmt: skip
    nodes += [{"id": "gateway-out", "capacity": 1e12, "price": 0, "memory": 0,
               "memory_bandwidth": 1e12}]  # fmt: skip
    path = ["gateway", "n1", "n2", "n3", "gateway-out"]
    links = [{"source": u, "target": v, "capacity": c, "price": 0, "delay_s": delay_s}
             for u, v, c in zip(path[:-1], path[1:], capacities, strict=True)]  # fmt: skip
    out = tmp / "net.json"
    out.write_text(json.dumps({"source": "gateway", "target": "gateway-out", "nodes": nodes,
                               "links": links}))  # fmt: skip
    return out


def test_the_links_between_ranks_move_a_steps_bits_in_their_planned_time(tmp_path: Path) -> None:
    from inferplan.cli.serving_run import _request

    net = _network(tmp_path, [40e6, 50e6, 20e6, 80e6], delay_s=0.002)
    plan, run, summary = _request(net, MODEL, WORKLOAD, 4, [c.split("=", 1)[1] for c in CONFIG],
                                  [4], False, 0, 60.0, testbed=True)  # fmt: skip
    kept = [s.node for s in plan.stages if s.last > s.first]
    assert kept == ["n2", "n3"] and len(run.stages) == 2
    rates, delays, unrealised = summary["testbed_links"]
    # n2 -> n3 at 20 Mbit/s: the plan counts the step's hidden states (batch 4 x hidden 64)
    # at LlamaConfig's 2 bytes an element, the ranks send float32 (4 bytes): the link runs
    # twice as fast, so that the run's bytes take the plan's time
    assert rates == [pytest.approx(40e6)] and delays == [pytest.approx(0.002)]
    crossed = 4 * 64 * 16 / 20e6 + 0.002
    links = plan.decode_step_s - sum(s.decode_s for s in plan.stages)
    assert unrealised == pytest.approx(links - crossed)
    assert 0 < unrealised < links


@settings(max_examples=50, deadline=None)
@given(k=st.floats(1.0, 50.0), rate=st.floats(0.5, 20.0), seed=st.integers(0, 2**16))
def test_a_dilated_request_is_the_same_run_k_times_slower(k: float, rate: float,
                                                          seed: int) -> None:  # fmt: skip
    stages = (ServeStage(0, 2, True, False, 0.01, (0.02, 0.03)),
              ServeStage(2, 4, False, True, 0.02, (0.04, 0.05)))  # fmt: skip
    request = ServeRequest(transformers.LlamaConfig(**SHAPE), stages, 2, rate,
                           ((4, 3, 0.5), (8, 2, 0.5)), 7, seed=seed)  # fmt: skip
    slow = dilated(request, k, 0.004)
    assert slow.emulate and slow.pace_each
    assert slow.link_decode_s == pytest.approx(0.004 * k)
    assert slow.timeout_s == pytest.approx(request.timeout_s * k)
    for a, b in zip(request.stages, slow.stages, strict=True):
        assert b.decode_s == pytest.approx(a.decode_s * k)
        assert b.prefill_s == pytest.approx(tuple(p * k for p in a.prefill_s))
        assert (a.first, a.last, a.embed, a.head) == (b.first, b.last, b.embed, b.head)
    for (t, c, p), (u, d, q) in zip(request_arrivals(request), request_arrivals(slow),
                                    strict=True):  # fmt: skip
        assert (c, p) == (d, q) and u == pytest.approx(t * k, abs=1e-12)


def test_testbed_with_emulate_or_a_dilation_alone_is_refused(tmp_path: Path) -> None:
    net = _network(tmp_path, [100e6] * 4)
    base = ["run", str(net), MODEL, "--workload", str(WORKLOAD), "--requests", "2", *CONFIG]
    result = runner.invoke(app, [*base, "--testbed", "--emulate"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: --emulate/--no-emulate: the testbed's kernel limits the links and CPUs that "
        "--emulate would emulate: give --testbed or --emulate, not both"]  # fmt: skip
    result = runner.invoke(app, [*base, "--dilation", "3"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: --dilation: stretches a testbed run's time: give it with --testbed"]


# --------------------------------------------------------------------------- as root


@needs_testbed
def test_served_on_the_testbed_the_tokens_match_and_the_steps_keep_the_plan(
    tmp_path: Path,
) -> None:
    net = _network(tmp_path, [100e6] * 4)
    proc, mark = start(["run", str(net), MODEL, "--workload", str(WORKLOAD), "--requests", "6",
                        "--testbed", "--json", *CONFIG])  # fmt: skip
    code, out, err = finish(proc, timeout=300)
    assert code == 0, err
    data = json.loads(out)
    assert data["tokens_match"] is True and data["status"] == "served"
    bed = data["testbed"]
    assert bed["dilation"] >= 1 and len(bed["quotas"]) == 2
    assert all(q is None or 0 < q <= 1 for q in bed["quotas"])
    # float32 sent where the plan counts 2 bytes an element: twice 100 Mbit/s, dilated
    assert bed["link_rates_bps"] == [pytest.approx(2 * 100e6 / bed["dilation"])]
    # the stages are paced to their planned (dilated) steps, the record undilated: no stage's
    # decode step ends before its planned time
    for row, planned in zip(data["steps"]["stages"], data["predicted_run"]["stage_decode_s"],
                            strict=True):  # fmt: skip
        assert row["decode_paced_s"] >= planned * 0.95
    assert data["steps"]["decode_step_s"] >= data["predicted_run"]["decode_step_s"] * 0.95
    for key in ("ttft", "ttft_mean", "tpot_mean", "tokens_per_s"):
        assert math.isfinite(data[key]) and data[key] > 0, key
    assert left_by(proc.pid) == [] and processes_marked(mark) == []


@needs_testbed
def test_link_delays_without_netem_are_refused_in_one_line(tmp_path: Path) -> None:
    from inferplan.runtime.testbed.linux import _has_netem

    if _has_netem():
        pytest.skip("this kernel has netem: the delays are emulated, not refused")
    net = _network(tmp_path, [100e6] * 4, delay_s=0.001)
    proc, _ = start(["run", str(net), MODEL, "--workload", str(WORKLOAD), "--requests", "2",
                        "--testbed", *CONFIG])  # fmt: skip
    code, _, err = finish(proc, timeout=120)
    assert code == 2, err
    assert err.strip().splitlines() == [
        "error: --testbed: the testbed needs the netem qdisc for link delays (this kernel is "
        "built without CONFIG_NET_SCH_NETEM)"
    ]
    assert left_by(proc.pid) == []


@needs_testbed
def test_a_failing_rank_ends_the_run_and_the_testbed() -> None:
    stages = (ServeStage(0, 2, True, False, 0.01, (0.02,)),
              ServeStage(2, 4, False, True, 0.01, (0.02,)))  # fmt: skip
    request = ServeRequest(transformers.LlamaConfig(**SHAPE), stages, 2, rate=50.0,
                           classes=((4, 3, 1.0),), requests=2, timeout_s=20)  # fmt: skip
    with serving_testbed(request, [1e7], [0.0], 0.0) as (slow, bed):
        assert left_by(os.getpid()) != []
        # a stage with layers the model lacks fails in its rank once the ranks are up
        broken = dataclasses.replace(slow, stages=(slow.stages[0], dataclasses.replace(
            slow.stages[1], last=9)))  # fmt: skip
        with pytest.raises(ServingFailed, match="stage 1"):
            run_serving(broken, bed)
    assert left_by(os.getpid()) == []
