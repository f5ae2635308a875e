"""Extreme but valid inputs: costs beyond floating point in between, Nakagami laws far from the
usual ranges. Oracles compute in mpmath (arbitrary exponent range, 40 digits), independently of
the solver's arrays."""

from __future__ import annotations

import itertools
import math
import warnings

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.coinference import (
    Device,
    Discrete,
    Edge,
    Layers,
    Nakagami,
    System,
    expected_costs,
    plan_placement,
    simulate,
)
from inferplan.errors import InvalidSystem

from .strategies import discrete_channels

mp.mp.dps = 40
FLOAT_MAX = 1.7976931348623157e308


# ------------------------------------------------------------------------ systems, exact oracle


def _eta(system: System, n: int, snr: float) -> mp.mpf:
    """``eta_n(snr)`` from the raw parameters, exactly (no overflow, no 0 * inf)."""
    d, e, layers = system.device, system.edge, system.layers
    bt, be = 1 - mp.mpf(system.energy_weight), mp.mpf(system.energy_weight)
    upload = mp.mpf(layers.input_bits[n - 1]) / (mp.mpf(d.bandwidth_hz) * mp.log(1 + snr, 2))
    local = mp.fsum(mp.mpf(c) for c in layers.cycles[: n - 1])
    remote = mp.fsum(mp.mpf(c) for c in layers.cycles[n - 1 :])
    time = local / mp.mpf(d.cpu_hz) + upload + remote / mp.mpf(e.cpu_hz)
    energy = mp.mpf(d.kappa) * local * mp.mpf(d.cpu_hz) ** 2 + mp.mpf(d.tx_power_w) * upload
    return bt * time + be * energy


def _exact_z(system: System, m: int) -> mp.mpf:
    """``c(M) + min`` over every deterministic stopping policy of its expected ETC."""
    levels = [list(zip(ch.snr, ch.prob, strict=True)) for ch in system.channels]
    keys = [(n, k) for n in range(1, m + 1) for k in range(len(levels[n - 1]))]
    best = mp.inf
    for choice in itertools.product((False, True), repeat=len(keys)):
        stop = dict(zip(keys, choice, strict=True))
        cost = mp.fsum(p * _eta(system, m + 1, s) for s, p in levels[m])
        for n in range(m, 0, -1):
            cost = mp.fsum(
                p * (_eta(system, n, s) if stop[(n, k)] else cost)
                for k, (s, p) in enumerate(levels[n - 1])
            )
        best = min(best, cost)
    download = mp.fsum(mp.mpf(b) for b in system.layers.param_bits[:m])
    return download / mp.mpf(system.downlink_bps) / system.inferences_per_update + best


EXTREME = {
    "rate": st.sampled_from([1e-308, 1e-300, 1.0, 1e9, 1e300, 1e308]),
    "amount": st.sampled_from([0.0, 1e-300, 1.0, 1e6, 1e300, 1e308]),
    "positive": st.sampled_from([1e-300, 1.0, 1e6, 1e300, 1e308]),
    "kappa": st.sampled_from([0.0, 1e-300, 1e-28, 1e300]),
}


@st.composite
def extreme_systems(draw: st.DrawFn) -> System:
    n = draw(st.integers(1, 2))
    return System(
        device=Device(
            cpu_hz=draw(EXTREME["rate"]),
            kappa=draw(EXTREME["kappa"]),
            tx_power_w=draw(st.sampled_from([0.0, 0.1, 1e308])),
            bandwidth_hz=draw(EXTREME["rate"]),
        ),
        edge=Edge(draw(EXTREME["rate"])),
        layers=Layers(
            cycles=tuple(draw(EXTREME["amount"]) for _ in range(n)),
            input_bits=tuple(draw(EXTREME["positive"]) for _ in range(n + 1)),
            param_bits=tuple(draw(EXTREME["amount"]) for _ in range(n)),
        ),
        channel=draw(discrete_channels(2)),
        downlink_bps=draw(EXTREME["rate"]),
        inferences_per_update=draw(st.sampled_from([1, 1000, 10**300])),
        energy_weight=draw(st.sampled_from([0.0, 0.5, 1.0])),
    )


@settings(max_examples=300)
@given(extreme_systems())
def test_every_placement_cost_is_exact_where_it_fits_in_floating_point(system):
    costs = expected_costs(system)
    exact = [_exact_z(system, m) for m in range(system.n_layers + 1)]
    for m, z in enumerate(costs):
        if exact[m] > FLOAT_MAX:
            assert z == math.inf
        elif exact[m] > 1e307:  # the last rounding may overflow
            assert z == math.inf or z == pytest.approx(float(exact[m]), rel=1e-9)
        else:
            assert z == pytest.approx(float(exact[m]), rel=1e-9, abs=1e-300), m
    best = min(exact)
    for method in ("optimal", "1sla", "hybrid"):
        if best > FLOAT_MAX:
            with pytest.raises(InvalidSystem, match="every placement costs more than"):
                plan_placement(system, method=method)
        elif best < 1e307 and method != "1sla":
            plan = plan_placement(system, method=method)
            assert plan.expected_cost == pytest.approx(float(best), rel=1e-9, abs=1e-300)


def test_device_at_1e_308_hz_splits_before_computing_at_every_placement():
    layers = Layers((1e8, 2e8), (1e6, 1e5, 1e3), (1e6, 2e6))
    system = System(Device(1e-308, 1e-28, 0.1, 2e6), Edge(2e10), layers, Discrete((1.0,), (1.0,)))
    # Running any layer takes beyond-float time, so the only finite plan splits at stage 1:
    # Z(M) = c(M) + eta_1 (edge time of both layers, upload of the raw input).
    eta_1 = 0.5 * (3e8 / 2e10 + 1e6 / 2e6) + 0.5 * 0.1 * 1e6 / 2e6
    c = [0.0, 1e6 / 5e7 / 1000, 3e6 / 5e7 / 1000]
    assert expected_costs(system) == pytest.approx([ci + eta_1 for ci in c], rel=1e-12)
    plan = plan_placement(system, method="hybrid")
    assert plan.placement == 0 and math.isfinite(plan.expected_cost)


def test_layer_cycles_at_1e308_give_finite_costs():
    layers = Layers((1e308, 1e308), (1e3, 1e3, 1e3), (1e3, 1e3))
    system = System(Device(1e9, 1e-28, 0.1, 2e6), Edge(2e10), layers, Discrete((1.0,), (1.0,)))
    exact = [float(_exact_z(system, m)) for m in range(3)]
    assert expected_costs(system) == pytest.approx(exact, rel=1e-12)
    assert all(math.isfinite(z) for z in exact)


def test_placements_all_beyond_floating_point_are_one_error():
    layers = Layers((1e8,), (1e6, 1e3), (1e6,))
    system = System(Device(1e9, 1e-28, 0.1, 1e-308), Edge(2e10), layers, Discrete((1.0,), (1.0,)))
    with pytest.raises(InvalidSystem, match=r"every placement costs more than 1\.798e\+308"):
        plan_placement(system)


def test_inferences_per_update_beyond_floating_point_is_refused():
    layers = Layers((1e8,), (1e6, 1e3), (1e6,))
    with pytest.raises(InvalidSystem, match="inferences_per_update: must be at most"):
        System(Device(1e9, 1e-28, 0.1, 2e6), Edge(2e10), layers, inferences_per_update=10**400)


# ------------------------------------------------------------------------- Nakagami, mpmath


def _nakagami_oracle(m: float, mean: float, floor: float | None, t: float) -> tuple[float, ...]:
    """``E[1/log2(1+SNR); SNR >= t]``, ``P(SNR < t)`` and ``E[SNR]`` by mpmath quadrature."""
    m_, mean_ = mp.mpf(m), mp.mpf(mean)
    s = mean_ / m_
    a = mp.mpf(floor or 0)
    tail = mp.gammainc(m_, a / s, mp.inf, regularized=True)
    log_c = -mp.loggamma(m_) - m_ * mp.log(s) - mp.log(tail)

    def pdf(x: mp.mpf) -> mp.mpf:
        return mp.exp((m_ - 1) * mp.log(x) - x / s + log_c) if x > 0 else mp.mpf(0)

    lo = max(a, mp.mpf(t))
    if tail < mp.mpf("1e-100"):  # all the mass within a few scales above the floor
        points = [lo + s * k for k in (0, 1, 3, 10, 30, 100)]
    else:
        sd = mean_ / mp.sqrt(m_)
        points = sorted({lo, *(mean_ + k * sd for k in range(-40, 41) if mean_ + k * sd > lo)})
        if points[0] == 0:
            points.insert(1, mean_ * mp.mpf("1e-6"))
    expectation = mp.quad(lambda x: mp.log(2) / mp.log1p(x) * pdf(x), [*points, mp.inf])
    below = 1 - mp.gammainc(m_, t / s, mp.inf, regularized=True) / tail if t > a else 0
    snr = m_ * s * mp.gammainc(m_ + 1, a / s, mp.inf, regularized=True) / tail
    return float(expectation), float(below), float(snr)


@pytest.mark.parametrize(
    ("m", "mean", "floor", "threshold"),
    [
        (1000.0, 10.0, None, 0.0),
        (1000.0, 10.0, None, 10.5),
        (1e6, 10.0, None, 10.01),
        (1e12, 10.0, None, 0.0),
        (1000.0, 1e-3, 10.0, 0.0),
        (3.0, 10.0, None, 5.0),
        # floors whose Gamma tail underflows: the law is floor + excess
        (2.0, 1e-3, 1e3, 0.0),
        (2.0, 1e-3, 1e3, 1e3 + 1e-3),
        (0.7, 1.0, 800.0, 0.0),
        (5.0, 1.0, 2000.0, 2000.3),
        (2.0, 1.0, 650.0, 0.0),  # just above the far-floor switch
        (2.0, 1.0, 700.0, 0.0),
    ],
)
def test_nakagami_matches_mpmath(m, mean, floor, threshold):
    channel = Nakagami(m, mean, floor)
    expectation, below, snr = _nakagami_oracle(m, mean, floor, threshold)
    assert channel.partial_inv_log(threshold) == pytest.approx(expectation, rel=1e-8)
    assert channel.below(threshold) == pytest.approx(below, rel=1e-8, abs=1e-15)
    assert channel.expected_snr() == pytest.approx(snr, rel=1e-8)


@pytest.mark.parametrize(("m", "floor"), [(2.0, 1e3), (0.7, 1e3), (1000.0, 2e4)])
def test_far_floor_samples_follow_the_law(m, floor):
    channel = Nakagami(m, 1e-3 if m < 1000 else 1.0, floor)
    draws = channel.sample(np.random.default_rng(5), 200_000)
    assert draws.min() >= floor
    spread = draws.std() / math.sqrt(draws.size)
    assert abs(draws.mean() - channel.expected_snr()) < 5 * spread
    for q in (0.1, 0.5, 0.9):
        x = float(channel.ppf(q))
        assert channel.cdf(x) == pytest.approx(q, abs=1e-6)  # x resolves the excess to ~1e-8
        assert np.mean(draws < x) == pytest.approx(q, abs=0.005)


def test_nakagami_shape_beyond_1e12_is_refused_with_the_alternative():
    with pytest.raises(InvalidSystem, match=r"m: must be in \[0.5, 1e\+12\].*discrete"):
        Nakagami(1e13, 10.0)


def test_large_m_plans_and_simulates():
    layers = Layers((1e8, 2e8), (1e6, 1e5, 1e3), (1e6, 2e6))
    system = System(Device(1e9, 1e-28, 0.1, 2e6), Edge(2e10), layers, Nakagami(1e4, 10.0))
    plan = plan_placement(system)
    sim = simulate(system, ["optimal"], inferences=20_000, seed=3)["optimal"]
    assert sim.ci_low <= plan.expected_cost <= sim.ci_high


def test_simulation_of_rules_beyond_floating_point_is_quiet_and_infinite():
    layers = Layers((1e8, 2e8), (1e6, 1e5, 1e3), (1e6, 2e6))
    system = System(Device(1e-308, 1e-28, 0.1, 2e6), Edge(2e10), layers, Discrete((1.0,), (1.0,)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim = simulate(system, ["optimal", "device-only"], inferences=1000, seed=0)
    optimal, device = sim["optimal"], sim["device-only"]
    assert optimal.mean_cost == pytest.approx(optimal.analytic_cost, rel=1e-12)
    assert device.analytic_cost == device.mean_cost == device.std_cost == math.inf
    assert all(q == math.inf for q in device.quantiles)


def test_simulation_statistics_of_huge_costs_do_not_overflow():
    layers = Layers((1e308, 1e308), (1e3, 1e3, 1e3), (1e3, 1e3))
    channel = Discrete((1.0, 3.0), (0.5, 0.5))
    system = System(Device(1e9, 1e-28, 0.1, 2e6), Edge(2e10), layers, channel)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim = simulate(system, ["edge-only"], inferences=1000, seed=0)["edge-only"]
    assert sim.mean_cost == pytest.approx(sim.analytic_cost, rel=1e-9)
    assert math.isfinite(sim.std_cost)


def test_a_stage_never_stopped_at_weighs_nothing_when_probabilities_sum_below_one():
    # These probabilities are normalised but their float sum is 1 - 1.1e-16: computing the stop
    # mass as 1 - P(continue) once added 1.1e-16 of a 1e308-cost stage per stage (a relative
    # error of 1e-8 on a 1e300 cost). The rule never stops at stages 1 and 2 here.
    channel = Discrete((0.05, 200.0), (0.7831247865667008, 0.21687521343329932))
    assert math.fsum(channel.prob) < 1.0
    system = System(
        Device(cpu_hz=1e-300, kappa=0.0, tx_power_w=0.0, bandwidth_hz=1e-308),
        Edge(1e-308),
        Layers((0.0, 1.0), (1e-300, 1e-300, 1e-300), (0.0, 0.0)),
        channel,
        downlink_bps=1e-308,
        inferences_per_update=1,
        energy_weight=0.0,
    )
    exact = _exact_z(system, 2)
    assert expected_costs(system)[2] == pytest.approx(float(exact), rel=1e-12)
