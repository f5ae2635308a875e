"""Sweeps under hostile input and accidents: sizes, number ranges, bad studies and options,
failing points, two sweeps on one directory, crashes mid-write, killed processes, trust."""

from __future__ import annotations

import csv
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

from inferplan.errors import InferplanError, InvalidArgument, InvalidFile
from inferplan.experiments import ResultStore, Sweep, load_spec, make_points, run_sweep
from inferplan.experiments import spec as spec_module
from inferplan.experiments.engine import FailedPoints
from inferplan.experiments.executors import check_address
from inferplan.experiments.space import Distribution, grid_points, linspace, sample_points
from inferplan.experiments.store import PointRecord, atomic_path
from tests.cli import app, runner
from tests.experiments.points import draw_rows

ROOT = Path(__file__).parents[2]
ECHO = "inferplan.experiments.engine:_echo"


def _spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _one_line_error(tmp_path: Path, path: Path, *extra: str) -> str:
    """Run ``sweep`` on ``path``: it must fail with one line ``error: ...`` and exit code 2."""
    result = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out"), *extra])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    return result.stderr.strip()


# --- sizes: refused up front with the number and the limit ----------------------------------------

HUGE = [
    ("grid:\n  x: {range: [0, 1000000000000]}\n", "grid.x.range: gives 1,000,000,000,000 values"),
    ("grid:\n  x: {range: [0, 1e300]}\n", "grid.x.range: gives about 1e300 values"),
    ("grid:\n  x: {range: [0, 1e12, 1]}\n", "grid.x.range: gives 1,000,000,000,000 values"),
    ("grid:\n  x: {range: [1e12, 0, -1]}\n", "grid.x.range: gives 1,000,000,000,000 values"),
    ("grid:\n  x: {linspace: [0, 1, 1e10]}\n", "grid.x.linspace: gives 10,000,000,000 values"),
    (
        "grid:\n  x: {range: [0, 100000]}\n  y: {range: [0, 10000000, 1000]}\n  z: [1, 2]\n",
        "grid: has 2,000,000,000 points (100,000 'x' x 10,000 'y' x 2 'z')",
    ),
    ("sample:\n  size: 1000000000000\n  parameters: {x: 1}\n", "sample.size: is 1,000,000,000,000"),
    (
        "sample:\n  size: 2\n  parameters:\n    x: {choice: {range: [0, 1e12]}}\n",
        "sample.parameters.x.choice.range: gives 1,000,000,000,000 values",
    ),
]


@pytest.mark.parametrize(("body", "message"), HUGE)
def test_huge_spaces_are_refused_with_their_size_and_the_limit(tmp_path, body, message):
    path = _spec(tmp_path, f"study: {ECHO}\n{body}")
    error = _one_line_error(tmp_path, path)
    assert error.startswith(f"error: {path}: {message}"), error
    assert "more than the 1,000,000 points a sweep may have" in error


def test_the_limit_is_on_the_number_of_points(tmp_path, monkeypatch):
    monkeypatch.setattr(spec_module, "MAX_POINTS", 12)
    assert len(load_spec(_spec(tmp_path, f"study: {ECHO}\ngrid:\n  x: [1, 2, 3]\n"
                                         "  y: {range: [0, 4]}\n")).points) == 12  # fmt: skip
    with pytest.raises(
        InvalidFile, match=r"grid: has 15 points \(3 'x' x 5 'y'\), more than the 12"
    ):
        load_spec(
            _spec(tmp_path, f"study: {ECHO}\ngrid:\n  x: [1, 2, 3]\n  y: {{range: [0, 5]}}\n")
        )
    with pytest.raises(InvalidFile, match=r"sample\.size: is 13, more than the 12"):
        load_spec(_spec(tmp_path, f"study: {ECHO}\nsample: {{size: 13, parameters: {{x: 1}}}}\n"))


# --- numbers beyond int64 and float ---------------------------------------------------------------

BEYOND = [
    (
        "sample: {size: 2, parameters: {x: {integers: [0, 1e300]}}}",
        "sample.parameters.x.integers: bounds must be 64-bit integers, -2**63 <= low < high <= "
        "2**63, got [0, 1e+300]",
    ),
    (
        "sample: {size: 2, parameters: {x: {integers: [-9223372036854775809, 0]}}}",
        "sample.parameters.x.integers: bounds must be 64-bit integers",
    ),
    (
        "sample: {size: 2, parameters: {x: {uniform: [0, 1" + "0" * 400 + "]}}}",
        "sample.parameters.x.uniform: must be numbers within floating point (about 1.8e308)",
    ),
    (
        "grid: {x: {linspace: [0, 1" + "0" * 400 + ", 3]}}",
        "grid.x.linspace: must be numbers within floating point",
    ),
    ("grid: {x: {range: [0, 1" + "0" * 400 + "]}}", "grid.x.range: gives about 1e400 values"),
    ("grid: {x: {linspace: [0, 1, 1" + "0" * 400 + "]}}", "grid.x.linspace: gives about 1e400"),
]


@pytest.mark.parametrize(("body", "message"), BEYOND)
def test_bounds_beyond_int64_or_float_are_clear_errors(tmp_path, body, message):
    path = _spec(tmp_path, f"study: {ECHO}\n{body}\n")
    assert _one_line_error(tmp_path, path).startswith(f"error: {path}: {message}")


def test_samples_at_the_extremes_of_float_and_int64_are_drawn_within_their_bounds():
    top = float(np.finfo(float).max)
    dists = {
        "u": Distribution("uniform", low=-1e308, high=1e308),
        "w": Distribution("uniform", low=-top, high=top),
        "g": Distribution("log_uniform", low=5e-324, high=top),
        "i": Distribution("integers", low=-(2**63), high=2**63),
    }
    points = sample_points(dists, 2000, seed=3)
    for p in points:
        assert -1e308 <= p["u"] < 1e308 and -top <= p["w"] <= top and 5e-324 <= p["g"] <= top
        assert -(2**63) <= p["i"] < 2**63
    # Uniform over the whole range: about half below zero, and spread over all magnitudes.
    assert 900 < sum(p["u"] < 0 for p in points) < 1100
    assert max(abs(p["u"]) for p in points) > 0.99e308
    assert min(abs(p["u"]) for p in points) < 1e306
    assert 900 < sum(p["i"] < 0 for p in points) < 1100


def test_ordinary_draws_are_numpys_so_existing_points_keep_their_ids():
    dists = {"u": Distribution("uniform", low=0.2, high=0.9),
             "i": Distribution("integers", low=0, high=10**12)}  # fmt: skip
    rng = np.random.default_rng(11)
    expected = [(float(rng.uniform(0.2, 0.9)), int(rng.integers(0, 10**12))) for _ in range(5)]
    assert [(p["u"], p["i"]) for p in sample_points(dists, 5, seed=11)] == expected
    assert linspace(0.2, 0.9, 8) == [float(x) for x in np.linspace(0.2, 0.9, 8)]


def test_a_linspace_wider_than_float_keeps_its_ends_and_spacing():
    values = linspace(-1e308, 1e308, 5)
    assert values == [-1e308, -5e307, 0.0, 5e307, 1e308]
    assert all(math.isfinite(v) for v in linspace(-1.7e308, 1.7e308, 1001))


def test_grid_ranges_of_huge_integers_are_exact(tmp_path):
    sweep = load_spec(
        _spec(tmp_path, f"study: {ECHO}\ngrid: {{x: {{range: [0, 1e300, 1e299]}}}}\n")
    )
    assert [p.params["x"] for p in sweep.points] == [k * int(1e299) for k in range(10)]
    # They do not fit Parquet: the sweep still succeeds and says so.
    result = runner.invoke(app, ["sweep", str(tmp_path / "spec.yaml"), "--out",
                                 str(tmp_path / "out"), "-j", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    if _has("pyarrow"):
        assert "note: results.parquet not written: the rows do not fit Parquet" in result.stderr
    with (tmp_path / "out" / "results.csv").open() as handle:
        assert [int(r["x"]) for r in csv.DictReader(handle)] == [k * int(1e299) for k in range(10)]


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# --- studies, options, addresses ------------------------------------------------------------------

E, G = f"study: {ECHO}\n", "grid: {x: [1]}\n"
BAD_SPECS = [
    (
        "study: os:system\ngrid: {x: [1]}\n",
        "study: os:system takes (command), it cannot be called as function(params, seed, options)",
    ),
    (
        "study: os:getcwd\ngrid: {x: [1]}\n",
        "study: os:getcwd takes (), it cannot be called as function(params, seed, options)",
    ),
    ("study: 'os:path.join'\ngrid: {x: [1]}\n", "study: must look like 'package.module:function'"),
    ("study: 'os:'\ngrid: {x: [1]}\n", "study: must look like 'package.module:function'"),
    ("study: ':f'\ngrid: {x: [1]}\n", "study: must look like 'package.module:function'"),
    ("study: '../os:getcwd'\ngrid: {x: [1]}\n", "study: must look like 'package.module:function'"),
    (f"{E}options: {{x: .nan}}\n{G}", "options.x: must be a finite number, got nan"),
    (f"{E}options: {{x: [1, .inf]}}\n{G}", "options.x[1]: must be a finite number, got inf"),
    (f"{E}options: {{a: {{b: -.inf}}}}\n{G}", "options.a.b: must be a finite number, got -inf"),
    (f"{E}options: {{when: 2024-01-01}}\n{G}", "options.when: must be a number, a string"),
    (f"{E}options: {{a: {{1: b}}}}\n{G}", "options.a: keys must be strings, got 1"),
    (f"{E}grid: {{x: [1, .nan]}}\n", "grid.x[1]: must be a finite number, got nan"),
    (f"{E}grid: {{x: .inf}}\n", "grid.x[0]: must be a finite number, got inf"),
    (
        f"{E}sample: {{size: 1, parameters: {{x: {{choice: [.nan]}}}}}}\n",
        "sample.parameters.x.choice[0]: must be a finite number",
    ),
    (
        "study: provisioning\noptions: {methods: [.nan]}\ngrid: {dnn: vgg16, alpha: 0.5}\n",
        "options.methods[0]: must be a finite number",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_SPECS)
def test_bad_studies_and_options_are_one_line_errors_naming_file_and_field(tmp_path, text, message):
    path = _spec(tmp_path, text)
    with pytest.raises(InferplanError) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{path}: {message}"), str(info.value)
    assert _one_line_error(tmp_path, path).startswith(f"error: {path}: {message}")


BOMB = "  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"  {a}: &{a} [{', '.join([f'*{b}'] * 9)}]\n"
    for b, a in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_options_that_are_not_json_are_refused_by_the_library_too(tmp_path):
    points = make_points([{"x": 1}], sweep_seed=0)
    for options in ({"a": float("nan")}, {"a": object()}):
        with pytest.raises(InvalidArgument, match="options: must be plain JSON with finite"):
            run_sweep(Sweep(ECHO, points, options), tmp_path)
    assert not (tmp_path / "sweep.json").exists()


def test_an_alias_bomb_in_options_or_grid_is_refused_at_once(tmp_path):
    path = _spec(tmp_path, f"study: {ECHO}\noptions:\n{BOMB}grid: {{x: [1]}}\n")
    error = _one_line_error(tmp_path, path)
    assert error == f"error: {path}: options: hold more than 100,000 values (a YAML alias bomb?)"
    # In a grid axis, the message quotes a shortened value.
    path = _spec(tmp_path, f"study: {ECHO}\ngrid:\n{BOMB}")
    error = _one_line_error(tmp_path, path)
    assert error.startswith(f"error: {path}: grid.b[0]: must be a number, a string or a boolean")
    assert len(error) < 300


def test_a_study_not_of_the_form_package_module_function_is_never_imported(tmp_path, monkeypatch):
    (tmp_path / "evil.py").write_text(
        "import pathlib\npathlib.Path('imported').write_text('yes')\n"
        "def f(params, seed, options):\n    return {}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    for name in ("evil:f.g", "evil:", "evil:f:g", "evil :f", "evil.:f", "evil:f()"):
        path = _spec(tmp_path, f"study: '{name}'\ngrid: {{x: [1]}}\n")
        assert "must look like 'package.module:function'" in _one_line_error(tmp_path, path)
    assert not (tmp_path / "imported").exists()
    assert "evil" not in sys.modules


def test_a_study_next_to_the_spec_runs_with_the_current_directory_first(tmp_path, monkeypatch):
    (tmp_path / "mystudy.py").write_text(
        "def point(params, seed, options):\n    import helper\n"
        "    return {'y': helper.twice(params['x'])}\n"
    )
    (tmp_path / "helper.py").write_text("def twice(x):\n    return 2 * x\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    for name in ("mystudy", "helper"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    path = _spec(tmp_path, "study: mystudy:point\ngrid: {x: [1, 2]}\n")
    result = runner.invoke(app, ["sweep", str(path), "--out", "out", "-j", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert sys.path[0] == str(tmp_path)
    with (tmp_path / "out" / "results.csv").open() as handle:
        assert [(r["x"], r["y"]) for r in csv.DictReader(handle)] == [("1", "2"), ("2", "4")]
    monkeypatch.delitem(sys.modules, "mystudy")
    monkeypatch.delitem(sys.modules, "helper")


def test_help_says_that_a_custom_study_is_imported_and_run():
    result = runner.invoke(app, ["sweep", "--help"], terminal_width=200)
    text = " ".join(result.stdout.replace("│", " ").split())
    assert "imports that module and runs that function" in text
    assert "current directory first on the import path" in text
    assert "A scheduler is trusted" in text


@pytest.mark.parametrize(
    "address",
    ["foo", "", "tcp://", "tcp://host:abc", "tcp://[::1", "::::", "tcp://127.0.0.1:99999",
     "ucx://x:1", "inproc://x", "tcp://127.0.0.1:", "tcp://h:1" + "9" * 5000, "tcp://a b:1",
     "tcp://tcp://h:1", "tcp://h:+1"],
)  # fmt: skip
def test_a_malformed_cluster_address_is_a_one_line_error(tmp_path, address):
    message = "error: --cluster: must be 'local' or a Dask scheduler address tcp://HOST:PORT"
    path = _spec(tmp_path, f"study: {ECHO}\ngrid: {{x: [1, 2]}}\n")
    assert _one_line_error(tmp_path, path, "--cluster", address).startswith(message)
    with pytest.raises(InvalidArgument, match="cluster: must be 'local'"):
        check_address(address)


@pytest.mark.parametrize("address", ["local", "tcp://127.0.0.1:8786", "tls://[::1]:1", "h-1.x:80"])
def test_well_formed_cluster_addresses_pass(address):
    check_address(address)


def test_an_in_process_address_of_another_process_is_a_one_line_error(tmp_path):
    pytest.importorskip("distributed")
    path = _spec(tmp_path, f"study: {ECHO}\ngrid: {{x: [1, 2]}}\n")
    error = _one_line_error(tmp_path, path, "--cluster", "inproc://1.2.3.4/5/6")
    assert error.startswith("error: --cluster: cannot reach a Dask scheduler at 'inproc://")


def test_reproduce_coinference_with_one_simulated_inference_is_a_one_line_error(tmp_path):
    result = runner.invoke(app, ["reproduce", "coinference", "--out", str(tmp_path),
                                 "--simulate", "1"])  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --simulate: simulate needs at least 2 inferences (or 0: no simulation), got 1\n"
    )
    assert not list(tmp_path.iterdir())


# --- failing points: stored as failures, the rest go on, a rerun retries only them ---------------


def _flaky_sweep(tmp_path: Path, n: int = 6) -> tuple[Sweep, Path]:
    fail_file = tmp_path / "fail.json"
    points = make_points(grid_points({"x": list(range(1, n + 1))}), sweep_seed=2)
    options = {"fail_file": str(fail_file)}
    return Sweep("tests.experiments.points:flaky", points, options, seed=2), fail_file


@pytest.mark.parametrize("jobs", [1, 2])
def test_failing_points_are_stored_as_failures_and_only_they_are_retried(tmp_path, jobs):
    sweep, fail_file = _flaky_sweep(tmp_path)
    fail_file.write_text("[2, 5]")
    out = tmp_path / "out"
    first = run_sweep(sweep, out, jobs=jobs)
    failed_ids = [p.id for p in sweep.points if p.params["x"] in (2, 5)]
    assert [r.point for r in first.failed] == failed_ids
    assert [r.error for r in first.failed] == ["ValueError: x = 2 is cursed",
                                               "ValueError: x = 5 is cursed"]  # fmt: skip
    assert all("Traceback" in (r.traceback or "") for r in first.failed)
    expected = draw_rows(sweep.points)
    assert list(first.rows) == [r for r in expected if r["x"] not in (2, 5)]
    assert set(ResultStore(out).failed()) == set(failed_ids)
    with (out / "failures.csv").open() as handle:
        assert [(r["x"], r["error"]) for r in csv.DictReader(handle)] == [
            ("2", "ValueError: x = 2 is cursed"), ("5", "ValueError: x = 5 is cursed")
        ]  # fmt: skip
    with pytest.raises(FailedPoints) as info:
        first.raise_for_failures()
    assert str(info.value).startswith(
        f"2 of 6 points failed (rerun the same command to retry only them; all errors in "
        f'{out / "failures.csv"}): point {failed_ids[0]} {{"x":2}}: ValueError: x = 2 is '
        f"cursed; also {failed_ids[1]}"
    )
    # Still failing: retried, still stored as failures, nothing else rerun.
    again = run_sweep(sweep, out, jobs=jobs)
    assert (again.resumed, again.ran, len(again.failed)) == (4, 2, 2)
    fail_file.unlink()
    last = run_sweep(sweep, out, jobs=jobs)
    assert (last.resumed, last.ran, last.failed) == (4, 2, ())
    assert list(last.rows) == expected
    assert not (out / "failures.csv").exists()
    assert ResultStore(out).failed() == {}
    assert run_sweep(sweep, out).ran == 0


def test_the_sweep_command_exits_2_naming_the_failed_points_and_keeps_the_others(tmp_path):
    fail_file = tmp_path / "fail.json"
    fail_file.write_text("[3]")
    path = _spec(tmp_path, f"study: tests.experiments.points:flaky\noptions: {{fail_file: "
                           f"{fail_file}}}\ngrid:\n  x: {{range: [1, 5]}}\n")  # fmt: skip
    error = _one_line_error(tmp_path, path, "-j", "1")
    assert error.startswith(f"error: {path}: 1 of 4 points failed (rerun the same command to "
                            "retry only them; all errors in ")  # fmt: skip
    assert error.endswith('{"x":3}: ValueError: x = 3 is cursed')
    with (tmp_path / "out" / "results.csv").open() as handle:
        assert sorted({r["x"] for r in csv.DictReader(handle)}) == ["1", "2", "4"]
    fail_file.unlink()
    rerun = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out"), "--json"])
    assert rerun.exit_code == 0, rerun.output
    assert json.loads(rerun.stdout)["ran"] == 1 and json.loads(rerun.stdout)["failed"] == []


def test_a_point_function_returning_no_rows_fails_that_point_only(tmp_path):
    points = make_points(grid_points({"x": [0, 1, 2, 3, 4]}), sweep_seed=0)
    outcome = run_sweep(Sweep("tests.experiments.points:bad_rows", points), tmp_path)
    errors = {r.params["x"]: r.error for r in outcome.failed}
    name = "tests.experiments.points:bad_rows"
    assert errors[0] == f"{name} returned None, not a row (a mapping) or a list of rows"
    assert errors[1].startswith(f"{name} returned 5, not a row")
    assert errors[2].startswith(f"{name} returned a row that is not JSON")
    assert errors[3].startswith(f"{name} returned [{{'a': 1}}, 'b'], not a row")
    # numpy scalars are plain numbers, the same read back from disk as just computed.
    assert [(r["a"], r["b"]) for r in outcome.rows] == [(0.5, 3)]
    assert type(outcome.rows[0]["b"]) is int


def test_builtins_print_as_a_study_fails_its_points_with_one_line(tmp_path):
    path = _spec(tmp_path, "study: builtins:print\ngrid: {x: [1]}\n")
    error = _one_line_error(tmp_path, path, "-j", "1")
    assert error.endswith("builtins:print returned None, not a row (a mapping) or a list of rows")


# --- one sweep per directory; metadata written whole; torn lines ---------------------------------


def test_a_second_sweep_on_the_same_out_is_refused_naming_the_holder(tmp_path):
    path = _spec(tmp_path, f"study: {ECHO}\ngrid: {{x: [1, 2]}}\n")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "inferplan", "sweep", str(path), "--out", str(out), "-j", "1"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    with ResultStore(out).lock():
        held = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert held.returncode == 2
    assert held.stderr.startswith(
        f"error: {out}: another sweep is running in this directory (pid {os.getpid()} on "
    )
    assert held.stderr.count("\n") == 1 and "choose another output directory" in held.stderr
    free = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert free.returncode == 0, free.stderr
    assert not (out / "sweep.lock").exists()  # released and removed when the sweep ended


def test_metadata_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "sweep.json"
    target.write_text('{"old": true}\n')

    class Crash(Exception):
        pass

    with pytest.raises(Crash), atomic_path(target) as temporary:
        temporary.write_text('{"new": ')
        raise Crash
    assert target.read_text() == '{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.json"]


def test_an_unreadable_sweep_json_without_results_is_written_again(tmp_path):
    sweep = Sweep(ECHO, make_points([{"x": 1}], sweep_seed=0), {"a": 1})
    (tmp_path / "sweep.json").write_text('{"format": 1, "stu')
    assert run_sweep(sweep, tmp_path).ran == 1
    assert json.loads((tmp_path / "sweep.json").read_text())["options"] == {"a": 1}
    (tmp_path / "sweep.json").write_text('{"format": 1, "stu')
    with pytest.raises(InvalidFile, match=r"cannot read the sweep description .*restore it"):
        run_sweep(sweep, tmp_path)


def test_a_last_line_torn_inside_a_utf8_character_is_a_torn_write(tmp_path):
    store = ResultStore(tmp_path)
    with store.writer() as shard:
        shard.write(PointRecord("a", 1, {"x": "é"}, ({"v": 1},)))
    path = tmp_path / "shards" / "part-0001.jsonl"
    whole = path.read_bytes()
    # A line cut inside a two-byte character, as a killed writer of raw UTF-8 would leave it.
    torn = '{"point":"b","seed":2,"params":{"x":"é'.encode()[:-1]
    path.write_bytes(whole + torn)
    assert list(store.finished()) == ["a"]
    path.write_bytes(torn + b"\n" + whole)  # the same bytes before the end: corrupt
    with pytest.raises(InvalidFile, match=r"line 1 is not a point record \(.*utf-8"):
        store.finished()


# --- killed sweeps leave no workers behind -------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("executor", [["--jobs", "2"], ["--cluster", "local", "--workers", "2"]])
def test_workers_exit_when_the_sweep_process_is_killed(tmp_path, executor):
    if executor[0] == "--cluster":
        pytest.importorskip("distributed")
    marks = tmp_path / "marks"
    marks.mkdir()
    # Points sleep far longer than the test waits: a surviving worker would still be there.
    path = _spec(tmp_path, f"study: tests.experiments.points:marked_sleep\noptions: {{marks: "
                           f"{marks}, sleep: 600}}\ngrid:\n  x: {{range: [0, 4]}}\n")  # fmt: skip
    command = [sys.executable, "-m", "inferplan", "sweep", str(path), "--out",
               str(tmp_path / "out"), "--quiet", *executor]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while len(list(marks.iterdir())) < 2 and time.monotonic() < deadline:
            assert process.poll() is None, "the sweep ended early"
            time.sleep(0.1)
        workers = [int(p.name) for p in marks.iterdir()]
        assert len(workers) == 2, "the workers did not start in time"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    deadline = time.monotonic() + 60
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = [pid for pid in workers if _alive(pid)]
    for pid in survivors:  # do not leave them behind, then fail
        os.kill(pid, signal.SIGKILL)
    assert not survivors, f"workers {survivors} outlived the killed sweep"


# --- a local Dask cluster stays on 127.0.0.1, without a dashboard unless asked -------------------


@pytest.mark.slow
def test_a_local_dask_cluster_listens_on_loopback_only_and_has_no_dashboard(tmp_path, capsys):
    pytest.importorskip("distributed")
    psutil = pytest.importorskip("psutil")
    me = psutil.Process()
    listening: list[tuple[str, int]] = []

    def progress(done: int, total: int) -> None:
        for proc in [me, *me.children(recursive=True)]:
            try:
                conns = proc.net_connections(kind="inet")
            except psutil.Error:
                continue
            listening.extend((c.laddr.ip, c.laddr.port) for c in conns if c.status == "LISTEN")

    before = {(c.laddr.ip, c.laddr.port) for c in me.net_connections(kind="inet")
              if c.status == "LISTEN"}  # fmt: skip
    sweep = Sweep(ECHO, make_points([{"x": 1}, {"x": 2}], sweep_seed=0), {"a": 1})
    outcome = run_sweep(sweep, tmp_path, cluster="local", workers=1, progress=progress)
    assert [r["a"] for r in outcome.rows] == [1, 1]
    new = set(listening) - before
    assert new, "no listener seen: the check saw nothing"
    assert {ip for ip, _ in new} == {"127.0.0.1"}
    assert 8787 not in {port for _, port in new}
    assert "dashboard" not in capsys.readouterr().err.lower()


def test_a_dying_worker_process_is_a_one_line_error_and_finished_points_stay(tmp_path):
    path = _spec(tmp_path, "study: tests.experiments.points:die\noptions: {die_at: 4}\n"
                           "grid:\n  x: {range: [1, 5]}\n")  # fmt: skip
    error = _one_line_error(tmp_path, path, "-j", "2")
    assert error.startswith(f"error: {path}: a worker process died while running a point (")
    assert error.endswith("the points finished before are stored: rerun the same command to resume")
    stored = ResultStore(tmp_path / "out").finished()
    assert {r.params["x"] for r in stored.values()} <= {1, 2, 3}


# --- numbers beyond 64 bits; corrupt shard lines; a results file that is a folder -------------


def test_a_json_spec_of_integers_beyond_64_bits_draws_the_points_of_its_yaml_form(tmp_path):
    spec = {"study": ECHO, "grid": {"x": [2**64, 2**64 + 1], "y": [-(2**63) - 1]}}
    sweeps = [load_spec(_spec(tmp_path, json.dumps(spec), f"spec.{form}"))
              for form in ("json", "yaml")]  # fmt: skip
    assert [p.params for p in sweeps[0].points] == [p.params for p in sweeps[1].points] == [
        {"x": 2**64, "y": -(2**63) - 1}, {"x": 2**64 + 1, "y": -(2**63) - 1}]  # fmt: skip


CORRUPT_LINES = [
    ('{"point":"b","seed":1e999,"params":{},"rows":[]}', "seed must be a non-negative integer"),
    ('{"point":"b","seed":2.5,"params":{},"rows":[]}', "seed must be a non-negative integer"),
    ('{"point":"b","seed":true,"params":{},"rows":[]}', "seed must be a non-negative integer"),
    ('{"point":"b","seed":1,"params":[1],"rows":[]}', "params must be an object"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 100 lists or mappings at line 1"),
    ('{"point":"b","seed":1,"params":{},"rows":[' + "[" * 5000, "nested deeper than 100"),
]


@pytest.mark.parametrize(("line", "problem"), CORRUPT_LINES)
def test_a_corrupt_shard_line_is_named_by_file_and_line_on_resume(tmp_path, line, problem):
    path = _spec(tmp_path, f"study: {ECHO}\ngrid:\n  x: [1, 2]\n")
    assert runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out")]).exit_code == 0
    shard = tmp_path / "out" / "shards" / "part-0001.jsonl"
    shard.write_text(line + "\n" + shard.read_text())
    error = _one_line_error(tmp_path, path)
    assert error.startswith(f"error: {shard}: line 1 is not a point record ("), error
    assert problem in error
    shard.write_text(shard.read_text().split("\n", 1)[1] + line)  # the torn last line: ignored
    assert runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out")]).exit_code == 0


def test_a_results_file_that_is_a_folder_is_named_itself(tmp_path):
    path = _spec(tmp_path, f"study: {ECHO}\ngrid:\n  x: [1]\n")
    (tmp_path / "out" / "results.csv").mkdir(parents=True)
    error = _one_line_error(tmp_path, path)
    assert error == f"error: {tmp_path / 'out' / 'results.csv'}: Is a directory"
