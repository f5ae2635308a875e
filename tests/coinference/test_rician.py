"""Rician fading with memory, observed as the complex gain: the (magnitude, phase) grid's rule."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from inferplan.coinference import GaussMarkov, default_system, mlp_layers
from inferplan.coinference.markov import RicianGaussMarkov
from inferplan.coinference.markov_stopping import (
    memory_optimal_etc_all,
    rician_optimal_etc_all,
    rician_threshold_curve,
    rician_thresholds,
)
from inferplan.errors import InvalidSystem

LAYERS = mlp_layers(256, 4)


def test_k_factor_zero_is_the_rayleigh_gauss_markov_channel():
    rayleigh = default_system(channel=GaussMarkov(10.0, 0.25, rho=0.95, grid=1024), layers=LAYERS)
    expected = memory_optimal_etc_all(rayleigh)
    system = default_system(layers=LAYERS)
    rician = RicianGaussMarkov(10.0, 0.0, 0.25, rho=0.95, radii=64, phases=1)
    # Both are grids of the same process; docs/coinference.md states 1e-4 at 64 rings.
    np.testing.assert_allclose(rician_optimal_etc_all(system, rician), expected, rtol=2e-4)
    # Without a line of sight the phase says nothing: every sector has the same threshold.
    curve = rician_threshold_curve(
        *(lambda ch: (ch, rician_thresholds(system, ch, 4)[0]))(
            RicianGaussMarkov(10.0, 0.0, 0.25, rho=0.95, radii=16, phases=4)
        )
    )
    assert np.all(np.ptp(curve, axis=1) == 0)


def test_the_grid_converges_and_the_phase_matters_with_a_line_of_sight():
    system = default_system(layers=LAYERS)
    costs = [
        rician_optimal_etc_all(system, RicianGaussMarkov(10.0, 3.0, 0.25, 0.95, radii=r, phases=p))
        for r, p in ((8, 4), (16, 8), (32, 16))
    ]
    gaps = [float(np.max(np.abs(b / a - 1))) for a, b in itertools.pairwise(costs)]
    assert gaps[1] < 0.6 * gaps[0] and gaps[1] < 1e-2
    channel = RicianGaussMarkov(10.0, 3.0, 0.25, 0.95, radii=32, phases=16)
    curve = rician_threshold_curve(channel, rician_thresholds(system, channel, 4)[0])
    finite = np.isfinite(curve).all(axis=1)
    assert finite.any() and np.all(np.ptp(curve[finite], axis=1) > 0)


def _monte_carlo(channel, system, thresholds, paths, seed):
    """The continuous process: ``h = m + s``, ``s`` a Gauss-Markov recursion, every draw
    repeated until the SNR is above the floor; the grid's rule decides on the observed ``h``."""
    rng = np.random.default_rng(seed)
    k, mean, floor = channel.k_factor, channel.mean_snr, channel.min_snr
    los, sd = math.sqrt(k / (k + 1)), math.sqrt(1 / (k + 1))

    def draw(centre, scale):
        out = np.empty(centre.size, dtype=complex)
        todo = np.arange(centre.size)
        while todo.size:
            z = rng.standard_normal(todo.size) + 1j * rng.standard_normal(todo.size)
            cand = centre[todo] + scale * z / math.sqrt(2)
            ok = mean * np.abs(cand) ** 2 >= floor
            out[todo[ok]] = cand[ok]
            todo = todo[~ok]
        return out

    a, b = system.stage_costs
    m = thresholds.shape[0]
    rho = channel.rho
    h = draw(np.full(paths, los, dtype=complex), sd)
    cost = np.zeros(paths)
    going = np.ones(paths, dtype=bool)
    table = thresholds.reshape(m, -1)
    for n in range(1, m + 2):
        snr = mean * np.abs(h) ** 2
        here = a[n - 1] + b[n - 1] / np.log2(1 + snr)
        stop = going & (
            (snr >= table[n - 1][channel.state_of(h)]) if n <= m else np.ones(paths, bool)
        )
        cost[stop] = here[stop]
        going &= ~stop
        if n <= m:
            h = draw(los + rho * (h - los), math.sqrt(1 - rho * rho) * sd)
    return cost


def test_a_monte_carlo_of_the_continuous_process_agrees():
    system = default_system(layers=LAYERS)
    channel = RicianGaussMarkov(10.0, 3.0, 0.25, rho=0.95, radii=32, phases=16)
    thresholds, values = rician_thresholds(system, channel, 4)
    predicted = float(channel.initial @ values[0].ravel())
    cost = _monte_carlo(channel, system, thresholds, 200_000, seed=3)
    se = cost.std() / math.sqrt(cost.size)
    assert abs(cost.mean() - predicted) <= 3 * se + 2e-3 * predicted


@pytest.mark.parametrize(
    ("make", "field", "words"),
    [
        (lambda: RicianGaussMarkov(10.0, -1.0, 0.25, rho=0.9), "k_factor", "K-factor"),
        (lambda: RicianGaussMarkov(10.0, math.nan, 0.25, rho=0.9), "k_factor", "K-factor"),
        (lambda: RicianGaussMarkov(10.0, 3.0, 0.25, rho=1.5), "rho", "|rho| <= 1"),
        (lambda: RicianGaussMarkov(10.0, 3.0, 0.25, rho=(0.5, -1.01)), "rho[1]", "|rho| <= 1"),
        (lambda: RicianGaussMarkov(10.0, 3.0, -0.25, rho=0.9), "min_snr", ""),
        (lambda: RicianGaussMarkov(10.0, 3.0, 0.25, rho=0.9, radii=0), "radii", "1.."),
        (lambda: RicianGaussMarkov(10.0, 3.0, 0.25, 0.9, radii=512, phases=16), "phases", "4096"),
    ],
)
def test_bad_parameters_are_one_clear_error(make, field, words):
    with pytest.raises(InvalidSystem) as info:
        make()
    assert info.value.field == field and words in str(info.value)
    assert "\n" not in str(info.value)


def test_one_correlation_per_step_is_checked_against_the_layers():
    system = default_system(layers=LAYERS)
    with pytest.raises(InvalidSystem, match="N = 4"):
        rician_thresholds(system, RicianGaussMarkov(10.0, 3.0, 0.25, (0.9, 0.9)), 2)
