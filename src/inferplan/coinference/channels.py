"""Uplink SNR distributions and the two expectations the planner needs from them.

Everything the optimal-stopping solver asks of a channel is

* ``below(t)``  ``= P(gamma < t)``: the probability of continuing at a stage with threshold ``t``;
* ``partial_inv_log(t)`` ``= E[ 1 / log2(1 + gamma) ; gamma >= t ]``: the part of the expected
  "upload seconds per bit times bandwidth" collected where the rule stops;
* ``mean_inv_log()`` ``= partial_inv_log(0)``, the expectation for a forced upload.

``1 / log2(1 + gamma)`` behaves like ``ln 2 / gamma`` near 0, so ``E[1 / log2(1 + gamma)]`` is
infinite whenever the SNR density is positive at 0 (plain Rayleigh fading, Nakagami-m with
``m <= 1``) or has an atom at 0. Such channels raise :class:`~inferplan.errors.DivergentCost`
when that expectation is asked for. Continuous expectations are computed with
:func:`scipy.integrate.quad` in the log-SNR domain (``gamma = e^u``), where every model here is
smooth and the integrand decays at both ends; discrete channels and traces are exact sums.

Near 0 the log-domain integrand of a Nakagami law with ``m`` slightly above 1 decays only like
``e^((m - 1) u)``, far too slowly for an infinite-range quadrature. A law whose density is
``gamma^a phi(gamma)`` with smooth ``phi`` (see :meth:`_Continuous.power_at_zero`) therefore
has its piece below a small ``gamma0`` integrated with the algebraic weight ``gamma^(a - 1)``
handled exactly (QUADPACK's QAWS), which is accurate for every ``a > 0``.

Continuous-law parameters are bounded to what a radio link can show and what the integration can
represent: linear SNRs in ``[1e-15, 1e15]`` (+-150 dB) and log-normal ``sigma_db <= 50``.
"""

from __future__ import annotations

import functools
import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

# scipy (0.9 s to import) is imported in the functions that compute with it: loading and
# checking a system file, and serving its model, need none of it.
from inferplan.arrays import FloatArray, IntArray
from inferplan.coinference.policy import phase_sector
from inferplan.errors import DivergentCost, InvalidArgument, InvalidSystem

__all__ = [
    "Chain",
    "Channel",
    "Discrete",
    "LogNormal",
    "Nakagami",
    "Rayleigh",
    "ScipyChannel",
    "Trace",
    "inv_log2",
]


_LN2 = math.log(2.0)
# quad settings: relative accuracy well below anything a plan or a simulation can resolve.
_EPSREL = 1e-10
_EPSABS = 1e-14
_LIMIT = 200
# Fix for "what to use instead", repeated in every divergence message.
_ADVICE = (
    "use a channel whose SNR stays away from 0: Rayleigh or Nakagami with an outage floor "
    "(min_snr), Nakagami with m > 1, log-normal shadowing, discrete levels or a trace"
)


def inv_log2(snr: FloatArray | float) -> FloatArray | float:
    """``1 / log2(1 + snr)``: upload seconds per bit per hertz of bandwidth."""
    return _LN2 / np.log1p(snr)


# Bounds of continuous-law parameters: +-150 dB covers every radio link with a wide margin, and
# keeps every SNR the integration meets (e^u) far inside the float range.
_SNR_MIN = 1e-15
_SNR_MAX = 1e15
_DB_MAX = 150.0
_SIGMA_DB_MAX = 50.0
# Above this u = ln(gamma) the SNR is not representable: such SNRs carry no probability under the
# bounds above, and the quadrature may still probe them.
_U_MAX = math.log(np.finfo(np.float64).max)


def positive(value: float, name: str) -> float:
    """``value`` as a float, if it is positive and finite.

    Raises
    ------
    InvalidSystem
        Naming the field ``name`` otherwise.
    """
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise InvalidSystem(f"must be a positive finite number, got {value!r}", field=name)
    return value


def _snr_parameter(value: float, name: str) -> float:
    value = positive(value, name)
    if not _SNR_MIN <= value <= _SNR_MAX:
        raise InvalidSystem(
            f"must be a linear SNR in [{_SNR_MIN:g}, {_SNR_MAX:g}] (+-150 dB: beyond any radio "
            f"link, and the expectations would overflow), got {value!r}",
            field=name,
        )
    return value


@dataclass(frozen=True, eq=False)
class Chain:
    """A channel with memory as the solvers see it: ``K`` states over ``S`` stages (made by
    the channels of :mod:`inferplan.coinference.markov`).

    A state is a range of the observed SNR (a *ring*), and, when the channel is observed as
    its complex gain (``phases > 1``, Rician fading), also a sector of the gain's phase:
    state ``k = ring * phases + sector``, the sectors ``phases`` equal slices of
    ``[-pi, pi)`` (:func:`~inferplan.coinference.policy.phase_sector`).

    Attributes
    ----------
    snr
        ``(K,)`` the linear SNR each state stands for, increasing from ring to ring.
    boundaries
        ``(R - 1,)`` where one ring's SNR range ends and the next begins (``R = K / phases``).
    initial
        ``(K,)`` the law of the state at stage 1.
    transitions
        ``(S - 1, K, K)``: ``transitions[n - 1][i, j] = P(state j at n + 1 | state i at n)``.
    phases
        Sectors of the phase per ring (1: the SNR alone is the state).
    """

    snr: FloatArray
    boundaries: FloatArray
    initial: FloatArray
    transitions: FloatArray
    phases: int = 1

    @property
    def states(self) -> int:
        """``K``."""
        return int(self.snr.size)

    @property
    def stages(self) -> int:
        """``S``, the stages the chain covers (``N + 1`` in a system)."""
        return int(self.transitions.shape[0]) + 1

    @functools.cached_property
    def marginals(self) -> FloatArray:
        """``(S, K)``: the law of the state at each stage."""
        out = np.empty((self.stages, self.states))
        out[0] = self.initial
        for n in range(1, self.stages):
            out[n] = out[n - 1] @ self.transitions[n - 1]
        out /= out.sum(axis=1, keepdims=True)
        return out

    def state_of(self, snr: npt.ArrayLike, phase: npt.ArrayLike | None = None) -> IntArray:
        """The state of each observed SNR (and phase of the gain, radians, when the chain's
        states have phase sectors).

        Raises
        ------
        InvalidArgument
            If the states have phase sectors and no phase is given.
        """
        ring = np.searchsorted(self.boundaries, snr, side="right").astype(np.int64)
        if self.phases == 1:
            return ring
        if phase is None:
            raise InvalidArgument(
                "the channel's states are sectors of the gain's phase: give the phase",
                field="phase",
            )
        return np.asarray(ring * self.phases + phase_sector(phase, self.phases), dtype=np.int64)

    def sample_states(self, rng: np.random.Generator, size: int) -> IntArray:
        """``(size, S)`` state paths drawn from the chain."""
        k = self.states
        out = np.empty((size, self.stages), dtype=np.int64)
        out[:, 0] = np.minimum(np.searchsorted(np.cumsum(self.initial), rng.random(size)), k - 1)
        for n in range(1, self.stages):
            keep, alias = self._alias[n - 1]
            here = out[:, n - 1]
            x = rng.random(size) * k
            column = np.minimum(x.astype(np.int64), k - 1)
            flat = here * k + column
            out[:, n] = np.where(x - column < keep[flat], column, alias[flat])
        return out

    @functools.cached_property
    def _alias(self) -> list[tuple[FloatArray, IntArray]]:
        """Walker's alias tables of every row of every step (flattened ``K * K``): a draw is one
        uniform column and one comparison, whatever ``K``."""
        k = self.states
        tables = []
        for matrix in self.transitions:
            keep = np.ones((k, k))
            alias = np.tile(np.arange(k), (k, 1))
            for i, row in enumerate(matrix):
                scaled = row * k
                small = [j for j in range(k) if scaled[j] < 1.0]
                large = [j for j in range(k) if scaled[j] >= 1.0]
                while small and large:
                    lo, hi = small.pop(), large[-1]
                    keep[i, lo], alias[i, lo] = scaled[lo], hi
                    scaled[hi] -= 1.0 - scaled[lo]
                    if scaled[hi] < 1.0:
                        small.append(large.pop())
            tables.append((keep.ravel(), alias.ravel()))
        return tables


class Channel(ABC):
    """The distribution of the uplink SNR ``gamma`` (linear, not dB) at one split stage."""

    kind: str
    #: Whether SNRs at successive stages depend on each other (:meth:`chain` is not ``None``).
    memory: ClassVar[bool] = False

    @abstractmethod
    def below(self, threshold: float) -> float:
        """``P(gamma < threshold)``; 1 for an infinite threshold."""

    def at_or_above(self, threshold: float) -> float:
        """``P(gamma >= threshold)``; 0 for an infinite threshold. Laws whose probabilities
        are a rounded sum compute it directly rather than as ``1 - below``, so that a stage the
        rule never stops at weighs nothing however large its cost."""
        return 1.0 - self.below(threshold)

    @abstractmethod
    def partial_inv_log(self, threshold: float) -> float:
        """``E[1 / log2(1 + gamma) ; gamma >= threshold]``; 0 for an infinite threshold.

        Raises
        ------
        DivergentCost
            If the threshold is at or below the bottom of the support and the full expectation is
            infinite.
        """

    @abstractmethod
    def expected_snr(self) -> float:
        """``E[gamma]`` (used by the mean-statistics fixed split)."""

    @abstractmethod
    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        """``size`` independent SNR draws."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The channel in the system-file format."""

    def mean_inv_log(self) -> float:
        """``E[1 / log2(1 + gamma)]``, the expectation for a forced upload."""
        return self.partial_inv_log(0.0)

    def chain(self, intervals: Sequence[float]) -> Chain | None:
        """The channel's memory over ``len(intervals) + 1`` stages ``intervals`` seconds apart
        (:mod:`inferplan.coinference.markov`); ``None``: SNRs of different stages are
        independent."""
        return None

    def sample_paths(
        self, rng: np.random.Generator, size: int, intervals: Sequence[float]
    ) -> FloatArray:
        """``(size, len(intervals) + 1)`` SNRs at consecutive stages (independent here)."""
        return self.sample(rng, size * (len(intervals) + 1)).reshape(size, len(intervals) + 1)

    def sample_observations(
        self, rng: np.random.Generator, size: int, intervals: Sequence[float]
    ) -> tuple[FloatArray, FloatArray | None]:
        """What the device observes along :meth:`sample_paths`: the SNRs, and the phase of the
        complex gain where the channel is observed as one (``None`` here)."""
        return self.sample_paths(rng, size, intervals), None


# ----------------------------------------------------------------------------------- discrete


@dataclass(frozen=True)
class Discrete(Channel):
    """A finite set of SNR levels with probabilities (exact sums, no integration).

    Examples
    --------
    >>> ch = Discrete(snr=(0.5, 2.0, 10.0), prob=(0.2, 0.5, 0.3))
    >>> round(ch.below(2.0), 3), round(ch.mean_inv_log(), 4)
    (0.2, 0.7441)
    """

    snr: tuple[float, ...]
    prob: tuple[float, ...]
    kind: str = field(default="discrete", init=False)

    def __post_init__(self) -> None:
        snr = tuple(float(s) for s in self.snr)
        prob = tuple(float(p) for p in self.prob)
        if not snr:
            raise InvalidSystem("must list at least one SNR level", field="snr")
        if len(prob) != len(snr):
            raise InvalidSystem(
                f"must give one probability per SNR level ({len(snr)}), got {len(prob)}",
                field="prob",
            )
        for k, s in enumerate(snr):
            if not (math.isfinite(s) and s >= 0):
                raise InvalidSystem(
                    f"must be a non-negative finite linear SNR, got {s!r}", field=f"snr[{k}]"
                )
        for k, p in enumerate(prob):
            if not (math.isfinite(p) and p >= 0):
                raise InvalidSystem(f"must be in [0, 1], got {p!r}", field=f"prob[{k}]")
        total = math.fsum(prob)
        if abs(total - 1.0) > 1e-9:
            raise InvalidSystem(f"must sum to 1, got {total:.12g}", field="prob")
        object.__setattr__(self, "snr", snr)
        object.__setattr__(self, "prob", tuple(p / total for p in prob))

    def _arrays(self) -> tuple[FloatArray, FloatArray]:
        return np.asarray(self.snr), np.asarray(self.prob)

    def below(self, threshold: float) -> float:
        if math.isinf(threshold):
            return 1.0
        snr, prob = self._arrays()
        return float(prob[snr < threshold].sum())

    def at_or_above(self, threshold: float) -> float:
        snr, prob = self._arrays()
        return float(prob[snr >= threshold].sum())

    def partial_inv_log(self, threshold: float) -> float:
        snr, prob = self._arrays()
        keep = (snr >= threshold) & (prob > 0)
        if np.any(snr[keep] == 0.0):
            raise DivergentCost(
                "E[1/log2(1+SNR)] is infinite: SNR level 0 has positive probability, so an "
                f"upload there never ends; {_ADVICE}",
                field="channel",
            )
        return float(np.dot(prob[keep], inv_log2(snr[keep])))

    def expected_snr(self) -> float:
        snr, prob = self._arrays()
        return float(np.dot(prob, snr))

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        snr, prob = self._arrays()
        return snr[rng.choice(len(snr), size=size, p=prob)]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "discrete", "snr": list(self.snr), "prob": list(self.prob)}


@dataclass(frozen=True)
class Trace(Channel):
    """An empirical trace of SNR samples: each sample equally likely (exact, like ``Discrete``).

    The planner treats the samples as independent. With ``replay`` the simulator (and
    ``device run``) replays the trace as recorded: each inference reads consecutive samples
    from a random start (wrapping around), one per split stage, so the trace's own correlation
    reaches the split decisions; every stage still sees each sample equally often.
    """

    snr: tuple[float, ...]
    replay: bool = False
    kind: str = field(default="trace", init=False)

    def __post_init__(self) -> None:
        snr = tuple(float(s) for s in self.snr)
        if not snr:
            raise InvalidSystem("must hold at least one SNR sample", field="snr")
        for k, s in enumerate(snr):
            if not (math.isfinite(s) and s >= 0):
                raise InvalidSystem(
                    f"must be a non-negative finite linear SNR, got {s!r}", field=f"snr[{k}]"
                )
        object.__setattr__(self, "snr", snr)

    @functools.cached_property
    def _levels(self) -> Discrete:
        values, counts = np.unique(np.asarray(self.snr), return_counts=True)
        return Discrete(tuple(values.tolist()), tuple((counts / counts.sum()).tolist()))

    def below(self, threshold: float) -> float:
        return self._levels.below(threshold)

    def at_or_above(self, threshold: float) -> float:
        return self._levels.at_or_above(threshold)

    def partial_inv_log(self, threshold: float) -> float:
        return self._levels.partial_inv_log(threshold)

    def expected_snr(self) -> float:
        return float(np.mean(self.snr))

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return np.asarray(self.snr)[rng.integers(0, len(self.snr), size=size)]

    def sample_paths(
        self, rng: np.random.Generator, size: int, intervals: Sequence[float]
    ) -> FloatArray:
        if not self.replay:
            return super().sample_paths(rng, size, intervals)
        n = len(self.snr)
        start = rng.integers(0, n, size=size)
        steps = np.arange(len(intervals) + 1)
        return np.asarray(
            np.asarray(self.snr)[(start[:, None] + steps[None, :]) % n], dtype=np.float64
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "trace", "snr": list(self.snr)}
        if self.replay:
            out["replay"] = True
        return out


# --------------------------------------------------------------------------------- continuous


class _Continuous(Channel):
    """A continuous SNR law; subclasses give a fast scalar density and vectorised CDF/quantile."""

    #: Quantile levels that cut the integration range (the lowest also ends a power head).
    cut_levels: tuple[float, ...] = (1e-8, 0.5, 1 - 1e-10)

    @property
    @abstractmethod
    def support_lo(self) -> float:
        """The bottom of the support (0 or an outage floor)."""

    @abstractmethod
    def pdf(self, snr: float) -> float:
        """The density at one point (scalar, called by quad)."""

    @abstractmethod
    def cdf(self, snr: FloatArray | float) -> FloatArray | float:
        """``P(gamma <= snr)``."""

    @abstractmethod
    def ppf(self, q: FloatArray | float) -> FloatArray | float:
        """The quantile function."""

    def divergence_reason(self) -> str | None:
        """Why ``E[1/log2(1+gamma)]`` is infinite, or ``None`` if it is finite."""
        return None

    def power_at_zero(self) -> tuple[float, Callable[[float], float]] | None:
        """``(a, phi)`` with density ``gamma^a phi(gamma)`` near 0, ``a > 0``, ``phi`` smooth.

        ``None`` (the default) when the law has no such form or its support starts above 0.
        """
        return None

    def below(self, threshold: float) -> float:
        if threshold <= self.support_lo:
            return 0.0
        if math.isinf(threshold):
            return 1.0
        return float(self.cdf(threshold))

    def partial_inv_log(self, threshold: float) -> float:
        if math.isinf(threshold):
            return 0.0
        if threshold <= self.support_lo:
            reason = self.divergence_reason()
            if reason is not None:
                raise DivergentCost(
                    f"E[1/log2(1+SNR)] is infinite: {reason}, so a forced upload has infinite "
                    f"expected cost; {_ADVICE}",
                    field="channel",
                )
        value = self._integral_from(max(float(threshold), self.support_lo))
        if not math.isfinite(value):
            raise InvalidSystem(
                f"cannot compute E[1/log2(1+SNR); SNR >= {threshold:g}] for this channel "
                f"(numerical integration gave {value!r}); {_ADVICE}",
                field="channel",
            )
        return value

    def _integral_from(self, lo: float) -> float:
        """``E[g(gamma); gamma >= lo]`` for ``lo`` at or above the bottom of the support."""
        return _partial_integral(self, lo)

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return np.asarray(self.ppf(rng.uniform(size=size)), dtype=np.float64)


def _integrand(channel: _Continuous, u: float) -> float:
    # E over gamma = e^u: g(gamma) f(gamma) dgamma = g(e^u) f(e^u) e^u du.
    if u > _U_MAX:
        return 0.0
    x = math.exp(u)
    if x == 0.0:
        return 0.0
    return _LN2 / math.log1p(x) * channel.pdf(x) * x


def _x_over_log1p(x: float) -> float:
    """``x / ln(1 + x)``, smooth with value 1 at 0."""
    return 1.0 if x == 0.0 else x / math.log1p(x)


def _power_head(a: float, phi: Callable[[float], float], top: float) -> float:
    """``E[g(gamma); gamma < top]`` for the density ``gamma^a phi(gamma)``.

    ``g(gamma) f(gamma) = gamma^(a - 1) * ln2 * gamma / ln(1 + gamma) * phi(gamma)``: QAWS takes
    the weight ``gamma^(a - 1)`` exactly (its integral alone is ``top^a / a``), leaving it a
    smooth factor.
    """
    from scipy import integrate

    value, _ = integrate.quad(
        lambda x: _LN2 * _x_over_log1p(x) * phi(x),
        0.0,
        top,
        weight="alg",
        wvar=(a - 1.0, 0.0),
        epsabs=_EPSABS,
        epsrel=_EPSREL,
        limit=_LIMIT,
    )
    return float(value)


@functools.lru_cache(maxsize=1 << 16)
def _partial_integral(channel: _Continuous, lo: float) -> float:
    """``E[g(gamma); gamma >= lo]`` by quad over ``u = ln gamma`` in three pieces.

    The break points (the 1e-8 and 1 - 1e-10 quantiles, and the median) put the bulk of the mass
    in a finite interval where adaptive Gauss-Kronrod is reliable; the two tails go to QAGI. For
    a power law at 0 (``lo = 0``) the piece below the 1e-8 quantile is :func:`_power_head`. A
    law may add break points (:attr:`_Continuous.cut_levels`) where its tails are too narrow for
    QAGI to find.
    """
    from scipy import integrate

    qs = np.asarray(channel.ppf(np.array(channel.cut_levels)), dtype=np.float64)
    total = 0.0
    power = channel.power_at_zero() if lo <= 0 else None
    if power is not None and qs[0] > 0:
        total += _power_head(*power, float(qs[0]))
        lo = float(qs[0])
    u_lo = -math.inf if lo <= 0 else math.log(lo)
    cuts = [u_lo, *[math.log(q) for q in qs if q > 0 and math.log(q) > u_lo], math.inf]
    for a, b in itertools.pairwise(cuts):
        value, _ = integrate.quad(
            functools.partial(_integrand, channel),
            a,
            b,
            epsabs=_EPSABS,
            epsrel=_EPSREL,
            limit=_LIMIT,
        )
        total += value
    return total


@functools.lru_cache(maxsize=1 << 16)
def _exponential_tail(mean: float, floor: float, lo: float) -> float:
    """``E[g(gamma); gamma >= lo]`` for ``gamma = floor + Exp(mean)``, ``0 < lo``, ``mean <= lo``.

    With ``gamma = lo + mean * s`` the integrand is ``g(lo + mean s) e^(-s)`` on ``s >= 0``, smooth
    on the unit scale; the log-SNR domain would squeeze all the mass into ``mean / lo``.
    """
    from scipy import integrate

    value, _ = integrate.quad(
        lambda t: _LN2 / math.log1p(lo + mean * t) * math.exp(-t),
        0.0,
        math.inf,
        epsabs=_EPSABS,
        epsrel=_EPSREL,
        limit=_LIMIT,
    )
    return math.exp(-(lo - floor) / mean) * float(value)


@dataclass(frozen=True)
class Rayleigh(_Continuous):
    """Rayleigh fading: exponential SNR with mean ``mean_snr``, optionally truncated at ``min_snr``.

    With ``min_snr`` the SNR is the exponential law conditioned on ``gamma >= min_snr`` (density
    renormalised), i.e. ``min_snr + Exp(mean_snr)`` by memorylessness: the device transmits only
    in slots above the outage threshold. Its mean is ``mean_snr + min_snr``. Without ``min_snr``
    the expected upload cost is infinite and solving raises :class:`DivergentCost`.

    Examples
    --------
    >>> ch = Rayleigh(mean_snr=10.0, min_snr=0.25)
    >>> round(ch.below(1.0), 4), round(ch.mean_inv_log(), 4)
    (0.0723, 0.4611)
    """

    mean_snr: float
    min_snr: float | None = None
    kind: str = field(default="rayleigh", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean_snr", _snr_parameter(self.mean_snr, "mean_snr"))
        if self.min_snr is not None:
            object.__setattr__(self, "min_snr", _snr_parameter(self.min_snr, "min_snr"))

    @property
    def support_lo(self) -> float:
        return self.min_snr or 0.0

    def divergence_reason(self) -> str | None:
        if self.min_snr is None:
            return "plain Rayleigh fading has an SNR density positive at 0"
        return None

    def _integral_from(self, lo: float) -> float:
        if lo > 0.0 and self.mean_snr <= lo:
            return _exponential_tail(self.mean_snr, self.support_lo, lo)
        return _partial_integral(self, lo)

    def pdf(self, snr: float) -> float:
        lo = self.support_lo
        if snr < lo:
            return 0.0
        return math.exp(-(snr - lo) / self.mean_snr) / self.mean_snr

    def cdf(self, snr: FloatArray | float) -> FloatArray | float:
        x = np.maximum(np.asarray(snr, dtype=np.float64) - self.support_lo, 0.0)
        return -np.expm1(-x / self.mean_snr)

    def ppf(self, q: FloatArray | float) -> FloatArray | float:
        return self.support_lo - self.mean_snr * np.log1p(-np.asarray(q))  # type: ignore[no-any-return]

    def expected_snr(self) -> float:
        return self.mean_snr + self.support_lo

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return self.support_lo + rng.exponential(self.mean_snr, size=size)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "rayleigh", "mean_snr": self.mean_snr}
        if self.min_snr is not None:
            out["min_snr"] = self.min_snr
        return out


# Above this shape the law is a spike narrower than 1e-6 of its mean (no fading: use a discrete
# channel with one level); up to it every density and quantile below is accurate.
_NAKAGAMI_M_MAX = 1e12
# From this shape on, log Gamma(m) is taken from Stirling's series (its error term is below
# 1e-23), so the log-density does not lose digits to the cancellation of two huge terms.
_STIRLING_M = 1e4
# A floor whose Gamma tail probability is below this is "far": the tail would underflow, so the
# truncated law is handled as floor + excess (see Nakagami).
_FAR_TAIL = 1e-280


def _log_gamma_density(m: float, y: float) -> float:
    """``log`` of the Gamma(``m``, 1) density at ``y > 0``, accurate for every ``m`` up to
    :data:`_NAKAGAMI_M_MAX` (``m (log1p(t) - t) - log y + log(m / 2 pi) / 2 - S(m)`` with
    ``t = y / m - 1`` and Stirling's remainder ``S`` for large ``m``)."""
    if m < _STIRLING_M:
        return (m - 1.0) * math.log(y) - y - math.lgamma(m)
    t = y / m - 1.0
    # m (log(1 + t) - t), without cancellation near t = 0 and without log1p(-1) far below m.
    core = m * (math.log1p(t) - t) if t > -0.5 else m * (math.log(y) - math.log(m)) - y + m
    remainder = 1.0 / (12.0 * m) - 1.0 / (360.0 * m**3)
    return core - math.log(y) + 0.5 * math.log(m / (2.0 * math.pi)) - remainder


@functools.lru_cache(maxsize=1 << 12)
def _log_upper_gamma(m: float, x: float) -> float:
    """``log Q(m, x)``, the log of the regularised upper incomplete gamma function, also where
    ``Q`` underflows: ``Q(m, x) = x^(m-1) e^(-x) / Gamma(m) * J`` with the smooth
    ``J = int_0^inf (1 + u/x)^(m-1) e^(-u) du``."""
    from scipy import special

    q = float(special.gammaincc(m, x))
    if q > _FAR_TAIL:
        return math.log(q)
    return _log_gamma_density(m, x) + math.log(_excess_moment(m, x, 0))


@functools.lru_cache(maxsize=1 << 12)
def _excess_moment(m: float, x: float, k: int) -> float:
    """``int_0^inf u^k (1 + u/x)^(m-1) e^(-u) du``: moments of the excess over ``x`` of a
    Gamma(``m``, 1) law conditioned on exceeding ``x`` (unnormalised; ``k = 0`` is ``J``)."""
    from scipy import integrate

    value, _ = integrate.quad(
        lambda u: u**k * math.exp((m - 1.0) * math.log1p(u / x) - u),
        0.0,
        math.inf,
        epsabs=0.0,
        epsrel=_EPSREL,
        limit=_LIMIT,
    )
    return float(value)


@dataclass(frozen=True)
class Nakagami(_Continuous):
    """Nakagami-m fading: SNR ~ Gamma(shape ``m``, scale ``mean_snr / m``), optional floor.

    ``m = 1`` is Rayleigh. The density behaves like ``gamma^(m-1)`` at 0, so the expected upload
    cost is finite iff ``m > 1`` or a ``min_snr`` floor truncates the law (conditioned on
    ``gamma >= min_snr``, density renormalised). ``m`` may be up to 1e12 (beyond, the law is a
    spike narrower than a millionth of its mean: use a discrete channel with one level).

    A floor far above the mean (so far that the Gamma tail beyond it underflows) leaves the law
    ``min_snr + excess``, with the excess ``u`` in units of the scale having the density
    ``(1 + u/x0)^(m-1) e^(-u)`` up to a constant (``x0 = min_snr / scale``): every expectation
    is then integrated over ``u``, where it is smooth on the unit scale.

    Examples
    --------
    >>> ch = Nakagami(m=1000.0, mean_snr=10.0)
    >>> round(ch.mean_inv_log(), 6), round(ch.expected_snr(), 6)
    (0.289156, 10.0)
    >>> far = Nakagami(m=2.0, mean_snr=1e-3, min_snr=1e3)
    >>> round(far.expected_snr(), 6), round(far.below(1e3 + 1e-3), 4)
    (1000.0005, 0.8647)
    """

    m: float
    mean_snr: float
    min_snr: float | None = None
    kind: str = field(default="nakagami", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "m", positive(self.m, "m"))
        if not 0.5 <= self.m <= _NAKAGAMI_M_MAX:
            raise InvalidSystem(
                f"must be in [0.5, {_NAKAGAMI_M_MAX:g}] (Nakagami-m; a larger m is no fading: "
                f"use a discrete channel with one level), got {self.m!r}",
                field="m",
            )
        object.__setattr__(self, "mean_snr", _snr_parameter(self.mean_snr, "mean_snr"))
        if self.min_snr is not None:
            object.__setattr__(self, "min_snr", _snr_parameter(self.min_snr, "min_snr"))

    @property
    def cut_levels(self) -> tuple[float, ...]:  # type: ignore[override]
        # A large m makes the law a spike whose lower tail QAGI would miss: cut it too.
        return (1e-100, *super().cut_levels) if self.m >= _STIRLING_M else super().cut_levels

    @functools.cached_property
    def _scale(self) -> float:
        return self.mean_snr / self.m

    @functools.cached_property
    def _x0(self) -> float:
        return self.support_lo / self._scale

    @functools.cached_property
    def _tail_at_floor(self) -> float:
        # P(untruncated gamma >= floor), the renormalisation of the truncated density.
        from scipy import special

        return float(special.gammaincc(self.m, self._x0))

    @functools.cached_property
    def _far(self) -> bool:
        return self.min_snr is not None and self._tail_at_floor <= _FAR_TAIL

    @functools.cached_property
    def _log_tail(self) -> float:
        return _log_upper_gamma(self.m, self._x0) if self.min_snr is not None else 0.0

    @functools.cached_property
    def _log_norm(self) -> float:
        return math.lgamma(self.m) + self.m * math.log(self._scale) + self._log_tail

    @property
    def support_lo(self) -> float:
        return self.min_snr or 0.0

    def divergence_reason(self) -> str | None:
        if self.min_snr is None and self.m <= 1.0:
            return (
                f"Nakagami-m with m = {self.m:g} <= 1 has an SNR density that does not vanish at 0"
            )
        return None

    def power_at_zero(self) -> tuple[float, Callable[[float], float]] | None:
        # Only where the density's slow rise from 0 needs it (m < 2); for larger m the plain
        # quadrature is accurate, and gamma^(m-1) would overflow the algebraic weight's moments.
        if self.min_snr is not None or not 1.0 < self.m < 2.0:
            return None
        scale, log_norm = self._scale, self._log_norm
        return self.m - 1.0, lambda x: math.exp(-x / scale - log_norm)

    def pdf(self, snr: float) -> float:
        if snr < self.support_lo or snr <= 0.0:
            return 0.0
        y = snr / self._scale
        return math.exp(_log_gamma_density(self.m, y) - math.log(self._scale) - self._log_tail)

    def _far_log_survival(self, u: float) -> float:
        """``log P(gamma >= floor + u scale)`` for a far floor, from the excess ``u >= 0``
        directly (the two log tails it is the difference of are huge and would cancel)."""
        m, x0 = self.m, self._x0
        excess = _excess_moment(m, x0 + u, 0) / _excess_moment(m, x0, 0)
        return (m - 1.0) * math.log1p(u / x0) - u + math.log(excess)

    def cdf(self, snr: FloatArray | float) -> FloatArray | float:
        from scipy import special

        x = np.maximum(np.asarray(snr, dtype=np.float64), self.support_lo)
        if self._far:
            survival = np.vectorize(self._far_log_survival, otypes=[np.float64])
            return -np.expm1(survival((x - self.support_lo) / self._scale))  # type: ignore[no-any-return]
        upper = special.gammaincc(self.m, x / self._scale)
        return 1.0 - upper / self._tail_at_floor  # type: ignore[no-any-return]

    def _far_quantile(self, q: float) -> float:
        from scipy import optimize

        if q <= 0.0:
            return self.support_lo
        if q >= 1.0:
            return math.inf
        target = math.log1p(-q)
        width = 1.0
        while self._far_log_survival(width) > target:
            width *= 2.0
        u = optimize.brentq(
            lambda u: self._far_log_survival(u) - target, 0.0, width, xtol=1e-13 * width
        )
        return self.support_lo + float(u) * self._scale

    def ppf(self, q: FloatArray | float) -> FloatArray | float:
        from scipy import special

        if self._far:
            return np.vectorize(self._far_quantile, otypes=[np.float64])(q)  # type: ignore[no-any-return]
        q = np.asarray(q, dtype=np.float64)
        upper = special.gammainccinv(self.m, self._tail_at_floor * (1.0 - q))
        if self.min_snr is None:  # low quantiles from the lower tail, which 1 - q would lose
            upper = np.where(q < 0.5, special.gammaincinv(self.m, q), upper)
        return upper * self._scale  # type: ignore[no-any-return]

    def _integral_from(self, lo: float) -> float:
        if self._far:
            return _far_nakagami_tail(self.m, self._scale, self.support_lo, lo)
        return _partial_integral(self, lo)

    def expected_snr(self) -> float:
        from scipy import special

        if self.min_snr is None:
            return self.mean_snr
        if self._far:  # floor + the mean excess, which the ratio below would lose to rounding
            excess = _excess_moment(self.m, self._x0, 1) / _excess_moment(self.m, self._x0, 0)
            return self.support_lo + self._scale * excess
        # E[gamma; gamma >= a] for a Gamma(m, s) law is m s Q(m + 1, a / s).
        upper = float(special.gammaincc(self.m + 1.0, self._x0))
        return float(self.mean_snr * upper / self._tail_at_floor)

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        if self.min_snr is None:
            return rng.gamma(self.m, self._scale, size=size)
        if self._far:
            return self.support_lo + self._scale * _far_excess(self.m, self._x0, rng, size)
        return super().sample(rng, size)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "nakagami", "m": self.m, "mean_snr": self.mean_snr}
        if self.min_snr is not None:
            out["min_snr"] = self.min_snr
        return out


@functools.lru_cache(maxsize=1 << 16)
def _far_nakagami_tail(m: float, scale: float, floor: float, lo: float) -> float:
    """``E[g(gamma); gamma >= lo]`` for a Gamma(``m``, ``scale``) law truncated at a far
    ``floor``, ``lo >= floor``: over the excess ``u = (gamma - floor) / scale``, whose density
    ``(1 + u/x0)^(m-1) e^(-u) / J`` is smooth on the unit scale."""
    from scipy import integrate

    x0, u_lo = floor / scale, (lo - floor) / scale
    value, _ = integrate.quad(
        lambda t: (
            _LN2
            / math.log1p(lo + scale * t)
            * math.exp((m - 1.0) * math.log1p((u_lo + t) / x0) - (u_lo + t))
        ),
        0.0,
        math.inf,
        epsabs=_EPSABS,
        epsrel=_EPSREL,
        limit=_LIMIT,
    )
    return float(value) / _excess_moment(m, x0, 0)


def _far_excess(m: float, x0: float, rng: np.random.Generator, size: int) -> FloatArray:
    """``size`` draws of ``u >= 0`` with density ``(1 + u/x0)^(m-1) e^(-u)`` up to a constant,
    by rejection from an exponential law that dominates it (``x0 > m - 1`` for a far floor)."""
    rate = 1.0 - max(m - 1.0, 0.0) / x0
    out = np.empty(size)
    filled = 0
    while filled < size:
        u = rng.exponential(1.0 / rate, size=size - filled)
        log_accept = (m - 1.0) * np.log1p(u / x0) - max(m - 1.0, 0.0) * u / x0
        kept = u[np.log(rng.uniform(size=u.size)) < log_accept]
        out[filled : filled + kept.size] = kept
        filled += kept.size
    return out


@dataclass(frozen=True)
class LogNormal(_Continuous):
    """Log-normal shadowing: ``10 log10(gamma) ~ Normal(mean_db, sigma_db)``.

    Its density vanishes faster than any power at 0, so every expectation is finite.
    """

    mean_db: float
    sigma_db: float
    kind: str = field(default="lognormal", init=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mean_db) and abs(self.mean_db) <= _DB_MAX):
            raise InvalidSystem(
                f"must be in [-{_DB_MAX:g}, {_DB_MAX:g}] dB (beyond any radio link, and the "
                f"expectations would overflow), got {self.mean_db!r}",
                field="mean_db",
            )
        object.__setattr__(self, "mean_db", float(self.mean_db))
        sigma_db = positive(self.sigma_db, "sigma_db")
        if sigma_db > _SIGMA_DB_MAX:
            raise InvalidSystem(
                f"must be at most {_SIGMA_DB_MAX:g} dB (measured shadowing spreads are 4-12 dB; "
                f"wider laws put SNRs beyond the float range), got {sigma_db!r}",
                field="sigma_db",
            )
        object.__setattr__(self, "sigma_db", sigma_db)

    @functools.cached_property
    def _mu_sigma(self) -> tuple[float, float]:
        # Natural-log parameters: ln gamma = (ln 10 / 10) * dB.
        k = math.log(10.0) / 10.0
        return k * self.mean_db, k * self.sigma_db

    @property
    def support_lo(self) -> float:
        return 0.0

    def pdf(self, snr: float) -> float:
        if snr <= 0.0:
            return 0.0
        mu, sigma = self._mu_sigma
        z = (math.log(snr) - mu) / sigma
        return math.exp(-0.5 * z * z) / (snr * sigma * math.sqrt(2.0 * math.pi))

    def cdf(self, snr: FloatArray | float) -> FloatArray | float:
        from scipy import special

        mu, sigma = self._mu_sigma
        x = np.asarray(snr, dtype=np.float64)
        with np.errstate(divide="ignore"):
            return special.ndtr((np.log(x) - mu) / sigma)  # type: ignore[no-any-return]

    def ppf(self, q: FloatArray | float) -> FloatArray | float:
        from scipy import special

        mu, sigma = self._mu_sigma
        return np.exp(mu + sigma * special.ndtri(np.asarray(q)))  # type: ignore[no-any-return]

    def expected_snr(self) -> float:
        mu, sigma = self._mu_sigma
        return math.exp(mu + 0.5 * sigma * sigma)

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        mu, sigma = self._mu_sigma
        return np.exp(rng.normal(mu, sigma, size=size))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "lognormal", "mean_db": self.mean_db, "sigma_db": self.sigma_db}


@dataclass(frozen=True, eq=False)
class ScipyChannel(_Continuous):
    """Any frozen continuous :mod:`scipy.stats` distribution of the linear SNR.

    Divergence is detected from the density near 0: ``E[1/log2(1+gamma)]`` is finite iff
    ``f(gamma) / gamma`` is integrable at 0. If the support starts at 0 the local power-law
    exponent ``s`` of ``f(gamma) ~ C gamma^s`` is estimated from ``f(1e-8)`` and ``f(1e-16)``; the
    expectation is declared infinite when ``s < 0.01`` (the density does not vanish at 0).

    Examples
    --------
    >>> from scipy import stats
    >>> round(ScipyChannel(stats.gamma(3.0, scale=10 / 3)).expected_snr(), 6)
    10.0
    """

    dist: Any
    kind: str = field(default="scipy", init=False)

    def __post_init__(self) -> None:
        if not hasattr(self.dist, "pdf") or not hasattr(self.dist, "rvs"):
            raise InvalidSystem(
                "must be a frozen continuous scipy.stats distribution", field="channel"
            )
        if float(self.dist.cdf(0.0)) > 0.0:
            raise InvalidSystem(
                "gives negative SNR values with positive probability; the SNR is linear and >= 0",
                field="channel",
            )

    @functools.cached_property
    def _lo(self) -> float:
        return max(float(self.dist.support()[0]), 0.0)

    @property
    def support_lo(self) -> float:
        return self._lo

    def divergence_reason(self) -> str | None:
        if self._lo > 0:
            return None
        f1, f2 = float(self.dist.pdf(1e-8)), float(self.dist.pdf(1e-16))
        if f2 <= 0.0:
            return None
        exponent = math.log10(f1 / f2) / 8.0 if f1 > 0 else -math.inf
        if exponent < 0.01:
            return "the SNR density does not vanish at 0"
        return None

    def pdf(self, snr: float) -> float:
        return float(self.dist.pdf(snr))

    def cdf(self, snr: FloatArray | float) -> FloatArray | float:
        return self.dist.cdf(snr)  # type: ignore[no-any-return]

    def ppf(self, q: FloatArray | float) -> FloatArray | float:
        return self.dist.ppf(q)  # type: ignore[no-any-return]

    def expected_snr(self) -> float:
        return float(self.dist.mean())

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return np.asarray(self.dist.rvs(size=size, random_state=rng), dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        raise InvalidSystem(
            "a scipy.stats channel cannot be written to a system file; use a trace of its samples",
            field="channel",
        )


def as_channel(value: Channel | Any) -> Channel:
    """A :class:`Channel` as is, or a frozen ``scipy.stats`` distribution wrapped."""
    if isinstance(value, Channel):
        return value
    from scipy import stats

    if isinstance(value, stats.distributions.rv_frozen):
        return ScipyChannel(value)
    raise InvalidSystem(
        f"must be a Channel or a frozen scipy.stats distribution, got {type(value).__name__}",
        field="channel",
    )


def channel_sequence(
    value: Channel | Any | Sequence[Channel | Any], stages: int
) -> tuple[Channel, ...]:
    """One channel per split stage ``1..stages``: a single channel is shared by every stage."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        channels = tuple(as_channel(v) for v in value)
        if len(channels) != stages:
            raise InvalidSystem(
                f"must give one channel per split stage (N + 1 = {stages}), got {len(channels)}",
                field="channel",
            )
        return channels
    return (as_channel(value),) * stages
