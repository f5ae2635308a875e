"""The co-design study on a few topologies: what must hold for any seed, and its files."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

import inferplan
from inferplan.codesign import compile_instance, solve_psg, throughput_optimal
from inferplan.experiments import codesign_sweep, reproduce_codesign, run_sweep
from inferplan.experiments.codesign import CODESIGN_METHODS

SUMMARY = "dnn,alpha,method,median_ratio,max_ratio,frac_optimal,median_runtime_s"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("codesign")
    result = reproduce_codesign(out, seed=11, topologies=3, jobs=1)
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    with (out / "summary.csv").open() as handle:
        summary = list(csv.DictReader(handle))
    return out, result, rows, summary


def test_results_have_a_row_per_instance_and_method(study):
    _, _, rows, _ = study
    assert len(rows) == 3 * 2 * 4 * len(CODESIGN_METHODS)
    keys = {(r["topology"], r["dnn"], r["alpha"], r["method"]) for r in rows}
    assert len(keys) == len(rows)
    for column in ("seed", "dnn", "alpha", "method", "cost", "ratio", "runtime_s", "path",
                   "partition"):  # fmt: skip
        assert column in rows[0]


def test_psg_ratio_is_exactly_one_and_heuristics_never_beat_it(study):
    _, _, rows, _ = study
    for row in rows:
        ratio = float(row["ratio"])
        if row["method"] == "psg":
            assert ratio == 1.0
        else:
            # Costs are sums of the same prices in another order: allow rounding, nothing more.
            assert ratio >= 1 - 1e-9, row
        assert row["status"] == ("optimal" if row["method"] == "psg" else "heuristic")
        assert float(row["interval"]) <= float(row["target_interval"]) * (1 + 1e-9)


def test_every_row_can_be_recomputed_alone_from_its_seed(study):
    _, _, rows, _ = study
    for row in rows[:: 4 * 5]:
        inst = compile_instance(inferplan.tiered(seed=int(row["seed"])),
                                inferplan.load_profile(row["dnn"]))  # fmt: skip
        beta = float(row["alpha"]) * throughput_optimal(inst).interval
        if row["method"] == "psg":
            assert solve_psg(inst, beta).cost == float(row["cost"])
        assert float(row["target_interval"]) == beta


def test_summary_agrees_with_results(study):
    out, _, rows, summary = study
    assert (out / "summary.csv").read_text().splitlines()[0] == SUMMARY
    assert len(summary) == 2 * 4 * len(CODESIGN_METHODS)
    for s in summary:
        group = [r for r in rows if (r["dnn"], r["alpha"], r["method"]) ==
                 (s["dnn"], s["alpha"], s["method"])]  # fmt: skip
        ratios = np.array([float(r["ratio"]) for r in group])
        assert len(group) == 3
        assert float(s["median_ratio"]) == pytest.approx(np.median(ratios), rel=1e-12)
        assert float(s["max_ratio"]) == ratios.max()
        assert float(s["frac_optimal"]) == pytest.approx(np.mean(ratios <= 1 + 1e-6))
        runtimes = [float(r["runtime_s"]) for r in group]
        assert float(s["median_runtime_s"]) == pytest.approx(np.median(runtimes), rel=1e-12)
        if s["method"] == "psg":
            assert float(s["frac_optimal"]) == 1.0


def test_parquet_holds_the_same_rows(study):
    pq = pytest.importorskip("pyarrow.parquet")
    out, _, rows, _ = study
    table = pq.read_table(out / "results.parquet").to_pylist()
    assert [(t["point"], t["method"], t["cost"]) for t in table] == [
        (r["point"], r["method"], float(r["cost"])) for r in rows
    ]


def test_figures_are_valid_png_and_pdf(study):
    pytest.importorskip("matplotlib")
    from matplotlib import image

    out, _, _, _ = study
    png, pdf = out / "figure.png", out / "figure.pdf"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = image.imread(png)
    assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 400
    assert pixels.std() > 0  # something was drawn
    data = pdf.read_bytes()
    assert data[:5] == b"%PDF-" and data.rstrip().endswith(b"%%EOF")


def test_report_puts_our_numbers_beside_the_papers(study):
    out, result, _, summary = study
    report = (out / "report.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| ") and " ratio" in line]
    papers = {line.split(" | ")[1] for line in rows}
    assert {"5.1", "8.6", "6.5", "25.3", "4.1", "9.4", "5.6", "144", "639", "44"} <= papers
    pfp_vgg = [float(s["median_ratio"]) for s in summary
               if s["dnn"] == "vgg16" and s["method"] == "pfp"]  # fmt: skip
    low = next(line for line in rows if line.startswith("| VGG-16 PFP median ratio, lowest"))
    assert f"| 5.1 | {min(pfp_vgg):.3g} | {100 * (min(pfp_vgg) / 5.1 - 1):+.0f} % |" in low
    assert "Ties between throughput-optimal deployments" in report
    assert {f.name for f in result.files} >= {"results.csv", "summary.csv", "report.md"}


def test_the_study_resumes_without_recomputing(study):
    out, first, _, _ = study
    again = reproduce_codesign(out, seed=11, topologies=3, jobs=1)
    assert (again.outcome.ran, again.outcome.resumed) == (0, 24)
    strip = [{k: v for k, v in r.items() if k != "runtime_s"} for r in first.outcome.rows]
    assert [{k: v for k, v in r.items() if k != "runtime_s"} for r in again.outcome.rows] == strip


def _without_runtime(rows):
    return [{k: v for k, v in r.items() if k != "runtime_s"} for r in rows]


def test_dask_local_cluster_gives_the_same_rows_as_local_runs(tmp_path: Path):
    distributed = pytest.importorskip("distributed")
    sweep = codesign_sweep(seed=2, topologies=2, alphas=(0.4, 0.8))
    local = run_sweep(sweep, tmp_path / "local", jobs=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:  # fmt: skip
        remote = run_sweep(sweep, tmp_path / "dask", cluster=cluster.scheduler_address)
    assert _without_runtime(remote.rows) == _without_runtime(local.rows)
    assert all(math.isfinite(r["runtime_s"]) for r in remote.rows)
