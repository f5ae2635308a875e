"""The co-design commands: JSON contracts and readable output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import inferplan
from tests.cli import app, runner
from tests.cli import invoke_json as _json

EXAMPLE = Path(__file__).parents[2] / "examples" / "network.json"


@pytest.mark.parametrize("method", ["psg", "pfp", "pwf"])
def test_provision_json_contract(method):
    out = _json(["provision", str(EXAMPLE), "vgg16", "--throughput", "30", "--method", method,
                 "--json"])  # fmt: skip
    assert set(out) == {"method", "status", "cost", "interval", "target_interval", "latency",
                        "target_latency", "path", "partition", "ideals", "cuts", "layers",
                        "sends", "node_upgrades", "link_upgrades", "bottleneck", "memory_upgrades",
                        "memory"}  # fmt: skip
    assert out["latency"] >= out["interval"] and out["target_latency"] is None
    assert set(out["bottleneck"]) == {"kind", "id"}
    assert out["cuts"] == "chain" and out["ideals"] is None
    assert [name for names in out["layers"] for name in names] == list(inferplan.vgg16().blocks)
    assert [m["id"] for m in out["memory"]] == out["path"]
    assert all(set(m) == {"id", "need", "memory", "added"} and m["need"] > 0
               for m in out["memory"])  # fmt: skip
    assert out["method"] == method
    assert out["status"] == ("optimal" if method == "psg" else "heuristic")
    assert out["target_interval"] == pytest.approx(1 / 30)
    assert out["interval"] <= out["target_interval"] * (1 + 1e-9)
    assert out["path"][0] == "s" and out["path"][-1] == "t"
    assert len(out["partition"]) == len(out["path"]) and out["partition"][-1] == 16
    assert all(v > 0 for v in out["node_upgrades"].values())
    for u in out["link_upgrades"]:
        assert set(u) == {"source", "target", "amount"} and u["amount"] > 0
    api = inferplan.provision(inferplan.load_network(EXAMPLE), inferplan.vgg16(),
                              throughput=30, method=method)  # fmt: skip
    assert out == json.loads(json.dumps(api.to_dict()))


def test_throughput_json_contract():
    out = _json(["throughput", str(EXAMPLE), "resnet50", "--json"])
    assert set(out) == {"interval", "throughput", "latency", "path", "partition", "ideals",
                        "cuts", "layers", "sends", "bottleneck"}  # fmt: skip
    assert out["latency"] >= out["interval"]
    assert out["throughput"] == pytest.approx(1 / out["interval"])


def test_interval_and_throughput_agree():
    a = _json(["provision", str(EXAMPLE), "alexnet", "--throughput", "50", "--json"])
    b = _json(["provision", str(EXAMPLE), "alexnet", "--interval", "0.02", "--json"])
    assert a["cost"] == pytest.approx(b["cost"])


def test_readable_output():
    result = runner.invoke(app, ["provision", str(EXAMPLE), "vgg16", "--throughput", "30"])
    assert result.exit_code == 0
    assert "psg" in result.stdout and "deployment" in result.stdout


def test_profile_json_is_the_profile_file_format(tmp_path):
    out = _json(["profile", "resnet50", "--json"])
    path = tmp_path / "r.json"
    path.write_text(json.dumps(out))
    assert inferplan.load_profile(path) == inferplan.resnet50()


def test_generate_tiered(tmp_path):
    path = tmp_path / "net.yaml"
    result = runner.invoke(app, ["generate", "tiered", "--seed", "12", "-o", str(path)])
    assert result.exit_code == 0
    assert inferplan.load_network(path) == inferplan.tiered(seed=12)
    printed = _json(["generate", "tiered", "--seed", "12"])
    assert inferplan.network_from_dict(printed) == inferplan.tiered(seed=12)


def _long_named_network(tmp_path: Path) -> Path:
    """The example network with one relay renamed to a 150-character id."""
    doc = json.loads(EXAMPLE.read_text())
    long = "relay-" + "x" * 144
    text = json.dumps(doc).replace('"m1"', json.dumps(long))
    path = tmp_path / "long.json"
    path.write_text(text)
    return path


def test_piped_output_is_never_wrapped(tmp_path):
    path = _long_named_network(tmp_path)
    for args in (["provision", str(path), "vgg16", "--throughput", "30"],
                 ["throughput", str(path), "vgg16"],
                 ["frontier", str(path), "vgg16", "--points", "5"]):  # fmt: skip
        result = runner.invoke(app, args, terminal_width=80)
        assert result.exit_code == 0, result.stderr
        lines = result.stdout.splitlines()
        # the 150-character id stands whole on one line, and every table row is one line
        assert any("relay-" + "x" * 144 in line for line in lines), args
        assert max(len(line) for line in lines) > 150


def test_a_terminal_gets_its_full_width(monkeypatch):
    from inferplan.cli.render import _Console

    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)
    monkeypatch.setenv("COLUMNS", "173")
    assert _Console().rich.width == 173
    monkeypatch.setattr("sys.stdout.isatty", lambda: False, raising=False)
    assert _Console().rich.width > 10_000


def test_links_and_zeros_have_one_notation(tmp_path):
    outputs = [
        runner.invoke(app, args).stdout
        for args in (["provision", str(EXAMPLE), "vgg16", "--throughput", "30"],
                     ["throughput", str(EXAMPLE), "vgg16"],
                     ["frontier", str(EXAMPLE), "vgg16", "--points", "5"],
                     ["provision", str(EXAMPLE), "--services",
                      str(EXAMPLE.parent / "services.yaml")])
    ]  # fmt: skip
    text = "\n".join(outputs)
    assert " -> " in text
    assert " > " not in text and not re.search(r"\w->\w", text)
    # a quantity of nothing is "0 <unit>" in every table; "-" only says "no blocks"
    assert "0 FLOP/s" in outputs[0] and "0 bit/s" in outputs[0]
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) > 2:
            assert all(c != "-" for c in cells[2:]), line
