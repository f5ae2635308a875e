"""The co-inference study: its reproduction on a reduced grid, what must hold for any
parameters, its files, resume, Dask, specs and the CLI."""

from __future__ import annotations

import csv
import math
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferplan.experiments.coinference as coinference_study
from inferplan.errors import InvalidArgument
from inferplan.experiments import load_spec, run_sweep
from inferplan.experiments.coinference import (
    BASELINES,
    CURVE_COLUMNS,
    SAVINGS_COLUMNS,
    SWEEP_COLUMNS,
    build_system,
    coinference_point,
    coinference_sweep,
    reproduce_coinference,
)
from tests.cli import app, runner

ROOT = Path(__file__).parents[2]

DNNS = ("alexnet", "mlp-256x4")
SWEEPS = {"inferences_per_update": (100, 10_000), "bandwidth_hz": (5e5,)}
DEFAULTS = {"inferences_per_update": 1000, "mean_snr": 10.0, "bandwidth_hz": 2e6,
            "energy_weight": 0.5}  # fmt: skip
#: Costs of two strategies are sums of the same terms in other orders: allow rounding only.
RTOL = 1e-12


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("coinference")
    result = reproduce_coinference(out, seed=5, dnns=DNNS, sweeps=SWEEPS, simulate=500, jobs=1)
    return out, result, list(result.outcome.rows)


def _read(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def _strategies(rows):
    out: dict[str, dict[str, dict]] = {}
    for r in rows:
        if r["record"] == "strategy":
            out.setdefault(r["point"], {})[r["strategy"]] = r
    return out


def _curves(rows):
    out: dict[str, list[dict]] = {}
    for r in rows:
        if r["record"] == "curve":
            out.setdefault(r["point"], []).append(r)
    return out


def _baselines_from_formulas(system):
    """Edge-only, device-only and the best fixed split from the cost model directly:
    splitting at stage n with n - 1 layers placed costs c(n-1) + a_n + b_n E[1/log2(1+SNR)]."""
    a, b = system.stage_costs
    g = np.array([ch.mean_inv_log() for ch in system.channels])
    fixed = system.placement_costs + a + b * g
    return fixed[0], fixed[-1], fixed.min()


def _check_point(rows, params):
    """What must hold for any parameters, on the rows of one point."""
    system = build_system(params)
    n = system.n_layers
    curves = [r for r in rows if r["record"] == "curve"]
    strategies = {r["strategy"]: r for r in rows if r["record"] == "strategy"}
    assert [r["M"] for r in curves] == list(range(n + 1))
    probs = np.array([r["p_1sla_optimal"] for r in curves])
    assert np.all((probs >= 0) & (probs <= 1))
    assert probs[0] == 1.0 and probs[1] == 1.0
    z_opt = np.array([r["z_optimal"] for r in curves])
    z_sla = np.array([r["z_1sla"] for r in curves])
    assert np.all(z_sla >= z_opt * (1 - RTOL))
    joint = strategies["optimal"]["cost"]
    assert joint == pytest.approx(z_opt.min(), rel=RTOL)
    assert strategies["full-placement"]["cost"] == pytest.approx(z_opt[-1], rel=RTOL)
    edge, device, best_fixed = _baselines_from_formulas(system)
    assert strategies["edge-only"]["cost"] == pytest.approx(edge, rel=1e-9)
    assert strategies["device-only"]["cost"] == pytest.approx(device, rel=1e-9)
    assert strategies["best-fixed-split"]["cost"] == pytest.approx(best_fixed, rel=1e-9)
    for name in ("edge-only", "device-only", "full-placement", "fixed-split",
                 "best-fixed-split", "1sla", "hybrid"):  # fmt: skip
        assert joint <= strategies[name]["cost"] * (1 + RTOL), name
        assert strategies[name]["saving"] >= -RTOL
    assert strategies["hybrid"]["placement"] == strategies["optimal"]["placement"]
    assert strategies["1sla"]["cost"] == pytest.approx(z_sla.min(), rel=RTOL)


def test_every_point_satisfies_what_must_hold_for_any_parameters(study):
    _, result, rows = study
    by_point: dict[str, list] = {}
    for r in rows:
        by_point.setdefault(r["point"], []).append(r)
    # 2 DNNs x (default + 2 values of K + 1 bandwidth), the default shared by both sweeps.
    assert len(by_point) == 2 * 4 == result.outcome.points
    for point_rows in by_point.values():
        params = {k: point_rows[0][k] for k in ("profile", *DEFAULTS)}
        _check_point(point_rows, params)


@settings(max_examples=25, deadline=None)
@given(
    width=st.integers(8, 2048),
    depth=st.integers(1, 6),
    k=st.integers(1, 100_000),
    energy=st.floats(0, 1),
    bandwidth=st.floats(1e5, 1e8),
    mean_snr=st.floats(0.2, 500),
    channel=st.sampled_from(["rayleigh", "nakagami", "lognormal"]),
)
def test_the_point_function_holds_its_invariants_on_random_systems(
    width, depth, k, energy, bandwidth, mean_snr, channel
):
    params = {"profile": f"mlp-{width}x{depth}", "inferences_per_update": k,
              "energy_weight": energy, "bandwidth_hz": bandwidth, "mean_snr": mean_snr,
              "channel": channel}  # fmt: skip
    rows = coinference_point(params, 0, {})
    _check_point(rows, params)
    sla = next(r for r in rows if r.get("strategy") == "1sla")
    assert sla["closed_form_placement"] == sla["placement"]


def test_the_lognormal_channel_has_the_mean_snr_asked_for():
    system = build_system({"channel": "lognormal", "mean_snr": 7.0, "sigma_db": 8.0})
    draws = system.channel.sample(np.random.default_rng(0), 400_000)
    assert draws.mean() == pytest.approx(7.0, rel=0.02)


def test_summaries_agree_with_results(study):
    out, _, _ = study
    rows = _read(out / "results.csv")
    assert (out / "curves.csv").read_text().splitlines()[0] == ",".join(CURVE_COLUMNS)
    assert (out / "savings.csv").read_text().splitlines()[0] == ",".join(SAVINGS_COLUMNS)
    assert (out / "sweeps.csv").read_text().splitlines()[0] == ",".join(SWEEP_COLUMNS)

    def is_default(r, but=None):
        return all(float(r[k]) == v for k, v in DEFAULTS.items() if k != but)

    curves = _read(out / "curves.csv")
    expected = [r for r in rows if r["record"] == "curve" and is_default(r)]
    assert [(c["dnn"], c["M"], c["z_optimal"], c["p_1sla_optimal"]) for c in curves] == [
        (r["profile"], r["M"], r["z_optimal"], r["p_1sla_optimal"]) for r in expected
    ]
    assert {c["dnn"] for c in curves} == set(DNNS)

    savings = _read(out / "savings.csv")
    assert len(savings) == len(DNNS) * (len(SWEEPS) + 1) * len(BASELINES)
    for s in savings:
        group = [float(r["saving"]) for r in rows
                 if r["record"] == "strategy" and r["profile"] == s["dnn"]
                 and r["strategy"] == s["baseline"]
                 and (s["parameter"] == "all" or is_default(r, but=s["parameter"]))]  # fmt: skip
        assert (
            int(s["points"]) == len(group) == {"all": 4, "bandwidth_hz": 2}.get(s["parameter"], 3)
        )
        assert float(s["median_saving"]) == pytest.approx(np.median(group), rel=1e-12)
        assert float(s["max_saving"]) == max(group)
        assert float(s["min_saving"]) == min(group)
        assert float(s["frac_better"]) == pytest.approx(np.mean(np.array(group) > 1e-9))

    costs = {(r["point"], r["strategy"]): r["cost"] for r in rows if r["record"] == "strategy"}
    points = {r["point"]: r for r in rows}
    for s in _read(out / "sweeps.csv"):
        match = [p for p, r in points.items() if r["profile"] == s["dnn"]
                 and float(r[s["parameter"]]) == float(s["value"])
                 and is_default(r, but=s["parameter"])]  # fmt: skip
        assert len(match) == 1
        assert s["cost_optimal"] == costs[match[0], "optimal"]
        assert s["cost_best_fixed_split"] == costs[match[0], "best-fixed-split"]


def test_parquet_holds_the_same_rows(study):
    pq = pytest.importorskip("pyarrow.parquet")
    out, _, rows = study
    table = pq.read_table(out / "results.parquet").to_pylist()
    assert [(t["point"], t["record"], t["M"], t["strategy"], t["cost"]) for t in table] == [
        (r["point"], r["record"], r.get("M"), r.get("strategy"), r.get("cost")) for r in rows
    ]


@pytest.mark.parametrize("stem", ["optimality", "z_curves", "sweep_costs", "sweep_savings"])
def test_figures_are_valid_png_and_pdf(study, stem):
    pytest.importorskip("matplotlib")
    from matplotlib import image

    out, _, _ = study
    png, pdf = out / f"{stem}.png", out / f"{stem}.pdf"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = image.imread(png)
    assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 400
    assert pixels.std() > 0
    data = pdf.read_bytes()
    assert data[:5] == b"%PDF-" and data.rstrip().endswith(b"%%EOF")


def test_report_states_the_numbers_and_the_papers_findings(study):
    out, result, _ = study
    report = (out / "report.md").read_text()
    assert "ours, not the paper's" in report
    assert "as high as 0.9 in the AlexNet" in report and "Corollary 4.1" in report
    for c in _read(out / "curves.csv"):
        assert f"{float(c['p_1sla_optimal']):.3f}" in report
    pooled = [s for s in result.summary if s["parameter"] == "all"]
    for s in pooled:
        assert f"{100 * s['median_saving']:.1f} %" in report
    assert "0 of 8 MLP" not in report and "at 4 of 4 MLP points" in report
    assert "Strategies cheaper than the joint plan (would contradict its optimality): 0" in report
    assert {f.name for f in result.files} >= {"results.csv", "curves.csv", "savings.csv",
                                              "sweeps.csv", "report.md"}  # fmt: skip


def _without_runtime(rows):
    return [{k: v for k, v in r.items() if k != "runtime_s"} for r in rows]


def test_the_study_resumes_without_adding_rows(study):
    out, first, _ = study
    # The engine alone (figures are not redrawn): the same sweep into the same directory.
    sweep = coinference_sweep(seed=5, dnns=DNNS, sweeps=SWEEPS, simulate=500)
    again = run_sweep(sweep, out, jobs=1)
    assert (again.ran, again.resumed) == (0, first.outcome.points)
    assert again.rows == first.outcome.rows
    stored = sum(
        len(line.splitlines())
        for shard in (out / "shards").glob("*.jsonl")
        for line in [shard.read_text()]
    )
    assert stored == first.outcome.points
    assert len(_read(out / "results.csv")) == len(first.outcome.rows)


def test_dask_local_cluster_gives_the_same_rows_as_local_runs(tmp_path):
    distributed = pytest.importorskip("distributed")
    sweep = coinference_sweep(seed=2, dnns=["mlp-64x3", "alexnet"],
                              sweeps={"mean_snr": (2.0,)}, simulate=300)  # fmt: skip
    local = run_sweep(sweep, tmp_path / "local", jobs=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:  # fmt: skip
        remote = run_sweep(sweep, tmp_path / "dask", cluster=cluster.scheduler_address)
    assert _without_runtime(remote.rows) == _without_runtime(local.rows)
    planners = [r for r in remote.rows if r.get("strategy") in ("optimal", "1sla", "hybrid")]
    assert planners and all(math.isfinite(r["runtime_s"]) for r in planners)


def test_the_example_spec_loads():
    sweep = load_spec(ROOT / "examples" / "sweep-coinference.yaml")
    assert len(sweep.points) == 2 * 2 * 3 * 3
    assert sweep.function == "inferplan.experiments.coinference:coinference_point"
    assert sweep.options == {"methods": ["optimal", "1sla", "hybrid"], "simulate": 5000,
                             "confidence": 0.999}  # fmt: skip


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ("profile: [vgg17]", "grid.profile: unknown built-in profile 'vgg17'"),
        ("K: 3", "grid.K: unknown parameter"),
        ("energy_weight: 1.5", "grid.energy_weight: Input should be less than or equal to 1"),
        ("{channel: rayleigh, min_snr: 0}", "grid: E[1/log2(1+SNR)] is infinite: plain Rayleigh"),
        ("sigma_db: 3", "grid: sigma_db applies to channel lognormal, not rayleigh"),
    ],
)
def test_spec_errors_name_the_file_and_the_field(tmp_path, grid, message):
    spec = tmp_path / "spec.yaml"
    body = grid if grid.startswith("{") else "{" + grid + "}"
    spec.write_text(f"study: coinference\ngrid: {body}\n")
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {spec}: {message}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_reproduce_command_writes_every_file(tmp_path, monkeypatch):
    # The command with a one-DNN grid: what it wires, not the full study's runtime.
    small = partial(reproduce_coinference, dnns=("mlp-32x2",), sweeps={"mean_snr": (2.0,)})
    # the command imports the study when it runs: replace it where it is imported from
    monkeypatch.setattr(coinference_study, "reproduce_coinference", small)
    out = tmp_path / "repro"
    result = runner.invoke(app, ["reproduce", "coinference", "--out", str(out), "--jobs", "1",
                                 "--simulate", "100", "--seed", "3", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert '"points": 2, "resumed": 0, "ran": 2' in result.stdout
    names = {"results.csv", "curves.csv", "savings.csv", "sweeps.csv", "report.md",
             "optimality.png", "z_curves.pdf", "sweep_costs.png", "sweep_savings.pdf"}  # fmt: skip
    assert names <= {p.name for p in out.iterdir()}
    assert "(sweep seed 3)" in (out / "report.md").read_text()


def test_reproduce_rejects_a_bad_cluster_address(tmp_path):
    pytest.importorskip("distributed")
    command = ["reproduce", "coinference", "--out", str(tmp_path), "--cluster", "tcp://127.0.0.1:9"]
    result = runner.invoke(app, command)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --cluster: cannot reach a Dask scheduler at")


def test_the_reproduction_refuses_a_parameter_it_does_not_sweep():
    with pytest.raises(InvalidArgument, match="sweeps: cannot sweep downlink_bps"):
        coinference_sweep(sweeps={"downlink_bps": (1e6,)})
