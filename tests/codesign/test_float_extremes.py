"""Costs at the ends of floating point: capacity sold in modules so small that no float counts
them (free, or priced beyond floating point) and tiers priced near the largest float. Every
method gives the right plan or the documented "costs beyond floating point" error (exit 2),
never a false "infeasible", never a null cost, and no numpy warning."""

from __future__ import annotations

import copy
import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import inferplan
from inferplan.codesign import compile_instance, solve_psg
from inferplan.codesign.services.fast import residual
from inferplan.network.costs import ModuleCost
from inferplan.network.io import load_network
from tests.cli import app, runner
from tests.oracles import brute_force_cost

METHODS = ["psg", "psg-reference", "milp", "pfp", "pwf"]
INTERVAL = 0.01
EXAMPLE = Path(__file__).parents[2] / "examples" / "network.json"

FREE = {"kind": "modules", "size": 5e-324, "price": 0.0}
TOO_DEAR_MODULES = {"kind": "modules", "size": 1e-300, "price": 1e10}
TOO_DEAR_TIERS = {"kind": "tiers", "upto": [1.0], "price": [1e-9, 1e300]}


def _network(tmp_path: Path, cost: dict[str, Any] | None, nodes: set[str] | None) -> Path:
    """The example network with ``cost`` on ``nodes`` (every node and link when ``None``), or
    with their linear price set to 0 when ``cost`` is ``None``."""
    doc = json.loads(EXAMPLE.read_text())
    elements = doc["nodes"] + ([] if nodes else doc["links"])
    for element in elements:
        if nodes is None or element.get("id") in nodes:
            if cost is None:
                element["price"] = 0.0
            else:
                element.pop("price")
                element["cost"] = copy.deepcopy(cost)
    path = tmp_path / f"network-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(doc))
    return path


def _provision(network: Path, method: str, *more: str) -> tuple[int, str, str]:
    args = ["provision", str(network), "alexnet", "--interval", str(INTERVAL), "--method", method,
            *more]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy warning must not reach the user
        result = runner.invoke(app, [*args, "--json"])
    return result.exit_code, result.stdout, result.stderr


def _repriced(plan: dict[str, Any], network: Path) -> float:
    """The plan's upgrades priced from scratch at the linear prices of ``network``."""
    doc = json.loads(network.read_text())
    node_price = {n["id"]: n["price"] for n in doc["nodes"]}
    link_price = {(e["source"], e["target"]): e["price"] for e in doc["links"]}
    return sum(node_price[v] * x for v, x in plan["node_upgrades"].items()) + sum(
        link_price[(u["source"], u["target"])] * u["amount"] for u in plan["link_upgrades"]
    )


@pytest.mark.parametrize("method", METHODS)
def test_capacity_too_finely_sold_to_count_is_free(tmp_path, method):
    # free modules of the smallest float on every element: any target is met at no cost
    code, out, err = _provision(_network(tmp_path, FREE, None), method)
    assert (code, err) == (0, ""), err
    plan = json.loads(out)
    assert plan["cost"] == 0.0
    assert plan["interval"] <= INTERVAL * (1 + 1e-9)


@pytest.mark.parametrize("engine", ["compiled", "numpy"])
def test_free_uncountable_modules_on_both_engines(tmp_path, engine):
    inst = compile_instance(load_network(_network(tmp_path, FREE, None)), inferplan.alexnet())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = solve_psg(inst, INTERVAL, engine=engine)
    assert plan.cost == 0.0 and plan.feasible


@pytest.mark.parametrize("cost", [TOO_DEAR_MODULES, TOO_DEAR_TIERS], ids=["modules", "tiers"])
@pytest.mark.parametrize("method", METHODS)
def test_costs_beyond_floating_point_are_refused(tmp_path, method, cost):
    code, out, err = _provision(_network(tmp_path, cost, None), method)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: --interval: ")
    assert "needs costs beyond floating point" in err


@pytest.mark.parametrize("cost", [FREE, TOO_DEAR_MODULES, TOO_DEAR_TIERS],
                         ids=["free", "dear-modules", "dear-tiers"])  # fmt: skip
@pytest.mark.parametrize("method", METHODS)
def test_extreme_costs_on_some_nodes_leave_a_finite_plan(tmp_path, method, cost):
    # a2 and t at the extreme, the rest priced as usual: a finite plan always exists
    network = _network(tmp_path, cost, {"a2", "t"})
    code, out, err = _provision(network, method)
    assert (code, err) == (0, ""), err
    plan = json.loads(out)
    assert plan["cost"] is not None and math.isfinite(plan["cost"])
    assert plan["interval"] <= INTERVAL * (1 + 1e-9)
    if cost is FREE:  # free capacity is a price of 0: the same plans, priced independently
        linear = _network(tmp_path, None, {"a2", "t"})
        assert plan["cost"] == pytest.approx(_repriced(plan, linear), rel=1e-9, abs=1e-12)
        if method not in ("pfp", "pwf"):
            best = brute_force_cost(load_network(linear), inferplan.alexnet(), INTERVAL)
            assert plan["cost"] == pytest.approx(best, rel=1e-9, abs=1e-12)
    elif method not in ("pfp", "pwf"):
        best = brute_force_cost(load_network(network), inferplan.alexnet(), INTERVAL)
        assert plan["cost"] == pytest.approx(best, rel=1e-9)


def test_uncountable_modules_are_priced_per_unit():
    # 1e30 modules of 1e-300 cannot be counted (1e330): the amount is bought, at price / size
    amounts = np.array([0.0, 1e-10, 1e10])
    dear, free = ModuleCost(1e-300, 1e-300), ModuleCost(5e-324, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dear(amounts).tolist() == pytest.approx(amounts.tolist(), rel=1e-12)
        assert free(amounts).tolist() == [0.0, 0.0, 0.0]
        assert dear.purchase(1e10) == 1e10 and free.purchase(1e10) == 1e10
        assert ModuleCost(1e-300, 1.0, max_amount=1.0)(np.array([2.0]))[0] == math.inf
        capacity, left = residual(1.0, 1e10, free)  # a service using 1e10 of free modules
    assert capacity <= 1e-9 and left(np.array([1e12]))[0] == 0.0


@pytest.mark.parametrize("cost", [FREE, TOO_DEAR_MODULES, TOO_DEAR_TIERS],
                         ids=["free", "dear-modules", "dear-tiers"])  # fmt: skip
@pytest.mark.parametrize("method", ["psg", "pfp"])
def test_extreme_costs_under_a_latency_bound(tmp_path, method, cost):
    code, out, err = _provision(_network(tmp_path, cost, None), method, "--latency", "1")
    if cost is FREE:
        assert (code, err) == (0, ""), err
        plan = json.loads(out)
        assert plan["cost"] == 0.0 and plan["latency"] <= 1.0
    else:
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "needs costs beyond floating point" in err
