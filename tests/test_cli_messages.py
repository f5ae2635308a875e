"""What the command line says: --version, help at 80 columns, the T* method for cyclic
networks, achieved vs target and the bottleneck, never/always thresholds, ``written: PATH``,
no half-made output folder, and the local Dask dashboard."""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

import inferplan
from inferplan.coinference.channels import Discrete
from tests.cli import app, invoke_json, runner
from tests.oracles import CYCLIC_NETWORK

ROOT = Path(__file__).parents[1]
EXAMPLE = ROOT / "examples" / "network.json"


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"inferplan {inferplan.__version__}"


# --- help at 80 columns -------------------------------------------------------------------


def _commands(group: Any, prefix: list[str]) -> list[tuple[list[str], Any]]:
    found: list[tuple[list[str], Any]] = [(prefix, group)]
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            found += _commands(command, [*prefix, name])
        else:
            found.append(([*prefix, name], command))
    return found


ALL = _commands(typer.main.get_command(app), [])


@pytest.mark.parametrize("args, command", ALL, ids=[" ".join(a) or "inferplan" for a, _ in ALL])
def test_every_help_reads_cleanly_at_80_columns(args, command):
    result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "<bool>" not in text and "list[" not in text
    assert not re.search(r"\w-\n", text), "a word is split at a hyphen"
    body = text.split("\n", 1)[1]  # the usage line marks arguments taken many times with ...
    assert "..." not in body, "a summary is cut short"
    for param in command.params:
        descriptor = getattr(param, "type_descriptor", None)
        for choice in getattr(descriptor, "choices", None) or ():
            assert re.search(rf"(?<![\w-]){re.escape(str(choice))}(?![\w-])", text), choice
    for name in getattr(command, "commands", {}):
        assert re.search(rf"^  {re.escape(name)} ", text, re.M), name


def test_interval_and_throughput_say_exactly_one_is_required():
    text = runner.invoke(app, ["provision", "--help"], terminal_width=80).stdout
    flat = " ".join(text.split())
    assert flat.count("Give exactly one of --interval and --throughput") == 2


# --- T* with --method, the bottleneck -----------------------------------------------------


def _delays(network: dict, profile: inferplan.Profile, plan: dict) -> dict[str, float]:
    """Every stage's delay (s) of a plan or deployment, from the network file's numbers."""
    nodes = {n["id"]: n["capacity"] for n in network["nodes"]}
    links = {f"{e['source']}->{e['target']}": e["capacity"] for e in network["links"]}
    for node, amount in plan.get("node_upgrades", {}).items():
        nodes[node] += amount
    for u in plan.get("link_upgrades", []):
        links[f"{u['source']}->{u['target']}"] += u["amount"]
    S = [0.0, *itertools.accumulate(profile.flops)]
    delays, prev = {}, 0
    for k, (node, done) in enumerate(zip(plan["path"], plan["partition"], strict=True)):
        delays[node] = (S[done] - S[prev]) / nodes[node]
        if k + 1 < len(plan["path"]):
            link = f"{node}->{plan['path'][k + 1]}"
            delays[link] = profile.activation_bits[done] / links[link]
        prev = done
    return delays


def _check_bottleneck(network: dict, profile: inferplan.Profile, out: dict) -> None:
    delays = _delays(network, profile, out)
    kind, stage = out["bottleneck"]["kind"], out["bottleneck"]["id"]
    assert kind == ("link" if "->" in stage else "node")
    assert delays[stage] == pytest.approx(max(delays.values()), rel=1e-12)
    assert out["interval"] == pytest.approx(max(delays.values()), rel=1e-12)


def test_throughput_on_a_cycle_names_a_method_that_exists(tmp_path):
    path = tmp_path / "cyclic.json"
    path.write_text(json.dumps(CYCLIC_NETWORK))
    refused = runner.invoke(app, ["throughput", str(path), "vgg16"])
    assert refused.exit_code == 2
    assert refused.stderr.count("\n") == 1 and "method 'milp'" in refused.stderr
    out = invoke_json(["throughput", str(path), "vgg16", "--method", "milp", "--json"])
    assert len(set(out["path"])) == len(out["path"])
    _check_bottleneck(CYCLIC_NETWORK, inferplan.vgg16(), out)
    table = runner.invoke(app, ["throughput", str(path), "vgg16", "--method", "milp"]).stdout
    assert re.search(rf"{re.escape(out['bottleneck']['id'])} .*bottleneck", table)


@pytest.mark.parametrize("method", ["psg", "milp", "pfp", "pwf"])
@pytest.mark.parametrize("rate", ["20", "30", "60"])
def test_provision_names_its_bottleneck(method, rate):
    network = json.loads(EXAMPLE.read_text())
    out = invoke_json(["provision", str(EXAMPLE), "vgg16", "--throughput", rate, "--method",
                       method, "--json"])  # fmt: skip
    _check_bottleneck(network, inferplan.vgg16(), out)


def test_throughput_names_its_bottleneck():
    network = json.loads(EXAMPLE.read_text())
    for dnn in ("vgg16", "resnet50", "alexnet"):
        out = invoke_json(["throughput", str(EXAMPLE), dnn, "--json"])
        _check_bottleneck(network, inferplan.load_profile(dnn), out)


def test_provision_says_achieved_and_target_plainly():
    result = runner.invoke(app, ["provision", str(EXAMPLE), "vgg16", "--interval", "0.5"],
                           terminal_width=80)  # fmt: skip
    assert result.exit_code == 0, result.output
    out = invoke_json(["provision", str(EXAMPLE), "vgg16", "--interval", "0.5", "--json"])
    achieved = next(line for line in result.stdout.splitlines() if line.startswith("achieved:"))
    target = next(line for line in result.stdout.splitlines() if line.startswith("target:"))
    assert f"{1 / out['interval']:.4g} inferences/s" in achieved
    assert "500 ms" in target and "2 inferences/s" in target
    assert "bottleneck" in result.stdout


# --- co-inference thresholds --------------------------------------------------------------


def test_thresholds_that_cannot_be_met_read_never_and_zero_reads_always():
    from inferplan.cli.coinference import _threshold

    channel = Discrete((0.5, 2.0, 10.0), (0.2, 0.5, 0.3))
    assert _threshold(9.385e27, channel) == "never"
    assert _threshold(10.5, channel) == "never"
    assert _threshold(0.0, channel) == "always"
    assert _threshold(0.4, channel) == "always"
    assert _threshold(2.0, channel) == "2 (3.0 dB)"


SYSTEM = """\
device: {cpu_hz: 1.0e9, kappa: 1.0e-28, tx_power_w: 0.1, bandwidth_hz: 2.0e6}
edge: {cpu_hz: 2.0e10}
downlink_bps: 5.0e7
inferences_per_update: 1000
energy_weight: 0.5
channel: {kind: discrete, snr: [0.5, 2.0, 10.0], prob: [0.2, 0.5, 0.3]}
layers:
  cycles: [2.0e7, 4.0e7, 1.0e7]
  input_bits: [6.0e7, 8.0e9, 2.0e5, 3.2e4]
  param_bits: [2.0e5, 4.0e6, 1.0e6]
"""


def test_coinfer_prints_never_and_json_keeps_the_number(tmp_path):
    path = tmp_path / "system.yaml"
    path.write_text(SYSTEM)
    out = invoke_json(["coinfer", str(path), "--json"])
    assert out["thresholds"][0] > 1e100  # far beyond the channel's best SNR (10)
    text = runner.invoke(app, ["coinfer", str(path)], terminal_width=120).stdout
    assert "never" in text and "dB" not in text.split("split stages")[1]


# --- written: PATH, no half-made output ---------------------------------------------------


def _writes(tmp_path: Path) -> list[tuple[list[str], Path]]:
    system = tmp_path / "system.yaml"
    system.write_text(SYSTEM)
    return [
        (["generate", "tiered", "-o", str(tmp_path / "net.json")], tmp_path / "net.json"),
        (["profile", "vgg16", "-o", str(tmp_path / "vgg.json")], tmp_path / "vgg.json"),
        (["coinfer", str(system), "--policy-out", str(tmp_path / "p.json")], tmp_path / "p.json"),
        (["provision", str(EXAMPLE), "vgg16", "--throughput", "30", "--plot",
          str(tmp_path / "plan.png")], tmp_path / "plan.png"),
        (["frontier", str(EXAMPLE), "vgg16", "--points", "5", "--plot",
          str(tmp_path / "front.png")], tmp_path / "front.png"),
    ]  # fmt: skip


def test_every_command_that_writes_a_file_says_so(tmp_path):
    pytest.importorskip("matplotlib")
    for args, path in _writes(tmp_path):
        for extra in ([], ["--json"]):
            if extra and args[0] == "generate":
                continue
            result = runner.invoke(app, [*args, *extra])
            assert result.exit_code == 0, result.output
            assert path.stat().st_size > 0
            assert f"written: {path}\n" in result.stderr, args
            if extra:
                json.loads(result.stdout)  # stdout stays one JSON object
            path.unlink()


SPEC = "study: provisioning\ngrid:\n  dnn: vgg16\n  alpha: [0.5]\n"


def test_a_sweep_that_fails_before_its_first_result_leaves_no_folder(tmp_path, monkeypatch):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(out), "--cluster",
                                 "tcp://127.0.0.1:9", "-q"])  # fmt: skip
    assert result.exit_code == 2 and "cannot reach" in result.stderr
    assert not out.exists()
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if dask were not installed
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(out), "--cluster", "local"])
    assert result.exit_code == 2 and "pip install 'inferplan[dask]'" in result.stderr
    assert not out.exists()
    # an existing folder (a sweep to resume) is left alone
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    runner.invoke(app, ["sweep", str(spec), "--out", str(out), "--cluster", "local"])
    assert (out / "keep.txt").read_text() == "mine"


def test_a_local_dask_cluster_prints_its_dashboard_when_asked(tmp_path):
    pytest.importorskip("distributed")
    pytest.importorskip("bokeh")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    command = ["sweep", str(spec), "--cluster", "local", "--workers", "1", "-q"]
    result = runner.invoke(app, [*command, "--out", str(tmp_path / "a"), "--dashboard"])
    assert result.exit_code == 0, result.output
    assert re.search(r"dashboard: http://127\.0\.0\.1:\d+/status", result.stderr), result.stderr
    quiet = runner.invoke(app, [*command, "--out", str(tmp_path / "b")])
    assert quiet.exit_code == 0, quiet.output
    assert "dashboard" not in quiet.stderr
