"""Uplink channels with memory: finite-state Markov chains and Gauss-Markov Rayleigh fading.

A channel with memory is a :class:`~inferplan.coinference.channels.Channel` whose SNRs at
successive split stages are not independent. Every such channel reaches the solvers as one
:class:`Chain`: ``K`` states ordered by SNR, the law of the state at stage 1 and one transition
matrix per step between stages (``transitions[n - 1]`` takes stage ``n`` to ``n + 1``). A state
``k`` stands for the SNR ``snr[k]``; an observed SNR belongs to state ``k`` when
``boundaries[k - 1] <= gamma < boundaries[k]``.

* :class:`Markov` is a finite-state Markov channel given directly (one linear SNR per state) or
  fitted from a recorded SNR trace (:func:`fit_markov`, equiprobable or given boundaries, in the
  manner of Wang and Moayeri's partition of the SNR range).
* :class:`GaussMarkov` is Rayleigh fading whose complex gain follows
  ``h_{n+1} = rho_n h_n + sqrt(1 - rho_n^2) w_n``, ``rho_n`` given or Clarke's
  ``J0(2 pi f_D dt_n)`` with ``f_D = v f_c / c`` and ``dt_n`` the device's compute time of layer
  ``n``; the solvers see it as a chain on ``grid`` equiprobable SNR cells (see
  :meth:`GaussMarkov.chain`).

As a plain ``Channel`` (its methods ``below``, ``partial_inv_log``, ``sample``) each describes
the law of the SNR at stage 1; :attr:`~inferplan.coinference.System.channels` holds the law at
every stage, the chain's marginals.
"""

from __future__ import annotations

import functools
import math
import warnings
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

# scipy is imported in the functions that compute with it, as in channels.py.
from inferplan.arrays import FloatArray
from inferplan.coinference.channels import (
    Chain,
    Channel,
    Discrete,
    Rayleigh,
    inv_log2,
)
from inferplan.coinference.policy import phase_sector
from inferplan.errors import DivergentCost, InvalidSystem

__all__ = [
    "SPEED_OF_LIGHT",
    "Chain",
    "GaussMarkov",
    "Markov",
    "RicianGaussMarkov",
    "clarke_correlation",
    "fit_markov",
    "stationary_law",
]

SPEED_OF_LIGHT = 299_792_458.0
"""``c`` in m/s."""

# Rows of a transition matrix and a law must sum to 1 within this (files hold rounded numbers).
_SUM_TOL = 1e-9
_DEFAULT_GRID = 64
_SAMPLERS = ("recursion", "jakes")
_SINUSOIDS = 32  # Jakes' oscillators per path
# Rejection draws of a step above the floor before the rest are drawn from the conditional law
# (at the default floor one draw in 40 is rejected: none is left after 64 rounds).
_REJECTION_ROUNDS = 64
_MAX_GRID = 4096
_MAX_SPEED = 1000.0  # m/s: beyond any vehicle; Clarke's model is for terrestrial mobility
_MAX_CARRIER = 1e12  # Hz


def _law(values: Sequence[float], name: str) -> FloatArray:
    out = np.asarray([float(v) for v in values], dtype=np.float64)
    for k, p in enumerate(out):
        if not (math.isfinite(p) and 0.0 <= p <= 1.0 + _SUM_TOL):
            raise InvalidSystem(f"must be a probability in [0, 1], got {p!r}", field=f"{name}[{k}]")
    total = math.fsum(out.tolist())
    if abs(total - 1.0) > _SUM_TOL:
        raise InvalidSystem(f"must sum to 1, got {total:.12g}", field=name)
    return np.minimum(out, 1.0) / total


def stationary_law(transition: npt.ArrayLike) -> FloatArray:
    """The stationary law ``pi = pi P`` of a transition matrix, which must be unique.

    Examples
    --------
    >>> stationary_law([[0.9, 0.1], [0.2, 0.8]]).round(6).tolist()
    [0.666667, 0.333333]
    """
    p = np.asarray(transition, dtype=np.float64)
    k = p.shape[0]
    # pi (P - I) = 0 with sum(pi) = 1: the system is of full rank iff the law is unique.
    a = np.vstack([(p - np.eye(k)).T, np.ones((1, k))])
    rhs = np.zeros(k + 1)
    rhs[-1] = 1.0
    if np.linalg.matrix_rank(a[:-1], tol=1e-10) < k - 1:
        raise InvalidSystem(
            "has several stationary laws (some states never reach each other); give 'initial', "
            "the law of the state at stage 1",
            field="transition",
        )
    pi, *_ = np.linalg.lstsq(a, rhs, rcond=None)
    pi = np.maximum(pi, 0.0)
    return np.asarray(pi / pi.sum(), dtype=np.float64)


def clarke_correlation(speed_mps: float, carrier_hz: float, dt_s: npt.ArrayLike) -> FloatArray:
    """Clarke's correlation of the complex gain ``dt_s`` seconds apart: ``J0(2 pi f_D dt)``.

    ``f_D = v f_c / c`` is the maximum Doppler shift.

    Examples
    --------
    >>> round(float(clarke_correlation(1.5, 2.4e9, 0.001)), 6)
    0.998577
    """
    from scipy import special

    doppler = speed_mps * carrier_hz / SPEED_OF_LIGHT
    return np.asarray(special.j0(2.0 * math.pi * doppler * np.asarray(dt_s, dtype=np.float64)))


class _WithMemory(Channel):
    """A channel with memory: as a plain ``Channel`` it is the law of the SNR at stage 1."""

    memory: ClassVar[bool] = True

    @property
    @abstractmethod
    def first_law(self) -> Channel:
        """The law of the SNR at stage 1."""

    @abstractmethod
    def chain(self, intervals: Sequence[float]) -> Chain:
        """The chain over ``len(intervals) + 1`` stages ``intervals`` seconds apart."""

    def below(self, threshold: float) -> float:
        return self.first_law.below(threshold)

    def at_or_above(self, threshold: float) -> float:
        return self.first_law.at_or_above(threshold)

    def partial_inv_log(self, threshold: float) -> float:
        return self.first_law.partial_inv_log(threshold)

    def expected_snr(self) -> float:
        return self.first_law.expected_snr()

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return self.first_law.sample(rng, size)


def _default_boundaries(snr: FloatArray) -> FloatArray:
    """Midpoints between consecutive state SNRs, geometric where both are positive."""
    lo, hi = snr[:-1], snr[1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        geometric = np.sqrt(lo * hi)
    return np.where(lo > 0, geometric, 0.5 * (lo + hi))


@dataclass(frozen=True)
class Markov(_WithMemory):
    """A finite-state Markov channel: one linear SNR per state and the state's transitions.

    ``transition`` is one ``K x K`` matrix for every step between stages, or a list of ``N`` of
    them (``transition[n - 1]`` takes stage ``n`` to ``n + 1``); ``initial`` is the law of the
    state at stage 1, the chain's stationary law when omitted (a single matrix only).
    ``boundaries`` (``K - 1`` SNRs) say which state an observed SNR belongs to; by default the
    midpoints (geometric) between consecutive state SNRs. A chain whose rows all equal its
    initial law is the i.i.d. :class:`~inferplan.coinference.channels.Discrete` channel.

    Examples
    --------
    >>> ch = Markov(snr=(0.5, 3.0, 12.0),
    ...             transition=((0.8, 0.2, 0.0), (0.1, 0.8, 0.1), (0.0, 0.2, 0.8)))
    >>> [round(p, 4) for p in ch.law]
    [0.25, 0.5, 0.25]
    """

    snr: tuple[float, ...]
    transition: tuple[tuple[float, ...], ...] | tuple[tuple[tuple[float, ...], ...], ...]
    initial: tuple[float, ...] | None = None
    boundaries: tuple[float, ...] | None = None
    kind: str = field(default="markov", init=False)

    def __post_init__(self) -> None:
        snr = tuple(float(s) for s in self.snr)
        if not snr:
            raise InvalidSystem("must list at least one SNR state", field="snr")
        for k, s in enumerate(snr):
            if not (math.isfinite(s) and s >= 0):
                raise InvalidSystem(
                    f"must be a non-negative finite linear SNR, got {s!r}", field=f"snr[{k}]"
                )
        for k in range(1, len(snr)):
            if snr[k] <= snr[k - 1]:
                raise InvalidSystem(
                    f"states must be listed by increasing SNR, got {snr[k - 1]!r} then {snr[k]!r}",
                    field=f"snr[{k}]",
                )
        object.__setattr__(self, "snr", snr)
        matrices = self._matrices(self.transition, len(snr))
        shared = np.ndim(self.transition) == 2
        object.__setattr__(
            self,
            "transition",
            tuple(map(tuple, matrices[0].tolist()))
            if shared
            else tuple(tuple(map(tuple, p.tolist())) for p in matrices),
        )
        if self.initial is None:
            if not shared:
                raise InvalidSystem(
                    "is required with one transition matrix per stage (the stationary law is "
                    "that of a single matrix)",
                    field="initial",
                )
        else:
            initial = _law(self.initial, "initial")
            if initial.size != len(snr):
                raise InvalidSystem(
                    f"must give one probability per state ({len(snr)}), got {initial.size}",
                    field="initial",
                )
            object.__setattr__(self, "initial", tuple(initial.tolist()))
        if self.boundaries is not None:
            cuts = tuple(float(b) for b in self.boundaries)
            if len(cuts) != len(snr) - 1:
                raise InvalidSystem(
                    f"must give K - 1 = {len(snr) - 1} SNRs between the states, got {len(cuts)}",
                    field="boundaries",
                )
            edges = (-math.inf, *cuts, math.inf)
            for k, s in enumerate(snr):
                if not edges[k] <= s < edges[k + 1]:
                    raise InvalidSystem(
                        f"state {k} (SNR {s:g}) must lie in its range [{edges[k]:g}, "
                        f"{edges[k + 1]:g})",
                        field="boundaries",
                    )
            object.__setattr__(self, "boundaries", cuts)
        _ = self.law  # a stationary law exists and is unique

    @staticmethod
    def _matrices(value: Any, k: int) -> FloatArray:
        try:
            raw = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidSystem(
                f"must be a {k} x {k} matrix or a list of them (ragged rows?)", field="transition"
            ) from None
        if raw.ndim == 2:
            raw = raw[None]
        if raw.ndim != 3 or raw.shape[1:] != (k, k):
            raise InvalidSystem(
                f"must be a {k} x {k} matrix (one row and column per state) or a list of them, "
                f"got shape {'x'.join(map(str, raw.shape))}",
                field="transition",
            )
        shared = np.ndim(value) == 2
        for t, matrix in enumerate(raw):
            where = "transition" if shared else f"transition[{t}]"
            for i, row in enumerate(matrix):
                bad = [p for p in row if not (math.isfinite(p) and 0.0 <= p <= 1.0 + _SUM_TOL)]
                if bad:
                    raise InvalidSystem(
                        f"must hold probabilities in [0, 1], got {bad[0]!r}", field=f"{where}[{i}]"
                    )
                total = math.fsum(row.tolist())
                if abs(total - 1.0) > _SUM_TOL:
                    raise InvalidSystem(
                        f"row of state {i} must sum to 1, got {total:.12g}", field=f"{where}[{i}]"
                    )
        raw = np.minimum(raw, 1.0)
        return np.asarray(raw / raw.sum(axis=2, keepdims=True), dtype=np.float64)

    @functools.cached_property
    def _stack(self) -> FloatArray:
        return self._matrices(self.transition, len(self.snr))

    @functools.cached_property
    def law(self) -> tuple[float, ...]:
        """The law of the state at stage 1 (``initial``, or the stationary law)."""
        if self.initial is not None:
            return self.initial
        return tuple(stationary_law(self._stack[0]).tolist())

    @functools.cached_property
    def first_law(self) -> Channel:
        """The law of the SNR at stage 1."""
        return Discrete(self.snr, self.law)

    def chain(self, intervals: Sequence[float]) -> Chain:
        """The chain over ``len(intervals) + 1`` stages (the intervals do not matter here)."""
        steps = len(intervals)
        stack = self._stack
        if np.ndim(self.transition) == 2:
            stack = np.broadcast_to(stack, (steps, *stack.shape[1:]))
        elif stack.shape[0] != steps:
            raise InvalidSystem(
                f"must give one matrix per step between split stages (N = {steps}), got "
                f"{stack.shape[0]}",
                field="transition",
            )
        snr = np.asarray(self.snr)
        cuts = _default_boundaries(snr) if self.boundaries is None else np.asarray(self.boundaries)
        return Chain(snr, cuts, np.asarray(self.law), np.ascontiguousarray(stack))

    def sample_paths(
        self, rng: np.random.Generator, size: int, intervals: Sequence[float]
    ) -> FloatArray:
        """``(size, len(intervals) + 1)`` SNR paths drawn from the chain."""
        chain = self.chain(intervals)
        return chain.snr[chain.sample_states(rng, size)]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "markov",
            "snr": list(self.snr),
            "transition": np.asarray(self.transition).tolist(),
        }
        if self.initial is not None:
            out["initial"] = list(self.initial)
        if self.boundaries is not None:
            out["boundaries"] = list(self.boundaries)
        return out


def fit_markov(
    samples: Sequence[float] | FloatArray,
    states: int,
    *,
    boundaries: Sequence[float] | None = None,
) -> Markov:
    """A Markov channel fitted to a recorded SNR trace (linear SNRs, one per step).

    The SNR range is cut into ``states`` intervals, of equal probability under the trace
    (its quantiles) unless ``boundaries`` gives the ``states - 1`` cuts. A sample belongs to the
    interval holding it; the transition matrix counts consecutive pairs. Each state stands for the
    SNR whose ``1 / log2(1 + gamma)`` is its samples' mean, so the upload cost of a state is
    exact. One step of the trace is one step between split stages.

    Examples
    --------
    >>> trace = [1.0, 1.2, 8.0, 9.0, 1.1, 7.5, 8.5, 1.3, 1.0, 9.5]
    >>> ch = fit_markov(trace, 2)
    >>> len(ch.snr), ch.transition[0]
    (2, (0.4, 0.6))
    """
    x = np.asarray(samples, dtype=np.float64)
    if isinstance(states, bool) or not isinstance(states, int | np.integer) or states < 1:
        raise InvalidSystem(f"must be an integer >= 1, got {states!r}", field="states")
    if x.ndim != 1 or not np.all(np.isfinite(x)) or np.any(x < 0):
        raise InvalidSystem("must be non-negative finite linear SNRs", field="trace")
    if x.size < states + 1:
        raise InvalidSystem(
            f"has {x.size} samples, too short to fit {states} states (at least {states + 1}: "
            "every state needs a sample followed by another)",
            field="trace",
        )
    if boundaries is None:
        cuts = np.quantile(x, np.arange(1, states) / states)
    else:
        cuts = np.asarray([float(b) for b in boundaries], dtype=np.float64)
        if cuts.size != states - 1:
            raise InvalidSystem(
                f"must give states - 1 = {states - 1} SNRs, got {cuts.size}", field="boundaries"
            )
        if not (np.all(np.isfinite(cuts)) and np.all(np.diff(cuts) > 0)):
            raise InvalidSystem("must be increasing finite SNRs", field="boundaries")
    label = np.searchsorted(cuts, x, side="right")
    counts = np.zeros((states, states))
    np.add.at(counts, (label[:-1], label[1:]), 1.0)
    leaving = counts.sum(axis=1)
    for k in range(states):
        if leaving[k] == 0:
            lo = "-inf" if k == 0 else f"{cuts[k - 1]:g}"
            hi = "inf" if k == states - 1 else f"{cuts[k]:g}"
            raise InvalidSystem(
                f"is too short to fit {states} states ({x.size} samples): no sample in state "
                f"{k} (SNR in [{lo}, {hi})) is followed by another; record a longer trace or "
                "fit fewer states",
                field="trace",
            )
    with np.errstate(divide="ignore"):
        g = inv_log2(x)
    mean_g = np.bincount(label, weights=g, minlength=states) / np.bincount(label, minlength=states)
    with np.errstate(divide="ignore", over="ignore"):
        snr = np.where(np.isinf(mean_g), 0.0, np.expm1(math.log(2.0) / mean_g))
    # The representative SNR of a state lies in its range up to rounding: keep it there.
    edges = np.concatenate(([-np.inf], cuts, [np.inf]))
    snr = np.clip(snr, edges[:-1], np.nextafter(edges[1:], -np.inf))
    if np.any(np.diff(snr) <= 0):
        raise InvalidSystem(
            "gives two states the same SNR (the trace has too few distinct values for "
            f"{states} states); fit fewer states",
            field="trace",
        )
    matrix = counts / leaving[:, None]
    return Markov(
        snr=tuple(snr.tolist()),
        transition=tuple(tuple(row) for row in matrix.tolist()),
        boundaries=tuple(cuts.tolist()) if states > 1 else (),
    )


def _correlations(rho: float | Sequence[float]) -> float | tuple[float, ...]:
    """``rho`` (one correlation or one per step) as floats, each checked to be in [-1, 1]."""
    single = isinstance(rho, int | float)
    values = [float(rho)] if isinstance(rho, int | float) else [float(r) for r in rho]
    for k, r in enumerate(values):
        if not (math.isfinite(r) and abs(r) <= 1.0):
            raise InvalidSystem(
                f"must be a correlation in [-1, 1] (|rho| <= 1), got {r!r}",
                field="rho" if single else f"rho[{k}]",
            )
    return values[0] if single else tuple(values)


def _per_step(rho: float | tuple[float, ...], steps: int) -> FloatArray:
    """``rho_1..rho_N``: one correlation for every step, or one given per step (checked)."""
    if isinstance(rho, float):
        return np.full(steps, rho)
    if len(rho) != steps:
        raise InvalidSystem(
            f"must give one correlation per step between split stages (N = {steps}), got "
            f"{len(rho)}",
            field="rho",
        )
    return np.asarray(rho, dtype=np.float64)


def _conditioned_gains(
    rng: np.random.Generator, centre: npt.NDArray[np.complex128], scale: float, power: float
) -> npt.NDArray[np.complex128]:
    """Exact draws of ``z ~ CN(centre, scale^2)`` conditioned on ``|z|^2 >= power``.

    ``x = 2 |z|^2 / scale^2`` is a non-central chi-square (2 degrees of freedom, non-centrality
    ``2 |centre|^2 / scale^2``): drawn by inverting its survival function above the floor
    (``floor + Exp`` without a centre, by memorylessness); where even that survival underflows
    the draw is the floor itself. Given the magnitude, the phase is von Mises about the centre's
    phase with concentration ``2 |z| |centre| / scale^2``.
    """
    if scale == 0.0:  # no spread: the centre (a previous gain, above the floor)
        return centre
    from scipy import stats

    nc = 2.0 * np.abs(centre) ** 2 / scale**2
    lo = 2.0 * power / scale**2
    u = rng.random(centre.size)
    with np.errstate(all="ignore"):
        tail = stats.ncx2.sf(lo, 2.0, np.maximum(nc, 1e-300))
        x = np.where(nc > 0, stats.ncx2.isf(u * tail, 2.0, np.maximum(nc, 1e-300)), lo)
    x = np.where(nc > 0, x, lo - 2.0 * np.log1p(-u))
    x = np.where(np.isfinite(x) & (x >= lo), x, lo)
    magnitude = np.sqrt(x / 2.0) * scale
    phase = rng.vonmises(np.angle(centre), np.sqrt(x * nc))
    return np.asarray(magnitude * np.exp(1j * phase), dtype=np.complex128)


class _Fading(_WithMemory):
    """Fading whose scattered gain is a Gauss-Markov process between split stages: what
    Rayleigh (:class:`GaussMarkov`) and Rician (:class:`RicianGaussMarkov`) fading share.

    The gain is ``h_n = m + s_n`` with a fixed line of sight ``m`` (real: phases are relative
    to it; ``m = 0`` for Rayleigh) and ``s_{n+1} = rho_n s_n + sqrt(1 - rho_n^2) w_n``,
    ``s, w ~ CN(0, sigma^2)``; ``rho_n`` is given or Clarke's ``J0(2 pi f_D dt_n)``. The SNR is
    ``mean_snr |h|^2`` and the device transmits only above the outage floor ``min_snr``.
    """

    mean_snr: float
    min_snr: float | None
    rho: float | tuple[float, ...] | None
    speed_mps: float | None
    carrier_hz: float | None
    sampler: str
    #: The system file's ``fading`` of ``kind: gauss-markov``.
    fading: ClassVar[str]

    @property
    def _los(self) -> float:
        """``|m|``, the line of sight's magnitude."""
        return 0.0

    @property
    def _var(self) -> float:
        """``sigma^2``, the scattered part's power."""
        return 1.0

    def _check_fading(self) -> None:
        """Check (and normalise) the SNRs, the correlations' source and the sampler."""
        marginal = Rayleigh(self.mean_snr, self.min_snr)  # checks both SNRs
        object.__setattr__(self, "mean_snr", marginal.mean_snr)
        object.__setattr__(self, "min_snr", marginal.min_snr)
        clarke = (self.speed_mps, self.carrier_hz)
        if (self.rho is None) == all(v is None for v in clarke):
            raise InvalidSystem(
                "give either 'rho' or both 'speed_mps' and 'carrier_hz' (Clarke's model)",
                field="rho",
            )
        if self.rho is not None:
            object.__setattr__(self, "rho", _correlations(self.rho))
        else:
            for name, value, top in (
                ("speed_mps", self.speed_mps, _MAX_SPEED),
                ("carrier_hz", self.carrier_hz, _MAX_CARRIER),
            ):
                if value is None:
                    raise InvalidSystem(
                        "is required with the other of speed_mps and carrier_hz", field=name
                    )
                v = float(value)
                if not (math.isfinite(v) and 0.0 <= v <= top and (v > 0 or name == "speed_mps")):
                    raise InvalidSystem(
                        f"must be a {'non-negative' if name == 'speed_mps' else 'positive'} "
                        f"number up to {top:g}, got {value!r}",
                        field=name,
                    )
                object.__setattr__(self, name, v)
        if self.sampler not in _SAMPLERS:
            raise InvalidSystem(
                f"must be one of {', '.join(_SAMPLERS)}, got {self.sampler!r}", field="sampler"
            )
        if self.sampler == "jakes" and self.rho is not None:
            raise InvalidSystem(
                "jakes draws Clarke's model: give speed_mps and carrier_hz, not rho",
                field="sampler",
            )

    @property
    def floor(self) -> float:
        """The outage floor (0 without one)."""
        return self.min_snr or 0.0

    def correlations(self, intervals: Sequence[float]) -> FloatArray:
        """``rho_1..rho_N`` for the times ``dt_1..dt_N`` between consecutive stages."""
        steps = len(intervals)
        if self.rho is None:
            assert self.speed_mps is not None and self.carrier_hz is not None
            return clarke_correlation(self.speed_mps, self.carrier_hz, intervals)
        return _per_step(self.rho, steps)

    def _fading_dict(self) -> dict[str, Any]:
        """The floor, the correlations' source and the sampler in the system-file format."""
        out: dict[str, Any] = {}
        if self.min_snr is not None:
            out["min_snr"] = self.min_snr
        if self.rho is not None:
            out["rho"] = self.rho if isinstance(self.rho, float) else list(self.rho)
        else:
            out["speed_mps"] = self.speed_mps
            out["carrier_hz"] = self.carrier_hz
        if self.sampler != "recursion":
            out["sampler"] = self.sampler
        return out

    def _above_floor(
        self, rng: np.random.Generator, centre: npt.NDArray[np.complex128], scale: float
    ) -> npt.NDArray[np.complex128]:
        """Draws of ``centre + scale w``, ``w ~ CN(0, 1)``, conditioned on an SNR at or above
        the floor: each repeated until it lands there, and those still below after
        ``_REJECTION_ROUNDS`` draws (a floor far out in the tail) drawn from the conditional
        law itself (:func:`_conditioned_gains`)."""
        mean, floor = self.mean_snr, self.floor
        out = np.empty_like(centre)
        todo = np.arange(centre.size)
        for _ in range(_REJECTION_ROUNDS):
            if not todo.size:
                return out
            w = (rng.standard_normal(todo.size) + 1j * rng.standard_normal(todo.size)) / math.sqrt(
                2
            )
            cand = centre[todo] + scale * w
            ok = mean * np.abs(cand) ** 2 >= floor
            out[todo[ok]] = cand[ok]
            todo = todo[~ok]
        if todo.size:
            out[todo] = _conditioned_gains(rng, centre[todo], scale, floor / mean)
        return out

    def _first_gains(self, rng: np.random.Generator, size: int) -> npt.NDArray[np.complex128]:
        """``size`` gains at stage 1: the stationary law above the floor."""
        return self._above_floor(
            rng, np.full(size, self._los, dtype=np.complex128), math.sqrt(self._var)
        )

    def sample_gains(
        self, rng: np.random.Generator, size: int, intervals: Sequence[float]
    ) -> npt.NDArray[np.complex128]:
        """``(size, len(intervals) + 1)`` complex gains ``h`` of the continuous process.

        ``recursion``: the recursion on the scattered part, each step redrawn until it lands
        above the floor. ``jakes``: the scattered part is ``sigma sum_k exp(j (2 pi f_D t cos
        a_k + p_k)) / sqrt(32)`` with 32 random arrival angles ``a_k`` and phases ``p_k`` per
        inference, whose correlation is ``J0(2 pi f_D tau)`` at every lag, observed at the
        stages' times, plus the fixed line of sight; a path that falls below the floor at some
        stage is redrawn whole (the paths are conditioned on staying above it, where the chain
        conditions each step).
        """
        if self.sampler == "jakes":
            return self._jakes_gains(rng, size, intervals)
        rhos = self.correlations(intervals)
        los, sd = self._los, math.sqrt(self._var)
        out = np.empty((size, len(rhos) + 1), dtype=np.complex128)
        out[:, 0] = self._first_gains(rng, size)
        for n, rho in enumerate(rhos, start=1):
            centre = los + rho * (out[:, n - 1] - los)
            out[:, n] = self._above_floor(rng, centre, math.sqrt(max(0.0, 1.0 - rho * rho)) * sd)
        return out

    def _jakes_gains(
        self, rng: np.random.Generator, size: int, intervals: Sequence[float]
    ) -> npt.NDArray[np.complex128]:
        assert self.speed_mps is not None and self.carrier_hz is not None
        doppler = self.speed_mps * self.carrier_hz / SPEED_OF_LIGHT
        times = np.concatenate(([0.0], np.cumsum(np.asarray(intervals, dtype=np.float64))))
        los, sd = self._los, math.sqrt(self._var / _SINUSOIDS)
        out = np.empty((size, times.size), dtype=np.complex128)
        todo = np.arange(size)
        while todo.size:
            angle = 2.0 * math.pi * rng.random((todo.size, 1, _SINUSOIDS))
            phase = 2.0 * math.pi * rng.random((todo.size, 1, _SINUSOIDS))
            t = times[None, :, None]
            scattered = np.exp(1j * (2.0 * math.pi * doppler * t * np.cos(angle) + phase))
            h = los + sd * scattered.sum(axis=2)
            ok = np.all(self.mean_snr * np.abs(h) ** 2 >= self.floor, axis=1)
            out[todo[ok]] = h[ok]
            todo = todo[~ok]
        return out

    def sample_paths(
        self, rng: np.random.Generator, size: int, intervals: Sequence[float]
    ) -> FloatArray:
        """``(size, len(intervals) + 1)`` SNR paths ``mean_snr |h|^2`` of the continuous
        process (:meth:`sample_gains`)."""
        gains = self.sample_gains(rng, size, intervals)
        return np.asarray(self.mean_snr * np.abs(gains) ** 2, dtype=np.float64)


@dataclass(frozen=True)
class GaussMarkov(_Fading):
    """Rayleigh fading whose complex gain is a Gauss-Markov process between split stages.

    ``h_{n+1} = rho_n h_n + sqrt(1 - rho_n^2) w_n`` with ``h, w ~ CN(0, 1)`` and SNR
    ``mean_snr |h|^2`` (exponential at every stage). ``rho`` is one correlation for every step or
    ``N`` of them; or ``speed_mps`` and ``carrier_hz`` give Clarke's ``rho_n = J0(2 pi f_D dt_n)``
    with ``f_D = v f_c / c`` and ``dt_n`` the device's compute time of layer ``n`` (the time
    between the observations at stages ``n`` and ``n + 1``). As for :class:`Rayleigh`, the
    expected upload cost is finite only with an outage floor ``min_snr``: the device transmits
    only above it, so the SNR at every stage is conditioned on ``gamma >= min_snr`` (stage 1:
    ``min_snr + Exp(mean_snr)``; later stages: the Gauss-Markov step conditioned on landing above
    the floor). ``rho = 0`` is i.i.d. truncated Rayleigh fading.

    The solvers see it as a chain on ``grid`` SNR cells of equal probability at stage 1
    (:meth:`chain`); docs/coinference.md gives the accuracy of the default grid. The simulator
    draws the process itself: ``sampler="recursion"`` the Gauss-Markov recursion, or (Clarke's
    model only) ``sampler="jakes"`` a sum of sinusoids whose correlation at every lag ``tau``
    is Clarke's ``J0(2 pi f_D tau)``, not only between consecutive stages (see
    :meth:`sample_gains`).

    Examples
    --------
    >>> ch = GaussMarkov(mean_snr=10.0, min_snr=0.25, rho=0.9)
    >>> chain = ch.chain([1e-3] * 4)
    >>> chain.states, chain.stages
    (64, 5)
    """

    mean_snr: float
    min_snr: float | None = None
    rho: float | tuple[float, ...] | None = None
    speed_mps: float | None = None
    carrier_hz: float | None = None
    grid: int = _DEFAULT_GRID
    sampler: str = "recursion"
    kind: str = field(default="gauss-markov", init=False)
    fading: ClassVar[str] = "rayleigh"

    def __post_init__(self) -> None:
        self._check_fading()
        grid = self.grid
        if isinstance(grid, bool) or not isinstance(grid, int | np.integer):
            raise InvalidSystem(f"must be an integer, got {grid!r}", field="grid")
        if not 2 <= grid <= _MAX_GRID:
            raise InvalidSystem(f"must be in 2..{_MAX_GRID}, got {grid}", field="grid")
        object.__setattr__(self, "grid", int(grid))

    @functools.cached_property
    def first_law(self) -> Channel:
        """The law of the SNR at stage 1 (and at every stage without a floor)."""
        return Rayleigh(self.mean_snr, self.min_snr)

    def _first_gains(self, rng: np.random.Generator, size: int) -> npt.NDArray[np.complex128]:
        # Exactly the floor plus an exponential (memorylessness), no draw repeated.
        power = self.floor / self.mean_snr + rng.exponential(1.0, size)
        return np.asarray(np.sqrt(power) * np.exp(2j * math.pi * rng.random(size)))

    @functools.cached_property
    def _cells(self) -> tuple[FloatArray, FloatArray]:
        """Cell edges (``grid + 1``, the last ``inf``) and each cell's representative SNR: the
        one whose ``1 / log2(1 + gamma)`` is the cell's conditional mean (exact upload cost)."""
        g, mean, floor = self.grid, self.mean_snr, self.floor
        edges = floor - mean * np.log1p(-np.arange(g) / g)
        edges = np.append(edges, np.inf)
        law = self.first_law
        if self.min_snr is None:  # the bottom cell's cost is infinite: System refuses this
            tails = np.array([math.inf] + [law.partial_inv_log(float(e)) for e in edges[1:-1]])
        else:
            tails = np.array([law.partial_inv_log(float(e)) for e in edges[:-1]])
        tails = np.append(tails, 0.0)
        with np.errstate(invalid="ignore"):
            mean_g = g * (tails[:-1] - tails[1:])
        mean_g[0] = mean_g[0] if math.isfinite(mean_g[0]) else math.inf
        with np.errstate(divide="ignore"):
            snr = np.expm1(math.log(2.0) / mean_g)
        snr = np.clip(snr, edges[:-1], np.nextafter(edges[1:], -np.inf))
        return edges, snr

    def chain(self, intervals: Sequence[float]) -> Chain:
        """The Gauss-Markov channel on ``grid`` cells of equal probability at stage 1.

        From the representative SNR ``x`` of cell ``i``, the SNR one step on is
        ``mean_snr (1 - r) / 2 * chi'^2_2(2 r x / (mean_snr (1 - r)))`` with ``r = rho^2``
        (a non-central chi-square with two degrees of freedom); ``P[i, j]`` is its probability of
        cell ``j``, conditioned on landing above the floor.
        """
        edges, snr = self._cells
        rhos = self.correlations(intervals)
        return Chain(
            snr,
            edges[1:-1].copy(),
            np.full(self.grid, 1.0 / self.grid),
            np.stack([self._step(float(r)) for r in rhos]) if len(rhos) else np.empty((0,) * 3),
        )

    @functools.lru_cache(maxsize=256)  # noqa: B019 - a frozen value; steps repeat across stages
    def _step(self, rho: float) -> FloatArray:
        from scipy import special

        edges, snr = self._cells
        g, mean = self.grid, self.mean_snr
        r = rho * rho
        if r >= 1.0:
            return np.eye(g)
        scale = mean * (1.0 - r) / 2.0
        x = 2.0 * r * snr / (mean * (1.0 - r))
        with np.errstate(invalid="ignore"):
            cdf = special.chndtr(edges[None, :-1] / scale, 2.0, x[:, None])
        cdf = np.append(cdf, np.ones((g, 1)), axis=1)
        cells = np.maximum(np.diff(cdf, axis=1), 0.0)
        total = cells.sum(axis=1, keepdims=True)
        # A row the quadrature cannot resolve (all its mass in one far cell): stay put.
        lost = ~(total[:, 0] > 0)
        cells[lost] = np.eye(g)[lost]
        total[lost] = 1.0
        return np.asarray(cells / total, dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "gauss-markov", "mean_snr": self.mean_snr}
        out.update(self._fading_dict())
        if self.grid != _DEFAULT_GRID:
            out["grid"] = self.grid
        return out


_RICIAN_QUADRATURE = 8  # Gauss-Legendre nodes per cell side (a cell's SNR)
_RICIAN_TAIL_SD = 12.0  # the outer ring's quadrature ends this many scattered sd beyond its edge
_RICIAN_RADII = 32  # the default grid: docs/coinference.md gives its accuracy
_RICIAN_PHASES = 16
_RICIAN_MIN_ABOVE = 1e-200  # the least stationary probability above the floor the grid takes
# A row of a step (and the initial law) is within this of the exact cell masses in total
# absolute error, relative to its mass above the floor, plus rounding (docs/coinference.md).
_RICIAN_TOL = 1e-12
_RICIAN_LEAST_TOL = 1e-300  # the tolerance of a source whose mass above the floor is below that
_RICIAN_CHUNK_NUMBERS = 2**16  # quadrature numbers held at once: a chunk stays in cache
# _modes tabulates the ray function's Fourier coefficients at z = 2^(k / 4) up to this bin and
# extends them beyond it as a Gaussian's.
_RICIAN_MODES_TOP_BIN = 64


@functools.lru_cache(maxsize=512)
def _mode_tail(z_bin: int, digits: int) -> FloatArray:
    """``tail[M] = 4 sum_{m > M} rho_m`` at ``z = 2^(z_bin / 4)``, the bound :func:`_modes`
    inverts, far enough for ``tail`` to fall below ``10^-digits`` (the coefficients fall as a
    Gaussian's, ``exp(-m^2 / (8 z))``, then faster)."""
    from scipy import special

    z = 2.0 ** (z_bin / 4.0)
    m = np.arange(int(math.sqrt(8.0 * z * digits * math.log(10.0))) + digits + 20.0)
    scale = special.ive(-0.5, z) + special.ive(0.5, z)
    rho = (special.ive((m - 1.0) / 2.0, z) + special.ive((m + 1.0) / 2.0, z)) / scale
    tail = 4.0 * np.cumsum(rho[::-1])[::-1]
    return np.asarray(np.append(tail[1:], 0.0), dtype=np.float64)


def _modes(z: FloatArray, tol: FloatArray) -> npt.NDArray[np.int64]:
    """The fewest Fourier modes ``M`` per source for which the trapezoidal rule on ``2 M + 1``
    rays round the circle integrates every cell within ``tol`` (in total over the cells, as a
    fraction of the bump ``CN(c, var)``; ``z = |c|^2 / (2 var)``).

    The ray function ``D(p)`` (the bump's mass along the ray of phase ``p`` about the centre's)
    has Fourier coefficients ``d_m = d_0 rho_m`` with ``rho_m = (I_{(m-1)/2}(z) +
    I_{(m+1)/2}(z)) / (I_{-1/2}(z) + I_{1/2}(z))``, all positive; a ring's ray function, part
    of ``D``, has positive coefficients summing over the rings to at most ``d_m``. The
    interpolant of ``2 M + 1`` rays loses the modes beyond ``M`` and aliases them once, so every
    cell errs by at most twice its width times their sum: ``4 sum_{m > M} rho_m`` over all
    cells. ``rho_m`` grows with ``z``, which is rounded up to the table's ``2^(k / 4)``.
    """
    with np.errstate(divide="ignore"):
        bins = np.ceil(4.0 * np.log2(np.maximum(z, 2.0**-80))).astype(np.int64)
    beyond = np.maximum(bins - _RICIAN_MODES_TOP_BIN, 0)
    bins = np.minimum(bins, _RICIAN_MODES_TOP_BIN)
    modes = np.empty(z.shape, dtype=np.int64)
    for b in np.unique(bins):
        at = bins == b
        # A table to 1e-60 serves every row but those far below the floor (the deep table).
        tail = _mode_tail(int(b), 60 if tol[at].min() >= 1e-55 else 310)
        modes[at] = np.searchsorted(-tail, -tol[at])
    # Beyond the table the coefficients are a Gaussian's, exp(-m^2 / (8 z)), whose tail sums
    # grow as sqrt(z): M^2 / (8 z) is the top's plus ln(z / z_top) / 2 (above the exact M up
    # to z = 2^24, the tests check).
    grow = 2.0 ** (beyond / 4.0)  # z / z_top, z at the bin's top
    top = modes * modes / (8.0 * 2.0 ** (_RICIAN_MODES_TOP_BIN / 4.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(beyond > 0, np.sqrt(grow * (1.0 + np.log(grow) / (2.0 * top))), 1.0)
    return np.asarray(np.ceil(modes * scale), dtype=np.int64)


@functools.lru_cache(maxsize=256)
def _cosine_transform(rays: int) -> FloatArray:
    """``(rays + 1, rays + 1)``: from ``f(p h)``, ``p = 0..rays`` (an even function sampled at
    ``2 rays + 1`` points round its period), to ``c_m``, ``f = c_0 + 2 sum_m c_m cos(m ...)``;
    over ``2 pi`` (the samples are ``2 pi`` times the density)."""
    points = 2 * rays + 1
    p = np.arange(rays + 1)
    matrix = np.cos(2.0 * math.pi / points * np.outer(p, p))
    matrix[1:] *= 2.0
    return np.asarray(matrix / (2.0 * math.pi * points), dtype=np.float64)


def _phase_edges(phases: int) -> FloatArray:
    """``phases + 1`` phases in ``[-pi, pi]``: the edges of equal sectors about phase 0."""
    return np.linspace(-math.pi, math.pi, phases + 1)


@functools.lru_cache(maxsize=256)
def _edge_waves(modes: int, phases: int) -> tuple[FloatArray, FloatArray]:
    """``(2 sin(m x) / m, 2 cos(m x) / m)`` for ``m = 1..modes - 1`` (rows) at the phase edges
    ``x`` (columns)."""
    m = np.arange(1, modes)[:, None]
    x = m * _phase_edges(phases)
    return np.asarray(2.0 * np.sin(x) / m), np.asarray(2.0 * np.cos(x) / m)


@functools.lru_cache(maxsize=32)
def _gauss_legendre(nodes: int) -> tuple[FloatArray, FloatArray]:
    """Gauss-Legendre nodes and weights on [-1, 1] (an eigenproblem of size ``nodes``: kept)."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    return np.asarray(x, dtype=np.float64), np.asarray(w, dtype=np.float64)


@dataclass(frozen=True)
class RicianGaussMarkov(_Fading):
    """Rician fading with memory, observed as the complex channel estimate at every stage.

    The gain is ``h_n = m + s_n``: a fixed line-of-sight part ``m`` and a scattered part with
    ``s_{n+1} = rho_n s_n + sqrt(1 - rho_n^2) w_n``, ``s, w ~ CN(0, sigma^2)``, normalised so
    that ``E|h|^2 = 1`` (``|m|^2 = K / (K + 1)``, ``sigma^2 = 1 / (K + 1)``, ``K = k_factor``);
    the SNR is ``mean_snr |h|^2``. ``rho`` is one correlation for every step or ``N`` of them,
    or ``speed_mps`` and ``carrier_hz`` give Clarke's ``rho_n = J0(2 pi f_D dt_n)`` as for
    :class:`GaussMarkov`. The SNR alone is not a Markov process (its next value depends on the
    phase of ``h_n - m``), but ``h_n`` is: given ``h_n``, ``h_{n+1}`` is complex Gaussian with
    mean ``m + rho_n (h_n - m)`` and variance ``(1 - rho_n^2) sigma^2``. The device observes
    ``h_n`` (its channel estimate: magnitude and phase relative to the line of sight), so the
    stopping problem on ``h`` is exact and its rule is a threshold curve per stage (a magnitude
    for every phase). As for :class:`GaussMarkov` the device transmits only above the outage
    floor ``min_snr``, which is required: stage 1 is the stationary law conditioned on
    ``gamma >= min_snr`` and each step is conditioned on landing above it. ``k_factor = 0`` is
    :class:`GaussMarkov`.

    The solvers see it as a :class:`Chain` on a polar grid (:meth:`chain`) of ``radii``
    magnitude rings (equiprobable at stage 1) times ``phases`` sectors, state ``k = ring *
    phases + sector``. Each cell stands for the SNR whose ``1 / log2(1 + gamma)`` is the cell's
    mean at stage 1 (exact upload cost); a step's probability of a cell is exact along the
    radius and spectrally accurate in the phase, each row within 1e-12 of the exact masses.
    docs/coinference.md gives the grid's accuracy. The
    simulator draws the process itself (:meth:`~_Fading.sample_gains`: the recursion, or
    Jakes' sinusoids for Clarke's spectrum plus the line of sight).

    Examples
    --------
    >>> ch = RicianGaussMarkov(mean_snr=10.0, k_factor=3.0, min_snr=0.25, rho=0.9)
    >>> ch.states, round(float(ch.initial.sum()), 12)
    (512, 1.0)
    >>> ch.chain([1e-3] * 2).transitions.shape
    (2, 512, 512)
    """

    mean_snr: float
    k_factor: float
    min_snr: float | None = None
    rho: float | tuple[float, ...] | None = None
    speed_mps: float | None = None
    carrier_hz: float | None = None
    radii: int = _RICIAN_RADII
    phases: int = _RICIAN_PHASES
    sampler: str = "recursion"
    kind: str = field(default="gauss-markov", init=False)
    fading: ClassVar[str] = "rician"

    def __post_init__(self) -> None:
        self._check_fading()
        if self.min_snr is None:
            raise DivergentCost(
                "is required with Rician fading: without an outage floor the SNR's density is "
                "positive at 0 and E[1/log2(1+SNR)] is infinite (an upload at SNR near 0 never "
                "ends)",
                field="min_snr",
            )
        k = self.k_factor
        if (
            isinstance(k, bool)
            or not isinstance(k, int | float)
            or not (math.isfinite(k) and 0.0 <= k <= 1e6)
        ):
            raise InvalidSystem(
                f"must be a K-factor (line-of-sight to scattered power) in [0, 1e6], got {k!r}",
                field="k_factor",
            )
        object.__setattr__(self, "k_factor", float(k))
        for name, top in (("radii", _MAX_GRID), ("phases", 256)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or not 1 <= v <= top:
                raise InvalidSystem(f"must be an integer in 1..{top}, got {v!r}", field=name)
            object.__setattr__(self, name, int(v))
        if self.radii * self.phases > _MAX_GRID:
            raise InvalidSystem(
                f"radii x phases must be at most {_MAX_GRID} cells, got {self.radii * self.phases}",
                field="phases",
            )

        if not self._above >= _RICIAN_MIN_ABOVE:
            raise InvalidSystem(
                f"leaves P(SNR >= min_snr) = {self._above:.3g} at stage 1 with this mean SNR and "
                f"K-factor, below {_RICIAN_MIN_ABOVE:g}: beyond what the grid resolves; lower "
                "min_snr or raise mean_snr",
                field="min_snr",
            )

    @functools.cached_property
    def _above(self) -> float:
        """``P(gamma >= min_snr)`` under the stationary law (before conditioning on it)."""
        from scipy import stats

        x = 2.0 * (self.floor / self.mean_snr) / self._var
        return float(stats.ncx2.sf(x, 2.0, 2.0 * self.k_factor))

    @property
    def states(self) -> int:
        """The grid's cells, ``radii * phases`` (state ``k = ring * phases + sector``)."""
        return self.radii * self.phases

    @functools.cached_property
    def first_law(self) -> Channel:
        """The law of the SNR at stage 1, on the grid: each cell's SNR with its probability
        (the upload cost's expectation is exact, as for every cell)."""
        return Discrete(tuple(self.snr.tolist()), tuple(self.initial.tolist()))

    @functools.cached_property
    def boundaries(self) -> FloatArray:
        """``radii - 1`` SNRs between the rings."""
        return np.asarray(self.mean_snr * self.ring_edges[1:-1] ** 2, dtype=np.float64)

    def chain(self, intervals: Sequence[float]) -> Chain:
        """The grid's chain over ``len(intervals) + 1`` stages: states are (ring, sector)
        cells, ``phases`` sectors per ring, one :meth:`step` per correlation."""
        rhos = self.correlations(intervals)
        steps = np.empty((len(rhos), self.states, self.states))
        first: dict[float, int] = {}  # layers of equal compute time repeat a step
        for n, rho in enumerate(rhos.tolist()):
            if rho in first:
                steps[n] = steps[first[rho]]
            else:
                first[rho] = n
                self._step(rho, steps[n])
        return Chain(self.snr, self.boundaries, self.initial, steps, self.phases)

    def sample_observations(
        self, rng: np.random.Generator, size: int, intervals: Sequence[float]
    ) -> tuple[FloatArray, FloatArray | None]:
        """``(size, len(intervals) + 1)`` SNR paths and the gain's phase along them (radians,
        relative to the line of sight): what the device observes."""
        gains = self.sample_gains(rng, size, intervals)
        snr = np.asarray(self.mean_snr * np.abs(gains) ** 2, dtype=np.float64)
        return snr, np.asarray(np.angle(gains), dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "gauss-markov",
            "fading": self.fading,
            "mean_snr": self.mean_snr,
            "k_factor": self.k_factor,
        }
        out.update(self._fading_dict())
        if self.radii != _RICIAN_RADII:
            out["radii"] = self.radii
        if self.phases != _RICIAN_PHASES:
            out["phases"] = self.phases
        return out

    @property
    def _los(self) -> float:
        """``|m|``, the line of sight's magnitude (``m`` is real: phases are relative to it)."""
        return math.sqrt(self.k_factor / (self.k_factor + 1.0))

    @property
    def _var(self) -> float:
        """``sigma^2``, the scattered part's power."""
        return 1.0 / (self.k_factor + 1.0)

    @functools.cached_property
    def ring_edges(self) -> FloatArray:
        """``radii + 1`` magnitudes of ``h``: the floor's, the rings' edges, then ``inf``."""
        from scipy import stats

        # 2 |h|^2 / sigma^2 is a non-central chi-square, 2 dof, non-centrality 2 K.
        # Inverted from the survival function, which resolves a floor far in the tail.
        nc, var = 2.0 * self.k_factor, self._var
        q = self._above * (1.0 - np.arange(1, self.radii) / self.radii)
        with warnings.catch_warnings():  # boost's intermediate overflow at a huge K; finite
            warnings.simplefilter("ignore", RuntimeWarning)
            inner = np.sqrt(stats.ncx2.isf(q, 2.0, nc) * var / 2.0)
        floor = math.sqrt(self.floor / self.mean_snr)
        return np.concatenate(([floor], np.maximum(inner, floor), [np.inf]))

    @functools.cached_property
    def phase_edges(self) -> FloatArray:
        """``phases + 1`` phases of ``h`` in ``[-pi, pi]``."""
        return _phase_edges(self.phases)

    def state_of(self, h: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The cell of each observed gain ``h`` (complex, the line of sight's phase 0)."""
        g = np.asarray(h, dtype=np.complex128)
        ring = np.searchsorted(self.boundaries, self.mean_snr * np.abs(g) ** 2, side="right")
        return np.asarray(ring * self.phases + phase_sector(np.angle(g), self.phases))

    def _cell_mass(self, centre: FloatArray, var: float) -> FloatArray:
        """``(len(centre), K)``: the mass of ``CN(centre, var)`` in each cell, each source's
        row within ``_RICIAN_TOL`` of the exact integral in total (relative to the row's mass
        above the floor; docs/coinference.md, "How a step is integrated").

        Along a ray of phase ``p`` the mass of a ring has a closed form in ``erfc``. In the
        phase, the rays are equispaced about the centre's phase and the sectors take the
        integrals of their trigonometric interpolant (the trapezoidal rule, spectrally accurate
        for a periodic analytic integrand; the rays are symmetric about the centre, so only one
        side is evaluated). :func:`_modes` bounds the spacing; the rays and rings are confined
        to the disc holding all but ``tol / 2`` of the bump (the rest, exactly ``exp(-t^2)``,
        is dropped), the sectors beyond it get 0.
        """
        from scipy import special

        n, radii = len(centre), self.radii
        size, angle = np.abs(centre), np.angle(centre)
        sd = math.sqrt(var)
        floor = float(self.ring_edges[0])
        # The half-plane beyond the tangent to the floor's circle facing the centre lies above
        # the floor: its mass (at least 1/2 for a centre above the floor) bounds the row's mass
        # from below and scales the tolerance.
        above = 0.5 * special.erfc((floor - size) / sd)
        tol = np.maximum(_RICIAN_TOL * above, _RICIAN_LEAST_TOL)
        reach = np.sqrt(np.log(2.0 / tol)) * sd  # |z - c| > reach holds tol / 2 of the bump
        modes = _modes(size * size / (2.0 * var), tol / 2.0)
        spacing = 2.0 * math.pi / (2 * modes + 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            spread = np.where(size > reach, np.arcsin(np.minimum(reach / size, 1.0)), np.inf)
        rays = np.minimum(modes, np.ceil(spread / spacing) + 1).astype(np.int64)
        edges = self.ring_edges
        first = np.clip(np.searchsorted(edges, size - reach, side="right") - 1, 0, radii - 1)
        last = np.clip(np.searchsorted(edges, size + reach, side="left") - 1, first, radii - 1)
        rings = last - first + 1
        mass = np.zeros((n, self.states))
        # Sources in order of their work, in chunks padded to the chunk's most rays and rings
        # (a ring window moved inwards where it would pass the outer ring): a chunk holds at
        # most _RICIAN_CHUNK_NUMBERS numbers at once, which keeps it in cache.
        work = (rays + 1) * (rings + 1)
        windowed = rays < modes
        order = np.lexsort((work, windowed))
        start = 0
        while start < n:
            # the most sources from start, of one kind, whose padded chunk holds at most that
            # many numbers
            kind = int(np.searchsorted(windowed[order], windowed[order[start]], "right"))
            padded = np.arange(1, kind - start + 1) * work[order[start:kind]]
            stop = start + max(1, int(np.searchsorted(padded, _RICIAN_CHUNK_NUMBERS, "right")))
            batch = order[start:stop]
            wide = int(rings[batch].max())
            ring0 = np.minimum(first[batch], radii - wide)
            window = self._ray_sectors(
                size[batch], angle[batch], var, modes[batch], int(rays[batch].max()),
                ring0, wide,
            )  # fmt: skip
            for first_ring in np.unique(ring0):  # a window's cells are consecutive states
                at = ring0 == first_ring
                cells = slice(first_ring * self.phases, (first_ring + wide) * self.phases)
                mass[batch[at], cells] = window[at].reshape(int(at.sum()), -1)
            start = stop
        return mass

    def _ray_sectors(
        self,
        size: FloatArray,
        angle: FloatArray,
        var: float,
        modes: npt.NDArray[np.int64],
        rays: int,
        ring0: npt.NDArray[np.int64],
        rings: int,
    ) -> FloatArray:
        """``(S, rings, phases)``: the mass of ``CN(size e^{j angle}, var)`` in each sector of
        ``rings`` rings from ``ring0``, from ``rays + 1`` rays on one side of the centre's
        phase, ``2 pi / (2 modes + 1)`` apart (a source whose window reaches round the circle
        takes ``2 rays + 1`` rays around it instead)."""
        from scipy import special

        sd = math.sqrt(var)
        full = modes <= rays
        points = 2 * rays + 1
        spacing = 2.0 * math.pi / np.where(full, points, 2 * modes + 1)
        p = np.arange(rays + 1)
        psi = spacing[:, None] * p  # (S, A)
        mu = size[:, None] * np.cos(psi)
        across = (size[:, None] * np.sin(psi)) ** 2 / var
        # Along the ray of phase psi about the centre, with u = (r - mu) / sd and side =
        # exp(-(size sin psi)^2 / var), the density r exp(-|r e^{j psi} - size|^2 / var) /
        # (pi var) integrates from edge u_lo to edge u_hi to side (var / 2 (e^{-u_lo^2} -
        # e^{-u_hi^2}) + sqrt(pi var) / 2 mu (erfc u_lo - erfc u_hi)) / (pi var): the value
        # side (e^{-u^2} + sqrt(pi) / sd mu erfc u) at the lower edge less that at the upper,
        # over 2 pi. As erfc, a ring beyond the bump's centre keeps its relative precision
        # however far out (erf near 1 would not). Short of the centre erfc is near 2, exact
        # to 1e-16 of the bump: there the centre is above the floor, which holds at least half
        # the bump. Computed in place.
        r = self.ring_edges[ring0[:, None] + np.arange(rings + 1)] / sd  # (S, E)
        u = r[:, :, None] - (mu / sd)[:, None, :]  # (S, E, A); inf at the outer edge
        edge = special.erfc(u)
        edge *= ((math.sqrt(math.pi) / sd) * mu * np.exp(-across))[:, None, :]
        np.square(u, out=u)
        edge += np.exp(np.subtract(-across[:, None, :], u, out=u), out=u)
        ray = np.subtract(edge[:, :-1], edge[:, 1:])  # (S, rings, A)
        transform = _cosine_transform(rays)  # rays -> cosine coefficients
        if full.all():
            cumulative = np.matmul(ray, np.matmul(transform, self._around(angle, rays + 1)))
        else:
            cumulative = self._within(np.matmul(ray, transform), angle, spacing * points, full)
        return np.asarray(np.maximum(np.diff(cumulative, axis=2), 0.0), dtype=np.float64)

    def _around(self, angle: FloatArray, modes: int) -> FloatArray:
        """``(S, modes, phases + 1)``: the integral of each term of a cosine series in the phase
        about ``angle`` (``1``, then ``2 cos(m x)``) from the centre's phase to each phase edge:
        ``x``, then ``2 sin(m x) / m``, with ``sin(m (edge - angle))`` expanded so that the
        edges' sines are one table."""
        sines, cosines = _edge_waves(modes, self.phases)
        # e^{j m angle} by successive products (one rotation each: exact to m ulps).
        turn = np.cumprod(
            np.broadcast_to(np.exp(1j * angle)[:, None], (len(angle), modes - 1)), axis=1
        )
        primitive = np.empty((len(angle), modes, len(self.phase_edges)))
        primitive[:, 0] = self.phase_edges[None, :] - angle[:, None]
        wave = primitive[:, 1:]
        np.multiply(turn.real[:, :, None], sines, out=wave)
        wave -= turn.imag[:, :, None] * cosines
        return primitive

    def _within(
        self, coef: FloatArray, angle: FloatArray, period: FloatArray, full: npt.NDArray[np.bool_]
    ) -> FloatArray:
        """``(S, rings, phases + 1)``: the integral of the cosine series ``coef`` (``(S, rings,
        modes)``) of period ``period`` (``2 pi`` where ``full``) about ``angle`` from the
        centre's phase to each phase edge, for series that hold a bump's window: flat beyond
        it, each edge taken at its phase in ``[-pi, pi)`` about the centre plus the whole
        integral for each turn round the circle. The sines are evaluated only at the edges
        within the window (the others are at its ends, where they vanish)."""
        offset = self.phase_edges[None, :] - angle[:, None]
        turns = np.floor(offset / (2.0 * math.pi) + 0.5)
        half = np.where(full, math.pi, 0.5 * period)[:, None]
        x = np.clip(offset - 2.0 * math.pi * turns, -half, half)  # (S, E)
        cumulative = coef[:, :, :1] * (x + period[:, None] * turns)[:, None, :]
        inside = int((np.abs(x) < half).sum(axis=1).max())
        if inside:
            edge = np.argsort(np.abs(x), axis=1)[:, :inside]  # the window's edges (and ends)
            near = np.take_along_axis(x, edge, axis=1)
            m = np.arange(1, coef.shape[2])
            freq = (2.0 * math.pi / period)[:, None] * m  # (S, modes - 1)
            wave = np.sin(freq[:, :, None] * near[:, None, :]) * (2.0 / freq)[:, :, None]
            source = np.arange(len(angle))[:, None, None]
            cumulative[source, np.arange(coef.shape[1])[:, None], edge[:, None, :]] += np.matmul(
                coef[:, :, 1:], wave
            )
        return np.asarray(cumulative, dtype=np.float64)

    @functools.cached_property
    def initial(self) -> FloatArray:
        """``(K,)``: the law of the cell at stage 1 (above the floor)."""
        mass = self._cell_mass(np.array([self._los]), self._var)[0]
        total = float(mass.sum())
        # A backstop: the cells resolve their masses down to 1e-300 (differences of erfc) and
        # the floor's check passes 1e-200 of the stationary law above it, so all cells round
        # to 0 only where scipy's non-central chi-square and the cells disagree by 1e100.
        if not total > 0:
            raise InvalidSystem(
                f"leaves P(SNR >= min_snr) = {self._above:.3g} at stage 1, which the grid's "
                "cells lose to rounding: lower min_snr or raise mean_snr",
                field="min_snr",
            )
        return np.asarray(mass / total, dtype=np.float64)

    @functools.cached_property
    def snr(self) -> FloatArray:
        """``(K,)``: each cell's representative SNR, the one whose ``1 / log2(1 + gamma)`` is the
        cell's mean at stage 1 (by Gauss-Legendre in both directions; the outer ring, which
        reaches to infinity, on panels one scattered sd wide out to ``_RICIAN_TAIL_SD`` sd)."""
        x, w = _gauss_legendre(_RICIAN_QUADRATURE)
        sd = math.sqrt(self._var)
        edges = self.ring_edges
        tail = edges[-2] + sd * np.arange(int(_RICIAN_TAIL_SD) + 1)
        lo = np.concatenate((edges[:-2], tail[:-1]))
        hi = np.concatenate((edges[1:-1], tail[1:]))
        ring = np.minimum(np.arange(lo.size), self.radii - 1)  # the ring of each panel
        r = (0.5 * (hi - lo))[:, None] * x + (0.5 * (hi + lo))[:, None]  # (panels, q)
        rw = (0.5 * (hi - lo))[:, None] * w
        plo, phi_hi = self.phase_edges[:-1], self.phase_edges[1:]
        p = (0.5 * (phi_hi - plo))[:, None] * x + (0.5 * (phi_hi + plo))[:, None]  # (P, q)
        pw = (0.5 * (phi_hi - plo))[:, None] * w
        m, var = self._los, self._var
        rr, pp = r[:, None, :, None], p[None, :, None, :]
        density = rr * np.exp(-(rr * rr - 2.0 * rr * m * np.cos(pp) + m * m) / var)
        weights = density * rw[:, None, :, None] * pw[None, :, None, :]
        cost = np.asarray(inv_log2(self.mean_snr * rr * rr)) * np.ones_like(pp)
        mass = np.zeros((self.radii, self.phases))
        paid = np.zeros((self.radii, self.phases))
        np.add.at(mass, ring, weights.sum(axis=(2, 3)))
        np.add.at(paid, ring, (weights * cost).sum(axis=(2, 3)))
        # A cell stage 1 never reaches (its mass underflows: far from a strong line of sight)
        # stands for its middle: the first panel's middle radius in each of its sectors.
        middle = self.mean_snr * np.repeat(
            r[: self.radii, _RICIAN_QUADRATURE // 2] ** 2, self.phases
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            snr = np.expm1(math.log(2.0) * mass / paid).ravel()
        return np.asarray(np.where(mass.ravel() > 0, snr, middle), dtype=np.float64)

    def step(self, rho: float) -> FloatArray:
        """``(K, K)``: from each cell's representative gain (its SNR's magnitude, its sector's
        middle phase), the law of the cell one step on, conditioned on landing above the floor."""
        out = np.empty((self.states, self.states))
        self._step(rho, out)
        return out

    def _step(self, rho: float, out: FloatArray) -> None:
        """:meth:`step` into ``out`` (a chain's slice: no step is held twice)."""
        if rho * rho >= 1.0:
            out[:] = 0.0
            np.fill_diagonal(out, 1.0)
            return
        sector = np.arange(self.states) % self.phases
        middle = 0.5 * (self.phase_edges[:-1] + self.phase_edges[1:])
        h = np.sqrt(self.snr / self.mean_snr) * np.exp(1j * middle[sector])
        centre = self._los + rho * (h - self._los)
        var = (1.0 - rho * rho) * self._var
        # The phase edges are symmetric about the line of sight (phase 0) and so, to rounding,
        # is every cell's SNR (its integrand depends on the phase through its cosine): the
        # source in sector s of a ring has the mirrored row of the one in sector phases - 1 - s,
        # and only the sources of phase >= 0 are integrated.
        half, radii, phases = self.phases // 2, self.radii, self.phases
        upper = np.flatnonzero(np.arange(self.states) % phases >= half)
        grid = out.reshape(radii, phases, radii, phases)  # (ring, sector) -> (ring, sector)
        rows = self._cell_mass(centre[upper], var)
        grid[:, half:] = rows.reshape(radii, phases - half, radii, phases)
        grid[:, :half] = grid[:, phases - 1 : phases - 1 - half : -1, :, ::-1]
        total = out.sum(axis=1, keepdims=True)
        lost = np.flatnonzero(~(total[:, 0] > 0))  # all its mass below the floor: stay put
        out[lost] = 0.0
        out[lost, lost] = 1.0
        total[lost] = 1.0
        out /= total
