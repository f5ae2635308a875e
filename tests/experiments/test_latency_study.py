"""The latency study: each row the brute-force optimum within its bound, its table the
medians of its rows, and one sweep command writing the table and the figure."""

from __future__ import annotations

import csv
import math
import statistics

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan.experiments.latency import latency_point, summarize
from inferplan.experiments.studies import STUDIES
from inferplan.profiles.io import save_profile
from tests.cli import app, runner
from tests.oracles import brute_force_cost, brute_force_interval, brute_force_latency_cost
from tests.strategies import small_dags, small_profiles


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(net=small_dags(max_nodes=4, cost_kinds=("linear", "capped", "tiers"), delays=True),
       profile=small_profiles(max_blocks=3), alpha=st.floats(0.3, 1.0),
       share=st.sampled_from([0.5, 0.75]))  # fmt: skip
def test_a_row_is_the_brute_force_optimum_within_its_share(tmp_path, net, profile, alpha, share):
    inferplan.save_network(net, tmp_path / "net.json")
    save_profile(profile, tmp_path / "dnn.json")
    params = {"network": str(tmp_path / "net.json"), "dnn": str(tmp_path / "dnn.json"),
              "alpha": alpha, "share": share}  # fmt: skip
    row = latency_point(params, 0, {})
    beta = alpha * brute_force_interval(net, profile)
    assert row["target_interval"] == pytest.approx(beta, rel=1e-9)
    free = brute_force_cost(net, profile, beta)
    if math.isinf(free):
        assert row["status"] == "infeasible"
        return
    assert row["free_cost"] == pytest.approx(free, rel=1e-9, abs=1e-12)
    assert row["free_latency_intervals"] == pytest.approx(row["free_latency"] / beta)
    bound = share * row["free_latency"]
    expected = brute_force_latency_cost(net, profile, beta, bound)
    if math.isinf(expected):
        assert row["status"] == "infeasible" and math.isnan(row["cost"])
        return
    assert row["status"] == "optimal" and row["latency"] <= bound * (1 + 1e-9)
    assert row["cost"] == pytest.approx(expected, rel=1e-6, abs=1e-9)
    if free > 0:
        assert row["cost_ratio"] == pytest.approx(expected / free, rel=1e-6)


def test_the_table_is_the_median_of_its_rows():
    def row(topology, share, ratio, moved):
        return {"network": "tiered", "topology": topology, "dnn": "vgg16", "alpha": 0.5,
                "share": share, "free_cost": 10.0, "free_latency": 0.1 * (topology + 1),
                "free_latency_intervals": 4.0 + topology, "cost_ratio": ratio,
                "path_changes": moved, "status": "optimal"}  # fmt: skip

    rows = [row(t, 0.75, 1.0 + 0.1 * t, False) for t in range(4)]
    rows += [row(t, 0.5, [2.0, 3.0, 5.0, 9.0][t], t < 1) for t in range(4)]
    rows.append({**row(9, 0.5, math.nan, False), "free_cost": math.nan})  # no plan at all
    (table,) = summarize(rows)
    assert table["points"] == 4  # each network once, the one without a plan left out
    assert table["free_latency_ms"] == pytest.approx(1e3 * statistics.median([0.1, 0.2, 0.3, 0.4]))
    assert table["free_latency_intervals"] == 5.5
    assert table["ratio_075_median"] == pytest.approx(1.15)
    assert (table["ratio_050_median"], table["ratio_050_max"]) == (4.0, 9.0)
    assert table["path_changes_050"] == 0.25 and table["not_optimal"] == 0


def test_one_sweep_command_writes_the_table_and_the_figure(tmp_path):
    pytest.importorskip("matplotlib")
    assert STUDIES["latency"].report is not None
    spec = tmp_path / "latency.yaml"
    spec.write_text("study: latency\nseed: 3\nseed_from: [network, topology]\ngrid:\n"
                    "  topology: {range: [0, 3]}\n  dnn: [vgg16]\n  alpha: [0.5]\n"
                    "  share: [0.5, 0.75]\n")  # fmt: skip
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(out), "-q", "-j", "1"])
    assert result.exit_code == 0, result.output
    with (out / "results.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["status"] for r in rows} == {"optimal"}
    half = sorted(float(r["cost_ratio"]) for r in rows if r["share"] == "0.5")
    with (out / "latency-table.csv").open(encoding="utf-8") as handle:
        (table,) = list(csv.DictReader(handle))
    assert float(table["ratio_050_median"]) == pytest.approx(statistics.median(half))
    assert all(x >= 1 for x in half)
    assert "| vgg16 | 0.5 | 3 |" in (out / "latency-table.md").read_text()
    assert (out / "latency.png").read_bytes()[1:4] == b"PNG"
