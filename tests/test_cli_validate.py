"""``inferplan validate``: each kind of file said for what it is, with numbers read off the
file itself, and every broken file one error line naming it (exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferplan.documents import read_document
from tests.cli import app, invoke_json, runner

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples"


# The docs' example of a channel that is refused (plain Rayleigh fading).
REFUSED = {"plain-rayleigh.yaml"}


def test_every_shipped_example_validates_as_its_kind():
    files = sorted(f for f in EXAMPLES.iterdir() if f.suffix in (".json", ".yaml"))
    result = runner.invoke(app, ["validate", *map(str, files), "--json"])
    assert result.exit_code == 2
    out = json.loads(result.stdout)["files"]
    assert [r["file"] for r in out] == [str(f) for f in files]
    assert {Path(r["file"]).name for r in out if not r["valid"]} == REFUSED, out
    assert "channel: E[1/log2(1+SNR)] is infinite" in result.stderr
    out = [r for r in out if r["valid"]]
    kinds = {Path(r["file"]).name: r["kind"] for r in out}
    assert kinds["network.json"] == "network" and kinds["system.yaml"] == "system"
    assert kinds["melange-example.json"] == "GPU mix"
    assert kinds["services.yaml"] == "services" and kinds["sweep.yaml"] == "sweep"
    assert kinds["node-times.yaml"] == "node times"
    for r in out:  # the numbers are the file's own
        doc = read_document(r["file"])
        if r["kind"] == "network":
            assert (r["nodes"], r["links"]) == (len(doc["nodes"]), len(doc["links"]))
            assert (r["source"], r["target"]) == (doc["source"], doc["target"])
        if r["kind"] == "services":
            assert r["services"] == [s["name"] for s in doc["services"]]
        if r["kind"] == "node times":
            assert r["nodes"] == list(doc["block_seconds"])
            assert r["blocks"] == sorted({len(t) for t in doc["block_seconds"].values()})
        if r["kind"] == "system":
            assert r["device_hz"] == doc["device"]["cpu_hz"]
            assert r["edge_hz"] == doc["edge"]["cpu_hz"]
    assert next(r for r in out if r["file"].endswith("system-small.yaml"))["layers"] == 3
    # A system for edge serve / device run takes its layers from the model it runs.
    assert next(r for r in out if r["file"].endswith("edge-mlp.yaml"))["layers"] is None


def test_profiles_plans_and_sweeps_say_what_they_hold(tmp_path):
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"name": "tiny", "flops": [2e6, 1e6],
                                   "activation_bits": [800.0, 400.0, 32.0]}))  # fmt: skip
    plan = tmp_path / "plan.json"
    made = runner.invoke(app, ["provision", str(EXAMPLES / "network.json"), str(profile),
                               "--throughput", "30", "--json"])  # fmt: skip
    plan.write_text(made.stdout)
    result = runner.invoke(app, ["validate", str(profile), str(plan)])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{profile}: profile: tiny, 2 blocks, 3 MFLOP, input 800 bit"
    want = json.loads(made.stdout)
    assert lines[1].startswith(f"{plan}: plan: path {' -> '.join(want['path'])}, partition "
                               f"{','.join(map(str, want['partition']))}")  # fmt: skip
    out = invoke_json(["validate", str(EXAMPLES / "sweep-sample.yaml"), "--json"])["files"][0]
    assert out["points"] == read_document(EXAMPLES / "sweep-sample.yaml")["sample"]["size"]


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        ({"source": "s", "target": "t", "nodes": [{"id": "s", "capacity": -1, "price": 1}],
          "links": []}, "capacity must be a positive"),
        ({"name": "x", "flops": [1.0], "activation_bits": [1.0]}, "activation_bits"),
        ({"device": {"cpu_hz": 1e9}, "edge": {"cpu_hz": 1e9}}, "device"),
        ({"services": []}, "services"),
        ({"study": "nope"}, "study"),
        ({"path": ["s"], "partition": [1]}, "interval"),
        ({"hello": 1}, "not an inferplan file"),
    ],
)  # fmt: skip
def test_a_broken_file_is_one_error_line_naming_it(tmp_path, doc, error):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    good = EXAMPLES / "network.json"
    result = runner.invoke(app, ["validate", str(good), str(path)])
    assert result.exit_code == 2
    assert result.stdout.startswith(f"{good}: network: ")  # the good file is still described
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"error: {path}: ")
    assert error in result.stderr
    out = json.loads(runner.invoke(app, ["validate", str(path), "--json"]).stdout)["files"][0]
    assert out["valid"] is False and error in out["error"]


def test_a_missing_file_is_an_error():
    result = runner.invoke(app, ["validate", "no-such-file.json"])
    assert result.exit_code == 2 and result.stderr.startswith("error: no-such-file.json")
