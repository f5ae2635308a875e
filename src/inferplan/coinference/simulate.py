"""Vectorised Monte-Carlo of many inferences over the channel, one seeded generator.

Every strategy sees the same SNR draws (common random numbers), so differences between them are
not sampling noise of separate runs. An inference is one row of an ``(inferences, N + 1)`` SNR
matrix; a strategy with ``M`` layers placed reads its first ``M + 1`` columns, splits at the first
``n <= M`` with ``gamma_n >= gamma_hat_n`` (else ``M + 1``) and costs
``c(M) + a_n + b_n / log2(1 + gamma_n)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.coinference.channels import inv_log2
from inferplan.coinference.policy import Policy
from inferplan.coinference.strategies import STRATEGIES, decide
from inferplan.coinference.system import System
from inferplan.errors import InvalidArgument

__all__ = [
    "MAX_SIMULATED_COSTS",
    "Simulation",
    "StrategySimulation",
    "sample_channel",
    "sample_snr",
    "simulate",
]


_QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)
# Rows per chunk: bounds memory (N + 1 doubles per row) while keeping numpy calls large.
_CHUNK = 1 << 16
MAX_SIMULATED_COSTS = 50_000_000
"""The most realised costs one :func:`simulate` keeps (inferences times rules, 8 bytes each):
every cost is kept for the exact quantiles, so the size is checked before anything runs."""


@dataclass(frozen=True)
class StrategySimulation:
    """Realised costs of one strategy.

    Attributes
    ----------
    strategy, placement
        The strategy and its ``M``.
    analytic_cost
        The exact ``Z`` the simulation estimates.
    mean_cost, std_cost
        Sample mean and standard deviation of the realised per-inference cost (placement cost
        ``c(M)`` included).
    ci_low, ci_high
        Normal-approximation confidence interval of the mean.
    quantiles
        Realised cost at the 1, 5, 25, 50, 75, 95 and 99 % levels.
    split_counts
        How many inferences split at stage ``n = 1..N+1``.
    costs
        Every realised cost (not part of :meth:`to_dict`).
    """

    strategy: str
    placement: int
    analytic_cost: float
    mean_cost: float
    std_cost: float
    ci_low: float
    ci_high: float
    quantiles: tuple[float, ...]
    split_counts: tuple[int, ...]
    costs: FloatArray = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "placement": self.placement,
            "analytic_cost": self.analytic_cost,
            "mean_cost": self.mean_cost,
            "std_cost": self.std_cost,
            "ci": [self.ci_low, self.ci_high],
            "quantiles": {f"{q:g}": v for q, v in zip(_QUANTILES, self.quantiles, strict=True)},
            "split_counts": list(self.split_counts),
        }


@dataclass(frozen=True)
class Simulation:
    """The result of :func:`simulate`: one :class:`StrategySimulation` per strategy."""

    inferences: int
    seed: int | None
    confidence: float
    results: tuple[StrategySimulation, ...]

    def __getitem__(self, strategy: str) -> StrategySimulation:
        for result in self.results:
            if result.strategy == strategy:
                return result
        raise KeyError(strategy)

    def to_dict(self) -> dict[str, Any]:
        return {
            "inferences": self.inferences,
            "seed": self.seed,
            "confidence": self.confidence,
            "strategies": {r.strategy: r.to_dict() for r in self.results},
        }


def sample_channel(
    system: System, rng: np.random.Generator, inferences: int
) -> tuple[FloatArray, FloatArray | None]:
    """What the device observes in ``inferences`` inferences: ``(inferences, N + 1)`` SNR
    draws, one row per inference (column ``n - 1`` is stage ``n``), and on a channel observed
    as its complex gain (Rician fading with memory) the gain's phase at the same stages, else
    ``None``. Rows are independent; within a row the stages are independent unless the channel
    has memory (then each row is one path of the channel: the Markov chain, the Gauss-Markov
    recursion or Jakes' sinusoids) or a trace is replayed as recorded (``Trace(replay=True)``).
    """
    if system.chain is not None:
        return system.memory_channel.sample_observations(rng, inferences, system.stage_intervals)
    shared = all(ch is system.channels[0] for ch in system.channels)
    if shared:  # one channel: its paths (a replayed trace keeps its correlation)
        return system.channels[0].sample_paths(rng, inferences, system.stage_intervals), None
    out = np.empty((inferences, system.n_layers + 1))
    for n, channel in enumerate(system.channels):
        out[:, n] = channel.sample(rng, inferences)
    return out, None


def sample_snr(system: System, rng: np.random.Generator, inferences: int) -> FloatArray:
    """``(inferences, N + 1)`` SNR draws, as :func:`sample_channel` draws them."""
    return sample_channel(system, rng, inferences)[0]


def _summary(values: FloatArray) -> tuple[float, float, tuple[float, ...]]:
    """Mean, standard deviation and quantiles of realised costs, without spurious overflow
    (costs near the float range are scaled first); a cost beyond floating point (``inf``)
    makes the mean and deviation ``inf`` and the quantiles sample values, not ``nan``."""
    if not np.all(np.isfinite(values)):
        quantiles = np.quantile(values, _QUANTILES, method="inverted_cdf")
        return math.inf, math.inf, tuple(float(v) for v in quantiles)
    scale = float(np.max(np.abs(values))) or 1.0
    scaled = values / scale
    mean, std = scale * float(scaled.mean()), scale * float(scaled.std(ddof=1))
    return mean, std, tuple(float(v) for v in np.quantile(values, _QUANTILES))


def _check_size(inferences: int, rules: int) -> None:
    if inferences * rules > MAX_SIMULATED_COSTS:
        raise InvalidArgument(
            f"{inferences} inferences x {rules} strategies would keep {inferences * rules:.3g} "
            f"realised costs in memory; the limit is {MAX_SIMULATED_COSTS:.3g} (at most "
            f"{MAX_SIMULATED_COSTS // max(rules, 1)} inferences for {rules} strategies)",
            field="inferences",
        )


def simulate(
    system: System,
    strategies: Iterable[str] | None = None,
    *,
    inferences: int = 100_000,
    seed: int | None = 0,
    rng: np.random.Generator | None = None,
    confidence: float = 0.95,
    policies: Sequence[tuple[str, Policy, float]] = (),
) -> Simulation:
    """Simulate ``inferences`` inferences under each strategy with the same SNR draws.

    Parameters
    ----------
    system
        The device-edge system.
    strategies
        Names of :data:`~inferplan.coinference.strategies.STRATEGIES` or ``fixed:K`` (every
        strategy of the table by default).
    inferences
        Number of simulated inferences.
    seed, rng
        Randomness: a generator, or a seed for :func:`numpy.random.default_rng`.
    confidence
        Level of the confidence interval of each mean.
    policies
        Extra ``(name, policy, analytic_cost)`` triples to simulate alongside the strategies.

    Examples
    --------
    >>> from inferplan.coinference import default_system
    >>> sim = simulate(default_system(), ["optimal", "edge-only"], inferences=20_000, seed=1)
    >>> r = sim["optimal"]
    >>> bool(r.ci_low <= r.analytic_cost <= r.ci_high)
    True
    """
    if isinstance(inferences, bool) or not isinstance(inferences, int) or inferences < 2:
        raise InvalidArgument(f"must be an integer >= 2, got {inferences!r}", field="inferences")
    if not 0 < confidence < 1:
        raise InvalidArgument(f"must be in (0, 1), got {confidence!r}", field="confidence")
    names = list(dict.fromkeys(STRATEGIES if strategies is None else strategies))
    _check_size(inferences, len(names) + len(policies))
    chosen = []
    for name in names:
        decision = decide(system, name)
        chosen.append((name, decision.policy, decision.expected_cost))
    chosen += list(policies)
    generator = rng if rng is not None else np.random.default_rng(seed)
    a, b = system.stage_costs
    c = system.placement_costs
    costs = [np.empty(inferences) for _ in chosen]
    splits = [np.zeros(system.n_layers + 2, dtype=np.int64) for _ in chosen]
    rows = np.arange(min(_CHUNK, inferences))
    for start in range(0, inferences, _CHUNK):
        stop = min(start + _CHUNK, inferences)
        snr, phase = sample_channel(system, generator, stop - start)
        for k, (_, policy, _) in enumerate(chosen):
            n = policy.split_points(snr, phase)
            observed = snr[rows[: stop - start], n - 1]
            costs[k][start:stop] = c[policy.placement] + a[n - 1] + b[n - 1] * inv_log2(observed)
            splits[k] += np.bincount(n, minlength=system.n_layers + 2)
    from scipy import stats  # 0.7 s to import, and only the summary needs it

    z = float(stats.norm.ppf(0.5 + confidence / 2))
    results = []
    for k, (name, policy, analytic) in enumerate(chosen):
        values = costs[k]
        mean, std, quantiles = _summary(values)
        half = z * std / math.sqrt(inferences)
        counts = splits[k][1:]
        results.append(
            StrategySimulation(
                strategy=name,
                placement=policy.placement,
                analytic_cost=float(analytic),
                mean_cost=mean,
                std_cost=std,
                ci_low=mean - half,
                ci_high=mean + half,
                quantiles=quantiles,
                split_counts=tuple(int(v) for v in counts),
                costs=values,
            )
        )
    return Simulation(inferences, seed if rng is None else None, confidence, tuple(results))
