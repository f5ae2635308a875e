"""Capacity cost functions: values from their definitions, the network-file form, and plans
that buy whole modules."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import inferplan
from inferplan.errors import InvalidNetwork
from inferplan.network import cost_from_dict
from inferplan.network.costs import (
    FunctionCost,
    LinearCost,
    ModuleCost,
    TieredCost,
)
from tests.oracles import evaluate
from tests.strategies import COST_KINDS, capacity_costs

amounts = st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=500.0))


@given(size=st.floats(0.1, 50.0), price=st.floats(0.0, 10.0), amount=amounts)
def test_modules_charge_every_started_module(size, price, amount):
    cost = ModuleCost(size, price)
    modules = 0
    while modules * size < amount * (1 - 1e-12):  # count modules one by one
        modules += 1
    assert cost(np.array([amount]))[0] == pytest.approx(price * modules)
    assert cost.purchase(amount) == pytest.approx(modules * size)
    assert cost.purchase(amount) >= amount * (1 - 1e-12)


def test_whole_modules_survive_floating_point():
    cost = ModuleCost(0.1, 1.0)
    assert cost(np.array([0.1 * 3]))[0] == 3.0  # 0.30000000000000004 is still three modules
    assert cost(np.array([cost.purchase(0.25)]))[0] == 3.0


def test_module_cap_counts_whole_modules():
    cost = ModuleCost(10.0, 2.0, max_amount=25.0)  # at most two modules
    assert cost(np.array([20.0, 20.5]))[0] == 4.0
    assert math.isinf(cost(np.array([20.5]))[0])


@given(
    widths=st.lists(st.floats(0.5, 50.0), min_size=1, max_size=4),
    data=st.data(),
    amount=amounts,
)
def test_tiers_integrate_the_marginal_price(widths, data, amount):
    upto = tuple(np.cumsum(widths))
    prices = tuple(data.draw(st.lists(st.floats(0.0, 9.0), min_size=len(upto) + 1,
                                      max_size=len(upto) + 1)))  # fmt: skip
    cost = TieredCost(upto, prices)
    expected, low = 0.0, 0.0  # integrate tier by tier
    for k, price in enumerate(prices):
        high = upto[k] if k < len(upto) else math.inf
        expected += price * max(0.0, min(amount, high) - low)
        low = high
    assert cost(np.array([amount]))[0] == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert cost.convex == (list(prices) == sorted(prices))


def test_bounded_tiers_cap_at_the_last_tier():
    cost = TieredCost((10.0, 30.0), (1.0, 2.0))
    assert cost(np.array([30.0]))[0] == 50.0
    assert math.isinf(cost(np.array([30.5]))[0])
    assert cost.max_amount == 30.0


def test_function_cost_takes_scalar_functions_and_checks_zero():
    cost = FunctionCost(lambda x: math.log1p(x), name="log")
    assert cost(np.array([0.0, math.e - 1]))[0:2] == pytest.approx([0.0, 1.0])
    with pytest.raises(ValueError, match="zero at zero"):
        FunctionCost(lambda x: x + 1.0)


@given(data=st.data(), kind=st.sampled_from(COST_KINDS[:4]))
def test_file_form_round_trips(data, kind):
    cost = data.draw(capacity_costs(kind))
    again = cost_from_dict(json.loads(json.dumps(cost.to_dict())))
    grid = np.linspace(0.0, 400.0, 57)
    assert np.array_equal(again(grid), cost(grid))


@pytest.mark.parametrize(
    ("entry", "field", "message"),
    [
        ({"kind": "modules", "price": 3.0}, "size", "missing field"),
        ({"kind": "modules", "size": 0, "price": 3.0}, "size", "greater than 0"),
        ({"kind": "modules", "size": 1e9, "price": -1}, "price", "greater than or equal to 0"),
        ({"kind": "tiers", "upto": [5, 2], "price": [1, 2]}, "", "'upto' must be positive and"),
        ({"kind": "tiers", "upto": [5], "price": [1, 2, 3]}, "", "'price' must have as many"),
        ({"kind": "tiers", "upto": [5], "price": ["a"]}, "price[0]", "valid number, got 'a'"),
        ({"kind": "tiers", "upto": [5]}, "price", "missing field"),
        ({"kind": "linear", "price": 1, "max": -2}, "max", "greater than or equal to 0"),
        ({"kind": "linear", "price": 1, "size": 2}, "size", "unknown field"),
        ({"kind": "linear", "price": True}, "price", "valid number, got True"),
        ({"kind": "step", "price": 1}, "", "tag 'step'"),
    ],
)
def test_bad_cost_objects_name_file_and_field(tmp_path, entry, field, message):
    doc = inferplan.tiered(seed=0).to_dict()
    doc["nodes"][1]["cost"] = entry
    path = tmp_path / "net.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidNetwork) as info:
        inferplan.load_network(path)
    where = f"nodes[1].cost.{field}" if field else "nodes[1].cost"
    assert str(info.value).startswith(f"{path}: {where}: ")
    assert message in str(info.value)


def test_cost_wins_over_price_and_plans_buy_whole_modules(tmp_path):
    doc = inferplan.tiered(seed=4).to_dict()
    size = 7e9
    for node in doc["nodes"]:
        node["cost"] = {"kind": "modules", "size": size, "price": 2.0}
    for link in doc["links"]:
        link["cost"] = {"kind": "tiers", "upto": [5e7], "price": [1e-8, 4e-8]}
    path = tmp_path / "net.yaml"
    inferplan.save_network(inferplan.network_from_dict(doc), path)
    net = inferplan.load_network(path)
    assert all(isinstance(n.capacity_cost, ModuleCost) for n in net.nodes)
    vgg = inferplan.vgg16()
    beta = 0.4 * inferplan.throughput(net, vgg).interval
    plan = inferplan.provision(net, vgg, interval=beta)
    assert plan.node_upgrades
    for amount in plan.node_upgrades.values():
        assert amount / size == pytest.approx(round(amount / size), abs=1e-9)
    # What the plan lists, priced by the definitions, is what it costs and what the oracle
    # charges for its deployment.
    modules = sum(round(a / size) for a in plan.node_upgrades.values())
    tiers = TieredCost((5e7,), (1e-8, 4e-8))
    bandwidth = sum(float(tiers(np.array([u.amount]))[0]) for u in plan.link_upgrades)
    assert plan.cost == pytest.approx(2.0 * modules + bandwidth, rel=1e-9)
    assert plan.cost == pytest.approx(
        evaluate(net, vgg, plan.path, plan.partition, beta).cost, rel=1e-9
    )
    assert plan.feasible
    for method in ("pfp", "pwf", "milp"):
        other = inferplan.provision(net, vgg, interval=beta, method=method)
        assert other.cost >= plan.cost * (1 - 1e-6)


def test_linear_cost_is_the_default():
    node = inferplan.Node("a", 1.0, 3.0)
    assert node.capacity_cost == LinearCost(3.0)
