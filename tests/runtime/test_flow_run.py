"""``inferplan run --pipelines any`` end to end: a flow plan carried out by real processes on
127.0.0.1, one per node the pipelines visit, and the dispatch that spreads the inferences.

The outputs are compared here with the unsplit model's; the predicted throughput with the one
computed here from the profile's FLOPs and the capacities; the dispatch with the counts the
rates give.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from inferplan.profiles.from_torch import profile_module  # noqa: E402
from inferplan.runtime.flows import weighted_round_robin  # noqa: E402

from . import models  # noqa: E402
from .pipeline_support import model_args, processes_marked, run, write  # noqa: E402

K = 120


@given(st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=8), st.integers(1, 300))
@settings(max_examples=200, deadline=None)
def test_every_prefix_of_the_dispatch_is_near_the_rates_share(rates, count):
    picks = weighted_round_robin(rates, count)
    total = math.fsum(rates)
    seen = [0] * len(rates)
    for n, p in enumerate(picks, start=1):
        seen[p] += 1
        for q, r in enumerate(rates):
            assert abs(seen[q] - n * r / total) <= max(1, len(rates) - 1) + 1e-9


@given(st.lists(st.integers(1, 9), min_size=1, max_size=6))
def test_integer_rates_are_met_exactly_every_cycle(weights):
    cycle = sum(weights)
    picks = weighted_round_robin([float(w) for w in weights], 3 * cycle)
    for k in range(3):
        part = picks[k * cycle : (k + 1) * cycle]
        assert [part.count(p) for p in range(len(weights))] == weights


def test_bad_rates_are_refused():
    from inferplan.errors import InvalidArgument

    for rates in ([], [1.0, 0.0], [math.nan], [math.inf]):
        with pytest.raises(InvalidArgument, match="rates"):
            weighted_round_robin(rates, 3)


def _mlp_flops():
    with torch.device("meta"):
        model = models.mlp()
    return profile_module(model, [(1, 16)]).profile.flops


def _network(capacity, links, edge_capacity=1e3):
    """Nodes ``s`` and ``t`` of ``edge_capacity`` FLOP/s and the others as given; links of
    1e9 bit/s."""
    nodes = [{"id": "s", "capacity": edge_capacity, "price": 1e-6},
             {"id": "t", "capacity": edge_capacity, "price": 1e-6}]  # fmt: skip
    nodes += [{"id": v, "capacity": c, "price": 1e-6} for v, c in capacity.items()]
    return {"source": "s", "target": "t", "nodes": nodes,
            "links": [{"source": u, "target": v, "capacity": 1e9, "price": 1e-5}
                      for u, v in links]}  # fmt: skip


def _flow_run(tmp_path, network, extra=()):
    net = write(tmp_path / "net.json", network)
    outputs, page = tmp_path / "out.pt", tmp_path / "run.html"
    code, out, err, mark = run(["run", str(net), *model_args("mlp"), "--pipelines", "any",
                                "--inferences", str(K), "--warmup", "10", "--outputs",
                                str(outputs), "--timeout", "30", "--json", "--report",
                                str(page), *extra])  # fmt: skip
    assert code == 0, err
    assert processes_marked(mark) == []
    report = json.loads(out)
    html = page.read_text()
    assert f"{report['throughput']['measured']:.6g} inferences/s (predicted" in html
    return report, torch.load(outputs)


@pytest.fixture(scope="module")
def parallel(tmp_path_factory):
    """Two equal nodes side by side between the source and the target: each runs the whole
    model, half the inferences each."""
    flops = _mlp_flops()
    capacity = 40.0 * sum(flops)  # 40 inferences/s each: 25 ms per inference
    network = _network({"a": capacity, "b": capacity},
                       [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")], edge_capacity=1.0)
    report, outputs = _flow_run(tmp_path_factory.mktemp("parallel"), network)
    return report, outputs, (2 * capacity + 2.0) / sum(flops)


def test_a_flow_runs_and_its_outputs_equal_the_unsplit_model(parallel):
    report, outputs, _ = parallel
    torch.manual_seed(0)
    from inferplan.runtime.measure import build_model, stream_inputs

    model = build_model("tests.runtime.models:mlp", seed=0)
    want = torch.stack([model(*x) for x in stream_inputs([(1, 16)], K, seed=0)])
    assert outputs.shape == want.shape
    assert torch.allclose(outputs, want, rtol=1.3e-6, atol=1e-5)
    assert report["outputs_match"] is True


def test_the_predicted_flow_is_the_capacities_over_the_work(parallel):
    report, _, expected = parallel
    assert report["throughput"]["predicted"] == pytest.approx(expected, rel=1e-6)


def test_the_measured_flow_is_near_the_predicted_one(parallel):
    report, _, _ = parallel
    measured, predicted = report["throughput"]["measured"], report["throughput"]["predicted"]
    assert 0.85 * predicted <= measured <= 1.08 * predicted


def test_each_pipeline_is_dispatched_its_share_and_measured(parallel):
    report, _, _ = parallel
    rates = [p["rate"] for p in report["pipelines"]]
    counts = [p["dispatched"] for p in report["pipelines"]]
    assert sum(counts) == K
    for rate, count in zip(rates, counts, strict=True):
        assert abs(count - K * rate / sum(rates)) < 1
    busy = [p for p in report["pipelines"] if p["dispatched"] >= 10]
    assert len(busy) == 2
    for p in busy:
        assert 0.8 * p["predicted"] <= p["measured"] <= 1.1 * p["predicted"]


def test_each_computing_node_is_paced_to_its_planned_time(parallel):
    report, _, _ = parallel
    nodes = {n["id"]: n for n in report["nodes"]}
    for v in ("a", "b"):
        assert nodes[v]["measured_s"] >= nodes[v]["planned_s"]
        assert nodes[v]["planned_s"] == pytest.approx(0.025, rel=1e-6)


def test_a_relay_and_a_split_model_run_and_match(tmp_path):
    """``r`` has no memory for any block: it relays between ``s`` and ``t``, which split the
    model; ``a`` runs it all beside them."""
    flops = _mlp_flops()
    network = _network({"a": 40.0 * sum(flops), "r": 40.0 * sum(flops)},
                       [("s", "a"), ("a", "t"), ("s", "r"), ("r", "t")],
                       edge_capacity=40.0 * sum(flops))  # fmt: skip
    network["nodes"][-1]["memory"] = 1.0
    report, outputs = _flow_run(tmp_path, network)
    assert report["outputs_match"] is True
    paths = [tuple(p["path"]) for p in report["pipelines"] if p["dispatched"]]
    assert ("s", "r", "t") in paths
    assert "r" not in report["plan"]["layout"]
    measured, predicted = report["throughput"]["measured"], report["throughput"]["predicted"]
    assert 0.85 * predicted <= measured <= 1.08 * predicted
    assert outputs.shape == (K, 1, 4)


@pytest.mark.parametrize("flag", [["--plan", "x.json"], ["--rate"],
                                  ["--dilation", "2"], ["--method", "milp"]])  # fmt: skip
def test_what_a_flow_run_does_not_take_is_refused_in_one_line(tmp_path, flag):
    net = write(tmp_path / "net.json", _network({"a": 1e6}, [("s", "a"), ("a", "t")]))
    code, _, err, _ = run(["run", str(net), *model_args("mlp"), "--pipelines", "any", *flag])
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error:") and flag[0] in err, err


def test_a_rank_that_raises_ends_the_run_with_one_line_and_leaves_nothing(tmp_path):
    flops = _mlp_flops()
    net = write(tmp_path / "net.json",
                _network({"a": 40.0 * sum(flops), "b": 40.0 * sum(flops)},
                         [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")]))  # fmt: skip
    code, _, err, mark = run(["run", str(net), *model_args("broken"), "--pipelines", "any",
                                "--inferences", "10", "--timeout", "20"])  # fmt: skip
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: rank ") and "failed" in lines[0], err
    assert processes_marked(mark) == []


def test_a_target_rate_is_bought_and_run_at_that_rate(tmp_path):
    """Two nodes of 40 inferences/s each side by side, and a target of 120: the cheapest
    upgrades reach it, and the run, paced to the upgraded capacities, measures it."""
    flops = _mlp_flops()
    capacity = 40.0 * sum(flops)
    network = _network({"a": capacity, "b": capacity},
                       [("s", "a"), ("s", "b"), ("a", "t"), ("b", "t")], edge_capacity=1.0)
    report, _ = _flow_run(tmp_path, network, ["--throughput", "120"])
    assert report["plan"]["cost"] > 0
    assert report["throughput"]["predicted"] == pytest.approx(120.0)
    assert 0.85 * 120 <= report["throughput"]["measured"] <= 1.08 * 120
    assert report["outputs_match"] is True


@pytest.mark.parametrize(("rate", "code", "words"), [("-1", 2, "throughput"),
                                                     ("1e9", 3, "allow")])  # fmt: skip
def test_a_bad_or_unreachable_target_is_one_line(tmp_path, rate, code, words):
    flops = _mlp_flops()
    network = _network({"a": 40.0 * sum(flops)}, [("s", "a"), ("a", "t")])
    for node in network["nodes"]:  # at most twice each capacity
        node["cost"] = {"kind": "linear", "price": 1e-6, "max": node.pop("capacity")}
        node["capacity"] = node["cost"]["max"] / 2
        node.pop("price")
    net = write(tmp_path / "net.json", network)
    got, _, err, mark = run(["run", str(net), *model_args("mlp"), "--pipelines", "any",
                             "--throughput", rate])  # fmt: skip
    assert got == code, err
    assert err.startswith("error:") and err.count("\n") == 1 and words in err, err
    assert processes_marked(mark) == []
