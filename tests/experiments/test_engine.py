"""The sweep engine: point ids and seeds, storage, resume after interruption, executors."""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferplan.errors import InvalidArgument, InvalidFile
from inferplan.experiments import ResultStore, Sweep, make_points, point_id, point_seed, run_sweep
from inferplan.experiments.space import Distribution, grid_points, sample_points
from inferplan.experiments.store import PointRecord
from tests.experiments.points import draw_rows

ROOT = Path(__file__).parents[2]
DRAW = "tests.experiments.points:draw"


def _sweep(n: int = 12, seed: int = 5) -> Sweep:
    params = grid_points({"x": list(range(1, n + 1))})
    return Sweep(DRAW, make_points(params, sweep_seed=seed), seed=seed, study="test")


def _expected_rows(sweep: Sweep) -> list[dict]:
    return draw_rows(sweep.points)


def _stored_lines(out: Path) -> list[str]:
    return [line for p in sorted((out / "shards").glob("*.jsonl"))
            for line in p.read_text().splitlines()]  # fmt: skip


# --- points, ids, seeds -------------------------------------------------------------------------


def test_point_id_is_the_sha256_of_the_canonical_json():
    expected = hashlib.sha256(b'{"alpha":0.25,"dnn":"vgg16"}').hexdigest()[:16]
    assert point_id({"dnn": "vgg16", "alpha": 0.25}) == expected
    assert point_id({"alpha": 0.25, "dnn": "vgg16"}) == expected


def test_point_seed_follows_seedsequence_of_sweep_seed_and_digest():
    digest = hashlib.sha256(b'{"topology":4}').digest()
    seq = np.random.SeedSequence([9, int.from_bytes(digest, "big")])
    assert point_seed(9, {"topology": 4}) == int(seq.generate_state(1, np.uint64)[0]) >> 1
    assert 0 <= point_seed(9, {"topology": 4}) < 2**63


def test_seed_from_shares_seeds_between_points_that_agree_on_those_parameters():
    params = grid_points({"topology": [0, 1], "alpha": [0.25, 0.8]})
    points = make_points(params, sweep_seed=3, seed_from=["topology"])
    seeds = {(p.params["topology"], p.params["alpha"]): p.seed for p in points}
    assert seeds[0, 0.25] == seeds[0, 0.8] != seeds[1, 0.25] == seeds[1, 0.8]
    assert len({p.id for p in points}) == 4


def test_make_points_ids_and_seeds_follow_the_documented_rules():
    params = grid_points({"topology": [0, 1, 1], "alpha": [0.25, 0.8]})
    for seed_from in (None, ["topology"], ["alpha", "topology"]):
        points = make_points(params, sweep_seed=6, seed_from=seed_from)
        assert len(points) == 4  # the repeated topology gives repeated points, dropped
        for p in points:
            seeded = p.params if seed_from is None else {k: p.params[k] for k in seed_from}
            assert (p.id, p.seed) == (point_id(p.params), point_seed(6, seeded))


@given(st.dictionaries(st.sampled_from("abc"), st.lists(st.integers(), min_size=1, max_size=3,
                                                         unique=True), min_size=1))  # fmt: skip
def test_grid_is_the_full_cartesian_product(axes):
    points = grid_points(axes)
    assert len(points) == math.prod(len(v) for v in axes.values())
    assert len({json.dumps(p, sort_keys=True) for p in points}) == len(points)
    assert points[0] == {k: v[0] for k, v in axes.items()}


def test_a_larger_sample_extends_a_smaller_one():
    dists = {"alpha": Distribution("uniform", low=0.2, high=0.9),
             "dnn": Distribution("choice", values=("vgg16", "resnet50")),
             "topology": Distribution("integers", low=0, high=100)}  # fmt: skip
    small, large = sample_points(dists, 5, seed=1), sample_points(dists, 9, seed=1)
    assert large[:5] == small
    assert [p["sample"] for p in large] == list(range(9))
    assert all(0.2 <= p["alpha"] < 0.9 and 0 <= p["topology"] < 100 for p in large)
    assert sample_points(dists, 5, seed=2) != small


# --- running and resuming ------------------------------------------------------------------------


def test_rows_carry_point_seed_and_params_in_point_order(tmp_path):
    sweep = _sweep()
    outcome = run_sweep(sweep, tmp_path)
    assert list(outcome.rows) == _expected_rows(sweep)
    assert (outcome.points, outcome.ran, outcome.resumed) == (12, 12, 0)


class Stop(Exception):
    pass


def _stop_after(k: int):
    def progress(done: int, total: int) -> None:
        if done >= k:
            raise Stop

    return progress


def test_interrupted_sweep_resumes_to_exactly_the_uninterrupted_rows(tmp_path):
    sweep = _sweep()
    with pytest.raises(Stop):
        run_sweep(sweep, tmp_path, progress=_stop_after(5))
    assert len(_stored_lines(tmp_path)) == 5
    calls = []
    outcome = run_sweep(sweep, tmp_path, progress=lambda d, t: calls.append(d))
    assert list(outcome.rows) == _expected_rows(sweep)
    assert (outcome.resumed, outcome.ran) == (5, 7)
    assert calls[0] == 5 and calls[-1] == 12
    lines = _stored_lines(tmp_path)
    assert len(lines) == 12 and len({json.loads(x)["point"] for x in lines}) == 12
    again = run_sweep(sweep, tmp_path, jobs=2)
    assert again.ran == 0 and list(again.rows) == list(outcome.rows)
    assert len(_stored_lines(tmp_path)) == 12


def test_truncated_last_line_is_ignored_and_that_point_rerun(tmp_path):
    sweep = _sweep(6)
    with pytest.raises(Stop):
        run_sweep(sweep, tmp_path, progress=_stop_after(3))
    shard = tmp_path / "shards" / "part-0001.jsonl"
    complete = shard.read_text().splitlines(keepends=True)
    # Keep two whole points and half of the third, as a process killed mid-write would.
    shard.write_text("".join(complete[:2]) + complete[2][: len(complete[2]) // 2])
    assert len(ResultStore(tmp_path).finished()) == 2
    outcome = run_sweep(sweep, tmp_path)
    assert (outcome.resumed, outcome.ran) == (2, 4)
    assert list(outcome.rows) == _expected_rows(sweep)


def test_a_corrupt_line_before_the_end_is_an_error_naming_the_shard(tmp_path):
    store = ResultStore(tmp_path)
    with store.writer() as shard:
        shard.write(PointRecord("a", 1, {"x": 1}, ({"v": 1},)))
    path = tmp_path / "shards" / "part-0001.jsonl"
    path.write_text("not json\n" + path.read_text())
    with pytest.raises(InvalidFile) as info:
        store.finished()
    assert str(info.value).startswith(f"{path}: line 1 is not a point record")


def test_a_directory_of_another_sweep_is_refused(tmp_path):
    run_sweep(_sweep(3, seed=1), tmp_path)
    with pytest.raises(InvalidArgument) as info:
        run_sweep(_sweep(3, seed=2), tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'sweep.json'}: seed: holds results of a different sweep (seed was 1, now "
        "2); rerun the same sweep to resume, or choose another output directory"
    )


def test_a_larger_sweep_reuses_the_points_it_has(tmp_path):
    run_sweep(_sweep(4), tmp_path)
    outcome = run_sweep(_sweep(9), tmp_path)
    assert (outcome.resumed, outcome.ran) == (4, 5)
    assert list(outcome.rows) == _expected_rows(_sweep(9))


def test_joblib_processes_give_the_same_rows(tmp_path):
    sweep = _sweep()
    assert run_sweep(sweep, tmp_path / "a", jobs=2).rows == run_sweep(sweep, tmp_path / "b").rows


def test_bad_jobs_and_function_are_refused(tmp_path):
    with pytest.raises(InvalidArgument, match="jobs: must be a positive number"):
        run_sweep(_sweep(), tmp_path, jobs=0)
    bad = Sweep("tests.experiments.points:nothing", _sweep().points)
    with pytest.raises(InvalidArgument, match="has no function 'nothing'"):
        run_sweep(bad, tmp_path)


@pytest.mark.slow
def test_a_killed_process_loses_only_points_in_flight(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "study: tests.experiments.points:slow_draw\nseed: 4\noptions: {sleep: 0.05}\n"
        "grid:\n  x: {range: [1, 21]}\n"
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "inferplan", "sweep", str(spec), "--out", str(out),
               "--jobs", "1", "--quiet"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if (out / "shards").exists() and len(_stored_lines(out)) >= 3:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    killed_with = len(_stored_lines(out))
    assert 3 <= killed_with < 20, "the sweep was not killed midway"
    rerun = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert f"({20 - killed_with} run, {killed_with} resumed)" in rerun.stdout.replace("\n", " ")
    uninterrupted = run_sweep(
        Sweep("tests.experiments.points:draw",
              make_points(grid_points({"x": list(range(1, 21))}), sweep_seed=4)),
        tmp_path / "reference",
    )  # fmt: skip
    import csv

    with (out / "results.csv").open() as handle:
        got = list(csv.DictReader(handle))
    assert [(r["point"], float(r["value"])) for r in got] == [
        (r["point"], r["value"]) for r in uninterrupted.rows
    ]
