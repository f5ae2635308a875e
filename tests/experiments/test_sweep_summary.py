"""What a user sweep leaves behind: a summary table and figure, and nothing else of its own
(no lock file, no Dask scratch space, here or in the system's temporary folder)."""

from __future__ import annotations

import csv
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.experiments.sweep_summary import summarise
from tests.cli import app, runner

ROOT = Path(__file__).parents[2]
DRAW = "tests.experiments.points:draw"


def _sweep(tmp_path: Path, spec: str, *extra: str, env: dict[str, str] | None = None):
    """Run ``inferplan sweep`` on ``spec``: in this process, or (``env`` given) in a fresh one
    with that environment."""
    path = tmp_path / "spec.yaml"
    path.write_text(spec)
    out = tmp_path / "out"
    args = ["sweep", str(path), "--out", str(out), "-q", "-j", "1", *extra]
    if env is None:
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.stderr
        return out
    paths = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    done = subprocess.run([sys.executable, "-m", "inferplan", *args], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": paths, **env}, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


ROWS = st.fixed_dictionaries({
    "a": st.sampled_from([1, 2, 3]), "b": st.sampled_from("xy"), "g": st.sampled_from(["p", "q"]),
    "m": st.floats(-1e3, 1e3) | st.none(),
})  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(ROWS, min_size=1, max_size=30))
def test_each_swept_value_gets_the_median_and_spread_of_its_rows(rows):
    table = summarise(rows, ["a", "b"], ["m"], "g")
    for parameter in ("a", "b"):
        values = {r[parameter] for r in rows}
        mine = [s for s in table if s.parameter == parameter]
        if len(values) < 2:  # not swept: not summarised
            assert mine == []
            continue
        for value in values:
            for group in ("p", "q"):
                numbers = [r["m"] for r in rows if r[parameter] == value and r["g"] == group
                           and r["m"] is not None]  # fmt: skip
                found = [s for s in mine if s.value == value and s.group == group]
                if not numbers:
                    assert found == []
                    continue
                (s,) = found
                assert s.count == len(numbers)
                assert s.median == pytest.approx(statistics.median(numbers))
                q25, q75 = np.percentile(numbers, [25, 75])
                assert (s.q25, s.q75) == (pytest.approx(q25), pytest.approx(q75))
                assert (s.min, s.max) == (min(numbers), max(numbers))


def test_a_sweep_writes_its_summary_and_leaves_no_lock(tmp_path):
    out = _sweep(tmp_path, f"study: {DRAW}\ngrid:\n  x: [1, 2, 3]\n  k0: [0]\n")
    with (out / "summary.csv").open(encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    # x is swept (k0 is not); the point function's numeric columns are its metrics
    assert {r["parameter"] for r in table} == {"x"}
    assert {r["metric"] for r in table} == {"k", "value"}
    assert [r["value"] for r in table if r["metric"] == "value"] == ["1", "2", "3"]
    assert (out / "summary.png").read_bytes()[1:4] == b"PNG"
    assert not (out / "sweep.lock").exists()


def test_the_spec_names_the_metric_and_the_group(tmp_path):
    out = _sweep(tmp_path, f"study: {DRAW}\nmetric: value\ngroup_by: k\ngrid: {{x: [1, 2]}}\n")
    with (out / "summary.csv").open(encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    assert {(r["metric"], r["group"]) for r in table} == {("value", "0"), ("value", "1")}


def test_a_sweep_of_one_point_says_it_has_no_summary(tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text(f"study: {DRAW}\ngrid: {{x: [1]}}\n")
    result = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 0, result.stderr
    assert "note: no summary: no parameter takes more than one value" in result.stderr
    assert not (tmp_path / "out" / "summary.csv").exists()


@pytest.mark.slow
def test_a_local_dask_cluster_keeps_its_scratch_space_in_the_sweep_and_removes_it(tmp_path):
    pytest.importorskip("distributed")
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    out = _sweep(tmp_path, f"study: {DRAW}\ngrid: {{x: [1, 2]}}\n", "--cluster", "local",
                 "--workers", "1", env={"TMPDIR": str(system_tmp)})  # fmt: skip
    assert not list(system_tmp.rglob("dask-scratch-space"))
    assert not (out / "dask-scratch-space").exists() and not (out / "sweep.lock").exists()
    assert (out / "results.csv").exists()


def test_replicates_are_pooled_into_the_spread_and_a_wrong_one_is_named(tmp_path):
    out = _sweep(tmp_path, f"study: {DRAW}\nmetric: value\nreplicates: [r]\n"
                 "grid:\n  x: [1, 2]\n  r: [0, 1, 2]\n")  # fmt: skip
    with (out / "summary.csv").open(encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    assert {(r["parameter"], r["kind"]) for r in table} == {("x", "number")}
    assert [r["count"] for r in table] == ["6", "6"]  # 3 replicates x 2 rows each
    path = tmp_path / "bad.yaml"
    path.write_text(f"study: {DRAW}\nreplicates: [nope]\ngrid: {{x: [1, 2]}}\n")
    result = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "bad"), "-q"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"error: {path}: replicates[0]: 'nope' is not a parameter "
                                     "of this sweep")  # fmt: skip
