"""Channel models: expectations against independent integration, sampling, divergence."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from inferplan.coinference import (
    Discrete,
    LogNormal,
    Nakagami,
    Rayleigh,
    ScipyChannel,
    Trace,
    default_system,
    plan_placement,
)
from inferplan.errors import DivergentCost, InvalidSystem


class _Conditioned:
    """``dist`` conditioned on ``x >= lo``, built directly from its pdf and cdf."""

    def __init__(self, dist, lo: float) -> None:
        self.dist, self.lo, self.mass = dist, lo, dist.sf(lo)

    def support(self):
        return self.lo, np.inf

    def pdf(self, x):
        return np.where(np.asarray(x) >= self.lo, self.dist.pdf(x) / self.mass, 0.0)

    def cdf(self, x):
        x = np.maximum(np.asarray(x, dtype=float), self.lo)
        return (self.dist.cdf(x) - self.dist.cdf(self.lo)) / self.mass

    def mean(self):
        return integrate.quad(lambda x: x * self.dist.pdf(x), self.lo, np.inf)[0] / self.mass


# Each model and the same law built independently from scipy.stats.
_CASES = [
    (Rayleigh(10.0, min_snr=0.25), _Conditioned(stats.expon(scale=10.0), 0.25)),
    (Rayleigh(3.0, min_snr=1.0), _Conditioned(stats.expon(scale=3.0), 1.0)),
    (Nakagami(2.0, 10.0, min_snr=1.0), _Conditioned(stats.gamma(2.0, scale=5.0), 1.0)),
    (Nakagami(2.0, 10.0), stats.gamma(2.0, scale=5.0)),
    (Nakagami(1.5, 4.0), stats.gamma(1.5, scale=4.0 / 1.5)),
    (LogNormal(10.0, 6.0), stats.lognorm(s=6.0 * math.log(10) / 10, scale=10.0)),
    (ScipyChannel(stats.gamma(3.0, scale=2.0)), stats.gamma(3.0, scale=2.0)),
]


def _reference_partial(dist, t: float) -> float:
    lo = max(t, dist.support()[0], 0.0)
    f = lambda x: math.log(2) / math.log1p(x) * dist.pdf(x)  # noqa: E731
    head, _ = integrate.quad(f, lo, lo + 50, limit=500, epsabs=0, epsrel=1e-11)
    tail, _ = integrate.quad(f, lo + 50, np.inf, limit=500, epsabs=0, epsrel=1e-11)
    return head + tail


@pytest.mark.parametrize(("channel", "dist"), _CASES, ids=lambda c: getattr(c, "kind", ""))
@pytest.mark.parametrize("t", [0.0, 0.7, 3.0, 40.0])
def test_expectations_match_direct_integration(channel, dist, t):
    assert channel.partial_inv_log(t) == pytest.approx(_reference_partial(dist, t), rel=1e-7)
    if t > channel.support_lo:
        assert channel.below(t) == pytest.approx(dist.cdf(t), rel=1e-10, abs=1e-14)
    assert channel.expected_snr() == pytest.approx(dist.mean(), rel=1e-9)


@pytest.mark.parametrize(("channel", "dist"), _CASES, ids=lambda c: getattr(c, "kind", ""))
def test_samples_follow_the_law(channel, dist):
    draws = channel.sample(np.random.default_rng(5), 20_000)
    assert stats.kstest(draws, dist.cdf).pvalue > 1e-4
    mean = float(np.mean(math.log(2) / np.log1p(draws)))
    assert mean == pytest.approx(channel.mean_inv_log(), rel=0.02)


def test_discrete_sums_are_exact():
    ch = Discrete((0.5, 2.0, 10.0), (0.2, 0.5, 0.3))
    g = [1 / math.log2(1.5), 1 / math.log2(3.0), 1 / math.log2(11.0)]
    assert ch.mean_inv_log() == pytest.approx(0.2 * g[0] + 0.5 * g[1] + 0.3 * g[2])
    assert ch.partial_inv_log(2.0) == pytest.approx(0.5 * g[1] + 0.3 * g[2])
    assert ch.below(2.0) == pytest.approx(0.2) and ch.below(2.0000001) == pytest.approx(0.7)
    assert ch.expected_snr() == pytest.approx(0.1 + 1.0 + 3.0)


def test_trace_is_the_empirical_law():
    tr = Trace((1.0, 4.0, 4.0, 9.0))
    same = Discrete((1.0, 4.0, 9.0), (0.25, 0.5, 0.25))
    for t in (0.0, 2.0, 4.0, 10.0):
        assert tr.partial_inv_log(t) == pytest.approx(same.partial_inv_log(t))
        assert tr.below(t) == pytest.approx(same.below(t))


@pytest.mark.parametrize(
    ("channel", "why"),
    [
        (Rayleigh(10.0), "plain Rayleigh fading has an SNR density positive at 0"),
        (Nakagami(1.0, 10.0), "Nakagami-m with m = 1 <= 1"),
        (Nakagami(0.7, 10.0), "Nakagami-m with m = 0.7 <= 1"),
        (ScipyChannel(stats.expon(scale=10.0)), "the SNR density does not vanish at 0"),
        (ScipyChannel(stats.uniform(0.0, 5.0)), "the SNR density does not vanish at 0"),
        (Discrete((0.0, 5.0), (0.1, 0.9)), "SNR level 0 has positive probability"),
        (Trace((0.0, 3.0)), "SNR level 0 has positive probability"),
    ],
)
def test_divergent_expected_cost_is_detected(channel, why):
    with pytest.raises(DivergentCost, match="infinite") as info:
        channel.mean_inv_log()
    assert why in str(info.value)
    assert "min_snr" in str(info.value)  # says what to use instead
    with pytest.raises(DivergentCost, match=why):
        default_system(channel=channel)
    # Thresholds above 0 remain finite: only the forced upload diverges.
    assert math.isfinite(channel.partial_inv_log(1.0))


@pytest.mark.parametrize(
    "channel",
    [
        Rayleigh(10.0, min_snr=1e-3),
        Nakagami(1.0, 10.0, min_snr=0.1),
        Nakagami(1.2, 10.0),
        ScipyChannel(stats.gamma(2.0)),
        ScipyChannel(stats.uniform(0.5, 3.0)),
    ],
)
def test_finite_channels_are_not_flagged(channel):
    assert math.isfinite(channel.mean_inv_log())


def test_per_stage_divergence_names_the_stage():
    chans = [Rayleigh(10.0, min_snr=0.2)] * 8 + [Rayleigh(5.0)]
    with pytest.raises(DivergentCost, match=r"^channel\[8\]: E\[1/log2\(1\+SNR\)\] is infinite"):
        default_system(channel=chans)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Discrete((1.0, 2.0), (0.5, 0.4)), "prob: must sum to 1, got 0.9"),
        (lambda: Discrete((1.0, 2.0), (0.5,)), "prob: must give one probability per SNR level"),
        (lambda: Discrete((-1.0,), (1.0,)), "snr[0]: must be a non-negative finite linear SNR"),
        (lambda: Rayleigh(-3.0), "mean_snr: must be a positive finite number, got -3.0"),
        (lambda: LogNormal(10.0, 0.0), "sigma_db: must be a positive finite number"),
        (lambda: ScipyChannel(stats.norm(5.0, 1.0)), "negative SNR values"),
    ],
)
def test_bad_channels(make, message):
    with pytest.raises(InvalidSystem) as info:
        make()
    assert message in str(info.value)


def _nakagami_reference(m: float, mean: float, t: float) -> float:
    """``E[g; gamma >= t]`` for Nakagami-m at 30 digits with mpmath, independently of the code.

    Below ``x0`` the variable ``v = x^(m-1) / (m-1)`` (``dv = x^(m-2) dx``) absorbs the
    ``x^(m-2)`` peak at 0, leaving a smooth integrand on a finite interval.
    """
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    m_, s = mpmath.mpf(m), mpmath.mpf(mean) / m
    a, c, ln2 = m_ - 1, 1 / (mpmath.gamma(m_) * s**m_), mpmath.log(2)

    def direct(x):
        return ln2 / mpmath.log1p(x) * x ** (m_ - 1) * mpmath.exp(-x / s) * c

    if t > 0:
        return float(mpmath.quad(direct, [t, s, 10 * s, mpmath.inf]))
    x0 = s / 100

    def head(v):
        x = (a * v) ** (1 / a)
        return (ln2 * x / mpmath.log1p(x) if x else ln2) * mpmath.exp(-x / s) * c

    return float(
        mpmath.quad(head, [0, x0**a / a]) + mpmath.quad(direct, [x0, s, 10 * s, mpmath.inf])
    )


@pytest.mark.parametrize("m", [1.001, 1.01, 1.05, 2.0])
@pytest.mark.parametrize(("mean", "t"), [(10.0, 0.0), (0.05, 0.0), (10.0, 1e-6)])
def test_nakagami_with_m_just_above_one_is_finite_and_accurate(m, mean, t):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no IntegrationWarning, no RuntimeWarning
        value = Nakagami(m, mean).partial_inv_log(t)
    assert value == pytest.approx(_nakagami_reference(m, mean, t), rel=1e-8)


def test_nakagami_near_one_matches_the_reviewers_quadrature():
    assert Nakagami(1.01, 10.0).mean_inv_log() == pytest.approx(7.24, rel=1e-3)
    assert Nakagami(1.001, 10.0).mean_inv_log() == pytest.approx(69.6, rel=1e-3)
    plan = plan_placement(default_system(channel=Nakagami(1.01, 10.0)), method="optimal")
    assert all(math.isfinite(z) for z in plan.costs)


@pytest.mark.parametrize("ratio", [1e-10, 1e-12, 1e-14])
def test_rayleigh_concentrated_at_its_floor(ratio):
    # gamma = 0.1 + Exp(0.1 * ratio): g(gamma) is g(0.1) to a relative 1e-9 for these ratios.
    ch = Rayleigh(0.1 * ratio, min_snr=0.1)
    assert ch.mean_inv_log() == pytest.approx(math.log(2) / math.log1p(0.1), rel=1e-9)
    t = 0.1 + 0.1 * ratio  # t - 0.1 is exact; the float t is what is asked for
    assert ch.partial_inv_log(t) == pytest.approx(
        math.exp(-(t - 0.1) / ch.mean_snr) * math.log(2) / math.log1p(0.1), rel=1e-9
    )


def test_extreme_allowed_parameters_do_not_overflow():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wide = LogNormal(150.0, 50.0).partial_inv_log(1.0)
        strong = Rayleigh(1e15, min_snr=1e-15).mean_inv_log()
    # 10 log10(gamma) = 150 + 50 z, integrated over z on a grid of hand-picked pieces.
    k = math.log(10) / 10

    def over_z(z):
        return math.log(2) / math.log1p(math.exp(k * (150 + 50 * z))) * stats.norm.pdf(z)

    z1 = -3.0  # gamma = 1
    ref = sum(
        integrate.quad(over_z, a, b, epsabs=0, epsrel=1e-12)[0]
        for a, b in [(z1, -2.0), (-2.0, 0.0), (0.0, 4.0), (4.0, 40.0)]
    )
    assert wide == pytest.approx(ref, rel=1e-8)
    ref = integrate.quad(
        lambda s: math.log(2) / math.log1p(1e-15 + 1e15 * s) * math.exp(-s),
        0,
        np.inf,
        points=None,
        epsabs=0,
        epsrel=1e-12,
        limit=500,
    )[0]
    assert strong == pytest.approx(ref, rel=1e-6)


def test_an_integral_that_cannot_be_computed_raises():
    # A power law at 0 that ScipyChannel cannot see: the log-domain quadrature fails.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(InvalidSystem, match=r"^channel: cannot compute E\[1/log2\(1\+SNR\)"):
            ScipyChannel(stats.gamma(1.05, scale=10.0)).mean_inv_log()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: LogNormal(10.0, 200.0), "sigma_db: must be at most 50 dB"),
        (lambda: LogNormal(400.0, 5.0), "mean_db: must be in [-150, 150] dB"),
        (lambda: Rayleigh(1e300, min_snr=0.1), "mean_snr: must be a linear SNR in [1e-15, 1e+15]"),
        (lambda: Rayleigh(10.0, min_snr=1e-20), "min_snr: must be a linear SNR in"),
        (lambda: Nakagami(2.0, 1e16), "mean_snr: must be a linear SNR in"),
    ],
)
def test_out_of_range_parameters(make, message):
    with pytest.raises(InvalidSystem) as info:
        make()
    assert message in str(info.value)
