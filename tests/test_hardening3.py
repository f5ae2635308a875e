"""Regression tests of the third hardening round: each class of bad or extreme input ends in
one ``error:`` line (exit 2 for bad input, 3 for a true infeasible) or in the right answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import runner, app

ROOT = Path(__file__).parents[1]
NETWORK = json.loads((ROOT / "examples" / "network.json").read_text())


def _one_error(args: list[str], code: int) -> str:
    result = runner.invoke(app, args)
    context = f"args={args}\nstdout={result.stdout[-1500:]}\nstderr={result.stderr[-3000:]}"
    assert result.exit_code == code, context
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, context
    return result.stderr


def _network(tmp: Path, **link_fields: float) -> str:
    doc = json.loads(json.dumps(NETWORK))
    for link in doc["links"]:
        link.update(link_fields)
    path = tmp / "net.json"
    path.write_text(json.dumps(doc))
    return str(path)


# --- 1. latency arithmetic at float extremes ------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["provision", "{net}", "alexnet", "--throughput", "5"],
        ["throughput", "{net}", "alexnet"],
        ["frontier", "{net}", "alexnet", "--points", "3"],
        ["latency", "{net}", "alexnet"],
    ],
)
def test_delays_summing_beyond_floating_point_are_refused(tmp_path, command):
    net = _network(tmp_path, delay_s=1e308)
    message = _one_error([part.format(net=net) for part in command], 2)
    assert "delay_s" in message and "floating point" in message


def test_a_latency_whose_capacities_overflow_is_beyond_floating_point():
    net = str(ROOT / "examples" / "network.json")
    for method in ("psg", "milp", "pfp"):
        message = _one_error(["provision", net, "alexnet", "--throughput", "1", "--latency",
                              "1e-300", "--method", method], 2)  # fmt: skip
        assert "--latency" in message and "floating point" in message


def _single_link(tmp: Path, delay: float) -> str:
    doc = {
        "source": "s",
        "target": "t",
        "nodes": [{"id": "s", "capacity": 1e9, "price": 1e-9},
                  {"id": "t", "capacity": 1e9, "price": 1e-9}],
        "links": [{"source": "s", "target": "t", "capacity": 1e8, "price": 1e-8,
                   "delay_s": delay}],
    }  # fmt: skip
    path = tmp / "one.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("method", ["psg", "milp", "pfp"])
def test_a_bound_equal_to_the_propagation_delay_is_infeasible(tmp_path, method):
    # Every deployment sends over the one link (0.5 s) and computes somewhere, which takes
    # time at any finite capacity: a latency of exactly 0.5 s is out of reach.
    net = _single_link(tmp_path, 0.5)
    _one_error(["provision", net, "alexnet", "--throughput", "1", "--latency", "0.5",
                "--method", method], 3)  # fmt: skip


def test_least_latency_without_an_answer_says_why(tmp_path):
    doc = json.loads(json.dumps(NETWORK))
    for node in doc["nodes"]:
        node["memory"] = 1000  # AlexNet's weights fit no node
    path = tmp_path / "mem.json"
    path.write_text(json.dumps(doc))
    message = _one_error(["latency", str(path), "alexnet"], 3)
    assert "None" not in message and "memory" in message


# --- 2. sizes the docs promise are checked before any work starts ----------------------------


def _wide_profile(tmp: Path, width: int = 40) -> str:
    """A layer graph of ``width`` parallel layers: ``2**width`` ideals."""
    layers = [{"id": f"l{k}", "flops": 1e9, "params": 10, "output_bits": 1e3}
              for k in range(width)]  # fmt: skip
    doc = {"name": "wide", "input_bits": 1e4,
           "graph": {"layers": layers, "edges": [["input", f"l{k}"] for k in range(width)]}}
    path = tmp / "wide.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_max_ideals_beyond_its_range_is_refused_before_enumerating(tmp_path):
    net, wide = str(ROOT / "examples" / "network.json"), _wide_profile(tmp_path)
    for command in (["provision", net, wide, "--throughput", "1"], ["throughput", net, wide]):
        message = _one_error([*command, "--cuts", "graph", "--max-ideals", str(10**12)], 2)
        assert "--max-ideals" in message and "1,000,000" in message


@pytest.mark.parametrize("method", ["milp", "psg"])
def test_a_planner_of_tables_enumerates_no_more_ideals_than_it_holds(tmp_path, method):
    # 2**40 ideals; the planner holds 4,096: refused after enumerating that many, not 10**6
    net, wide = str(ROOT / "examples" / "network.json"), _wide_profile(tmp_path)
    message = _one_error(["provision", net, wide, "--throughput", "1", "--cuts", "graph",
                          "--max-ideals", "1000000", "--method", method], 2)  # fmt: skip
    assert "more than 4096 cuts" in message
