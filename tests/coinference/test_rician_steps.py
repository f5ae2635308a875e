"""The Rician grid's step matrices against integrals written here from the density: every cell
by adaptive quadrature over its polar cell, every ring by the non-central chi-square. The
stated accuracy (docs/coinference.md): a row within 1e-12 of the exact cell masses in total,
relative to the row's mass above the floor (so 2e-12 once the row is normalised)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special, stats

from inferplan.coinference import RicianGaussMarkov

ROW_L1 = 2e-12  # normalised rows: twice the stated 1e-12


def _source(channel, rho, k):
    """The centre and variance of the bump a step takes cell ``k`` to (its representative gain:
    the cell's SNR's magnitude at its sector's middle phase)."""
    sector = k % channel.phases
    phase = 0.5 * (channel.phase_edges[sector] + channel.phase_edges[sector + 1])
    h = math.sqrt(channel.snr[k] / channel.mean_snr) * np.exp(1j * phase)
    k_factor = channel.k_factor
    los, var = math.sqrt(k_factor / (k_factor + 1)), 1 / (k_factor + 1)
    return los + rho * (h - los), (1 - rho * rho) * var


def _cell_by_quadrature(centre, var, r_lo, r_hi, p_lo, p_hi):
    """The mass of CN(centre, var) in the polar cell, by nested adaptive quadrature of the
    density ``r exp(-|r e^{jp} - centre|^2 / var) / (pi var)``."""
    sd = math.sqrt(var)
    top = min(r_hi, abs(centre) + 40 * sd)  # beyond: less than exp(-1600) of the bump
    if top <= r_lo:
        return 0.0

    def along(p):
        c = centre * np.exp(-1j * p)  # the ray's phase turned to 0
        peak = [x for x in (c.real,) if r_lo < x < top]
        value, _ = integrate.quad(
            lambda r: r * math.exp(-((r - c.real) ** 2 + c.imag**2) / var) / (math.pi * var),
            r_lo, top, points=peak or None, epsabs=0.0, epsrel=1e-13, limit=200,
        )  # fmt: skip
        return value

    peak = [x for x in np.angle(centre) + 2 * math.pi * np.arange(-1, 2) if p_lo < x < p_hi]
    value, _ = integrate.quad(
        along, p_lo, p_hi, points=peak or None, epsabs=0.0, epsrel=1e-13, limit=200
    )
    return value


@settings(max_examples=12, deadline=None)
@given(
    k_factor=st.floats(0.0, 30.0),
    mean_snr=st.floats(1.0, 30.0),
    floor=st.floats(0.05, 2.0),
    rho=st.floats(-0.99, 0.99),
    radii=st.integers(1, 5),
    phases=st.integers(1, 5),
    pick=st.floats(0.0, 1.0, exclude_max=True),
)
def test_a_step_row_is_the_integral_of_the_density_over_each_cell(
    k_factor, mean_snr, floor, rho, radii, phases, pick
):
    channel = RicianGaussMarkov(mean_snr, k_factor, floor, rho=rho, radii=radii, phases=phases)
    k = int(pick * channel.states)
    centre, var = _source(channel, rho, k)
    r, p = channel.ring_edges, channel.phase_edges
    want = np.array(
        [
            _cell_by_quadrature(centre, var, r[i], r[i + 1], p[j], p[j + 1])
            for i in range(radii)
            for j in range(phases)
        ]
    )
    got = channel.step(rho)[k]
    assert np.abs(got - want / want.sum()).sum() <= ROW_L1


@settings(max_examples=25, deadline=None)
@given(
    k_factor=st.floats(0.0, 100.0),
    floor_tail=st.floats(-60.0, -0.01),
    rho=st.floats(-0.9999, 0.9999),
    radii=st.integers(1, 32),
    phases=st.integers(1, 16),
)
def test_every_ring_of_a_step_holds_its_non_central_chi_square_mass(
    k_factor, floor_tail, rho, radii, phases
):
    # The floor leaves P(SNR >= floor) = 10^floor_tail at stage 1: down to 1e-60, where a row's
    # mass above the floor is far below the bump's and only erfc differences resolve it.
    var_1 = 1 / (k_factor + 1)
    floor = stats.ncx2.isf(10.0**floor_tail, 2.0, 2.0 * k_factor) * var_1 / 2.0
    channel = RicianGaussMarkov(1.0, k_factor, floor, rho=rho, radii=radii, phases=phases)
    step = channel.step(rho).reshape(channel.states, radii, phases).sum(axis=2)
    edges = channel.ring_edges
    for k in range(channel.states):
        centre, var = _source(channel, rho, k)
        above = stats.ncx2.sf(2 * edges**2 / var, 2.0, 2 * abs(centre) ** 2 / var)
        if not above[0] > 1e-250:
            continue  # all below the floor to rounding: the row stays put
        want = (above[:-1] - np.append(above[1:-1], 0.0)) / above[0]
        assert np.abs(step[k] - want).sum() <= ROW_L1, k


def test_the_initial_law_holds_one_ring_each_far_in_the_tail():
    # The rings are equiprobable at stage 1 by their edges (the non-central chi-square's
    # quantiles); with P(SNR >= 20) = 4e-19 the cells' masses are differences of erfc far in
    # the bump's tail, which a difference of erf near 1 would lose to rounding.
    channel = RicianGaussMarkov(mean_snr=1.0, k_factor=2.0, min_snr=20.0, rho=0.9)
    assert channel._above < 1e-18
    rings = channel.initial.reshape(channel.radii, channel.phases).sum(axis=1)
    np.testing.assert_allclose(rings, 1 / channel.radii, rtol=1e-11)
    assert np.isfinite(channel.chain([1e-3] * 3).transitions).all()


def test_the_ray_mass_has_the_fourier_coefficients_the_bound_assumes():
    # D(p): the mass of CN(size, var) along the ray of phase p, by quadrature in r; its
    # discrete Fourier coefficients against rho_m = (I_{(m-1)/2}(z) + I_{(m+1)/2}(z)) /
    # (I_{-1/2}(z) + I_{1/2}(z)), z = size^2 / (2 var): positive, falling, and growing with z.
    from inferplan.coinference.markov import _mode_tail

    size, var, points = 1.3, 0.2, 65
    z = size * size / (2 * var)

    def ray(p):
        mu, across = size * math.cos(p), (size * math.sin(p)) ** 2
        f = lambda r: r * math.exp(-((r - mu) ** 2 + across) / var) / (math.pi * var)  # noqa: E731
        return integrate.quad(f, 0.0, max(mu, 0.0) + 40 * math.sqrt(var), epsabs=0.0, epsrel=1e-13)[
            0
        ]

    samples = np.array([ray(2 * math.pi * k / points) for k in range(points)])
    coefficients = np.fft.rfft(samples).real / samples.sum()
    m = np.arange(12.0)
    rho = (special.ive((m - 1) / 2, z) + special.ive((m + 1) / 2, z)) / (
        special.ive(-0.5, z) + special.ive(0.5, z)
    )
    np.testing.assert_allclose(coefficients[:12], rho, rtol=1e-9, atol=1e-14)
    assert np.all(np.diff(rho) < 0)
    for z_bin in range(-8, 40, 3):  # the table's bound at a larger z is never smaller
        low, high = _mode_tail(z_bin, 60), _mode_tail(z_bin + 1, 60)
        assert np.all(low[: len(high)] <= high[: len(low)] * (1 + 1e-12) + 1e-300)


def test_the_modes_beyond_the_table_meet_the_exact_bound():
    from inferplan.coinference.markov import _RICIAN_MODES_TOP_BIN, _mode_tail, _modes

    for z_bin in (_RICIAN_MODES_TOP_BIN + 3, _RICIAN_MODES_TOP_BIN + 12):
        for tol in (1e-12, 1e-40):
            tail = _mode_tail(z_bin, 60)  # exact, as the table's own bins
            exact = int(np.searchsorted(-tail, -tol))
            got = int(_modes(np.array([2.0 ** (z_bin / 4)]), np.array([tol]))[0])
            assert exact <= got <= 1.01 * exact


@pytest.mark.parametrize(("k_factor", "rho"), [(3.0, 0.999), (10.0, 0.999), (100.0, 0.9999)])
def test_a_narrow_bump_splits_between_sectors_as_its_wedges_do(k_factor, rho):
    # The rows whose bumps lie nearest a sector's edge (a narrow bump takes rays across its
    # window only): each sector's mass over all rings is the wedge's, by adaptive quadrature
    # in the phase of the ray mass above the floor.
    channel = RicianGaussMarkov(10.0, k_factor, 0.25, rho=rho)
    edges, floor = channel.phase_edges, float(channel.ring_edges[0])
    sources = [_source(channel, rho, k) for k in range(channel.states)]
    sd = math.sqrt(sources[0][1])
    gap = [np.min(np.abs(np.angle(c) - edges)) * abs(c) / sd for c, _ in sources]
    for k in np.argsort(gap)[:2]:
        centre, var = sources[k]
        size, phase = abs(centre), float(np.angle(centre))

        def ray(p, size=size, phase=phase, var=var):
            mu = size * math.cos(p - phase)
            x = (floor - mu) / math.sqrt(var)
            side = math.exp(-((size * math.sin(p - phase)) ** 2) / var)
            radial = 0.5 * var * math.exp(-x * x) + 0.5 * math.sqrt(
                math.pi * var
            ) * mu * special.erfc(x)
            return side * radial / (math.pi * var)

        width = 12 * math.sqrt(var) / size
        want = []
        for lo, hi in itertools.pairwise(edges):
            peak = sorted({min(max(phase + d, lo), hi) for d in (-width, 0.0, width)} - {lo, hi})
            want.append(
                integrate.quad(
                    ray, lo, hi, points=peak or None, epsabs=0.0, epsrel=1e-13, limit=500
                )[0]
            )
        got = channel.step(rho)[k].reshape(channel.radii, channel.phases).sum(axis=0)
        assert np.abs(got - np.array(want) / sum(want)).sum() <= ROW_L1
