"""The Monte-Carlo simulator against the analytic expectations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from inferplan.coinference import (
    STRATEGIES,
    Discrete,
    Nakagami,
    Rayleigh,
    SplitPolicy,
    default_system,
    simulate,
    solve_stopping,
)
from inferplan.errors import InvalidArgument

from . import oracles

_SYSTEMS = {
    "alexnet-rayleigh": lambda: default_system("alexnet"),
    "resnet50-nakagami": lambda: default_system("resnet50", channel=Nakagami(1.5, 5.0)),
    "alexnet-per-stage": lambda: default_system(
        "alexnet",
        channel=[Rayleigh(2.0 + n, min_snr=0.1) for n in range(8)]
        + [Discrete((0.5, 20.0), (0.5, 0.5))],
    ),
}


@pytest.mark.parametrize("name", list(_SYSTEMS))
def test_mean_is_within_its_confidence_interval_of_the_analytic_cost(name):
    sim = simulate(_SYSTEMS[name](), inferences=100_000, seed=3, confidence=0.999)
    assert [r.strategy for r in sim.results] == list(STRATEGIES)
    for r in sim.results:
        assert r.ci_low <= r.analytic_cost <= r.ci_high, r.strategy
        assert r.ci_low < r.mean_cost < r.ci_high


def test_split_histogram_matches_split_probabilities():
    system = default_system("alexnet")
    sim = simulate(system, ["full-placement"], inferences=200_000, seed=7)
    expected = solve_stopping(system, system.n_layers).split_probabilities
    counts = np.asarray(sim["full-placement"].split_counts)
    assert counts.sum() == 200_000
    for count, p in zip(counts, expected, strict=True):
        assert stats.binomtest(int(count), 200_000, min(p, 1.0)).pvalue > 1e-5


def test_realised_costs_are_those_of_the_formula():
    system = default_system("alexnet", channel=Discrete((0.5, 2.0, 10.0), (0.2, 0.5, 0.3)))
    sim = simulate(system, ["edge-only", "device-only"], inferences=1000, seed=1)
    edge = {round(oracles.eta(system, 1, s), 12) for s in (0.5, 2.0, 10.0)}
    assert {round(v, 12) for v in sim["edge-only"].costs} <= edge
    device = {
        round(oracles.placement_cost(system, 8) + oracles.eta(system, 9, s), 12)
        for s in (0.5, 2.0, 10.0)
    }
    assert {round(v, 12) for v in sim["device-only"].costs} <= device


def test_seeded_runs_repeat_and_differ_across_seeds():
    system = default_system("alexnet")
    a = simulate(system, ["optimal"], inferences=5000, seed=42)
    b = simulate(system, ["optimal"], inferences=5000, seed=42)
    c = simulate(system, ["optimal"], inferences=5000, seed=43)
    assert np.array_equal(a["optimal"].costs, b["optimal"].costs)
    assert not np.array_equal(a["optimal"].costs, c["optimal"].costs)
    assert a.to_dict() == b.to_dict()


def test_extra_policies_and_common_random_numbers():
    system = default_system("alexnet")
    solution = solve_stopping(system, 0)
    sim = simulate(
        system,
        ["edge-only"],
        inferences=3000,
        seed=5,
        policies=[("mine", SplitPolicy(()), solution.expected_cost)],
    )
    assert np.array_equal(sim["edge-only"].costs, sim["mine"].costs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategies": ["psychic"]}, "strategy: unknown strategy 'psychic'"),
        ({"inferences": 1}, "inferences: must be an integer >= 2"),
        ({"confidence": 1.5}, "confidence: must be in"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        simulate(default_system("alexnet"), **kwargs)
