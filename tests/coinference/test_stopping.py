"""Optimal stopping and 1-sla against brute force on small discrete instances."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

from inferplan.coinference import (
    Discrete,
    default_system,
    evaluate_thresholds,
    one_step_thresholds,
    optimal_thresholds,
    optimality_probability,
    solve_stopping,
)
from inferplan.errors import InvalidArgument

from . import oracles
from .strategies import systems


@settings(max_examples=60)
@given(systems(max_layers=3, max_levels=3))
def test_backward_induction_matches_brute_force_for_every_placement(system):
    for m in range(system.n_layers + 1):
        _, values = optimal_thresholds(system, m)
        expected = oracles.brute_force_min_etc(system, m)
        assert values[0] == pytest.approx(expected, rel=1e-12, abs=1e-15)
        solution = solve_stopping(system, m)
        assert solution.expected_cost == pytest.approx(
            oracles.placement_cost(system, m) + expected, rel=1e-12
        )


@settings(max_examples=50)
@given(systems(max_layers=4, max_levels=3))
def test_threshold_rules_are_evaluated_exactly(system):
    for rule in ("optimal", "1sla"):
        for m in range(system.n_layers + 1):
            s = solve_stopping(system, m, rule=rule)
            assert s.expected_etc == pytest.approx(
                oracles.threshold_rule_cost(system, s.thresholds), rel=1e-12
            )
            assert sum(s.split_probabilities) == pytest.approx(1.0, abs=1e-12)
            assert len(s.thresholds) == m and len(s.split_probabilities) == m + 1


@settings(max_examples=50)
@given(systems(max_layers=4, max_levels=3))
def test_optimal_thresholds_are_indifference_points(system):
    m = system.n_layers
    thresholds, values = optimal_thresholds(system, m)
    for n in range(1, m + 1):
        t = thresholds[n - 1]
        if math.isfinite(t) and t > 0:
            assert oracles.eta(system, n, t) == pytest.approx(values[n], rel=1e-9)
        elif math.isinf(t):
            assert all(oracles.eta(system, n, s) > values[n] for s in (1e3, 1e6))


@settings(max_examples=50)
@given(systems(max_layers=4, max_levels=3))
def test_one_step_lookahead_is_optimal_at_one_layer(system):
    opt = solve_stopping(system, 1)
    sla = solve_stopping(system, 1, rule="1sla")
    assert sla.expected_etc == pytest.approx(opt.expected_etc, rel=1e-12)
    assert optimality_probability(system, 1) == pytest.approx(1.0, abs=1e-12)


@settings(max_examples=50)
@given(systems(max_layers=4, max_levels=3))
def test_one_step_lookahead_never_beats_the_optimum(system):
    for m in range(system.n_layers + 1):
        opt = solve_stopping(system, m).expected_etc
        assert solve_stopping(system, m, rule="1sla").expected_etc >= opt * (1 - 1e-12)


def test_one_step_thresholds_compare_with_the_next_stage_expectation():
    system = default_system("alexnet")
    thresholds = one_step_thresholds(system)
    for n, t in enumerate(thresholds, start=1):
        g_next = system.channels[n].mean_inv_log()
        # E[eta_{n+1}] from the raw formula at a SNR whose 1/log2(1+snr) equals E[g].
        snr_eq = 2 ** (1 / g_next) - 1
        target = oracles.eta(system, n + 1, snr_eq)
        if math.isfinite(t):
            assert oracles.eta(system, n, t) == pytest.approx(target, rel=1e-9)
        else:
            assert oracles.eta(system, n, 1e12) > target


@settings(max_examples=50)
@given(systems(max_layers=4, max_levels=2))
def test_optimality_probability_matches_enumeration(system):
    sla = tuple(one_step_thresholds(system).tolist())
    for m in range(system.n_layers + 1):
        opt = tuple(optimal_thresholds(system, m)[0].tolist())
        expected = oracles.agreement_probability(system, opt, sla[:m])
        assert optimality_probability(system, m) == pytest.approx(expected, abs=1e-12)


def test_optimality_probability_matches_simulation():
    # Continuous channel: compare the exact probability with the agreement frequency.
    system = default_system("alexnet")
    rng = np.random.default_rng(11)
    snr = system.channels[0].sample(rng, 200_000 * (system.n_layers + 1))
    snr = snr.reshape(200_000, system.n_layers + 1)
    for m in range(2, system.n_layers + 1):
        opt = solve_stopping(system, m).policy()
        sla = solve_stopping(system, m, rule="1sla").policy()
        freq = float(np.mean(opt.split_points(snr) == sla.split_points(snr)))
        p = optimality_probability(system, m)
        assert abs(freq - p) <= 4.5 * math.sqrt(p * (1 - p) / 200_000) + 1e-12


def test_forced_split_without_placement():
    system = default_system("alexnet")
    s = solve_stopping(system, 0)
    assert s.thresholds == () and s.split_probabilities == (1.0,)
    expected = system.channels[0].mean_inv_log()
    assert s.expected_etc == pytest.approx(oracles.eta(system, 1, 2 ** (1 / expected) - 1))


def test_split_probabilities_are_those_of_the_thresholds():
    system = default_system("alexnet", channel=Discrete((0.5, 2.0, 10.0), (0.2, 0.5, 0.3)))
    values, split = evaluate_thresholds(system, (2.0, math.inf, 0.5))
    assert split.tolist() == pytest.approx([0.8, 0.0, 0.2, 0.0])
    assert values.shape == (4,)


@pytest.mark.parametrize("bad", [-1, 9, 2.5, True])
def test_placement_out_of_range(bad):
    with pytest.raises(InvalidArgument, match="placement"):
        solve_stopping(default_system("alexnet"), bad)


def test_unknown_rule():
    with pytest.raises(InvalidArgument, match="rule must be one of optimal, 1sla, got 'best'"):
        solve_stopping(default_system("alexnet"), 2, rule="best")
