"""A device memory limits the placement: the downloaded layers must fit with the largest
activation; every planner's Z(M) honours it (brute force over M and stopping policies)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.coinference import default_system, plan_placement
from inferplan.coinference.system import Device
from inferplan.errors import InvalidSystem
from tests.coinference.oracles import brute_force_min_etc, placement_cost
from tests.coinference.strategies import systems


def device_need(system, m: int) -> float:
    """Bytes of ``m`` downloaded layers, from the definition: their parameters and the
    largest input plus output of one of them (nothing for ``m = 0``)."""
    if m == 0:
        return 0.0
    layers = system.layers
    held = sum(layers.param_bits[:m]) / 8
    return held + max((layers.input_bits[i] + layers.input_bits[i + 1]) / 8 for i in range(m))


@settings(max_examples=40, deadline=None)
@given(systems(max_layers=3), st.floats(0.0, 1.2), st.sampled_from(["optimal", "1sla", "hybrid"]))
def test_every_planner_places_only_what_fits_and_the_best_of_that(system, share, method):
    most = device_need(system, system.n_layers)
    memory = share * most
    limited = dataclasses.replace(system, device=dataclasses.replace(system.device, memory=memory))
    fits = [m for m in range(system.n_layers + 1) if device_need(system, m) <= memory]
    plan = plan_placement(limited, method=method)
    assert plan.placement in fits
    if method != "1sla":  # exact: the best Z(M) among the placements that fit
        best = min(placement_cost(system, m) + brute_force_min_etc(system, m) for m in fits)
        assert plan.expected_cost == pytest.approx(best, rel=1e-9)
    for m, cost in enumerate(plan.costs):
        if m not in fits:  # inf (nan: the hybrid left it unevaluated, its bound being inf)
            assert math.isinf(cost) or (method == "hybrid" and math.isnan(cost))


def test_a_device_memory_is_checked_and_kept_in_the_system_file():
    with pytest.raises(InvalidSystem, match=r"device\.memory"):
        Device(1e9, 1e-28, 0.1, 2e6, memory=-1.0)
    system = default_system()
    roomy = dataclasses.replace(system, device=dataclasses.replace(system.device, memory=5e6))
    assert roomy.to_dict()["device"]["memory"] == 5e6
    assert plan_placement(roomy).placement < plan_placement(system).placement


@pytest.mark.parametrize("share", [0.0, 0.2, 0.5, 1.0])
def test_the_mlp_closed_form_takes_the_best_placement_that_fits(share):
    import numpy as np

    from inferplan.coinference import mlp_layers
    from inferplan.coinference.placement import expected_costs, mlp_placement

    system = default_system(layers=mlp_layers(512, 8))
    memory = share * device_need(system, system.n_layers)
    limited = dataclasses.replace(system, device=dataclasses.replace(system.device, memory=memory))
    costs = expected_costs(limited, rule="1sla")  # inf where the placement does not fit
    assert mlp_placement(limited).placement == int(np.argmin(costs))
    assert device_need(system, mlp_placement(limited).placement) <= memory
