"""Online splitting as a finite-horizon optimal stopping problem, and the 1-sla rule.

With ``M`` layers placed the device observes ``gamma_n`` at stages ``n = 1..M`` and either stops
(uploads ``I_n``) or runs layer ``n``; at stage ``M + 1`` it must stop. Every rule here is a
threshold rule: stop at the first ``n <= M`` with ``gamma_n >= gamma_hat_n``, else at ``M + 1``.
Because ``eta_n`` falls in ``gamma``, ``min(eta_n(gamma), c)`` equals ``c`` below the threshold
``eta_n^{-1}(c)`` and ``eta_n(gamma)`` above it, so every expectation reduces to the channel's
``P(gamma < t)`` and ``E[1/log2(1+gamma); gamma >= t]``::

    E[min(eta_n, c)] = c * F_n(t) + a_n * (1 - F_n(t)) + b_n * E[g(gamma_n); gamma_n >= t]
    t = eta_n^{-1}(c) = 2^(b_n / (c - a_n)) - 1     (infinite when c <= a_n: never stop)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.coinference.policy import Policy, SplitPolicy, StatePolicy
from inferplan.coinference.system import System
from inferplan.errors import InvalidArgument

__all__ = [
    "RULES",
    "StoppingSolution",
    "evaluate_policy",
    "evaluate_thresholds",
    "one_step_etc_all",
    "one_step_terms",
    "one_step_thresholds",
    "optimal_thresholds",
    "optimality_probability",
    "solve_stopping",
    "threshold_at",
]


RULES = ("optimal", "1sla")


def _times(probability: float, value: float) -> float:
    """``probability * value`` where an impossible event costs nothing, even an infinite cost
    (a stage beyond floating point that the rule never reaches)."""
    return 0.0 if probability == 0.0 else float(probability) * float(value)


def threshold_at(a: float, b: float, target: float) -> float:
    """The SNR where ``a + b / log2(1 + gamma)`` equals ``target`` (``inf``: never stop)."""
    a, b, target = float(a), float(b), float(target)  # Python floats overflow quietly to inf
    if target <= a:
        return math.inf
    exponent = math.log(2.0) * b / (target - a)
    return math.expm1(exponent) if exponent < 709.0 else math.inf


def _stage(system: System, n: int, threshold: float) -> tuple[float, float]:
    """``(P(gamma_n < t), E[eta_n(gamma_n); gamma_n >= t])`` for stage ``n`` (1-based)."""
    a, b = system.stage_costs
    channel = system.channels[n - 1]
    below, stop = channel.below(threshold), channel.at_or_above(threshold)
    if below >= 1.0 or stop <= 0.0:  # the rule never stops here
        return 1.0, 0.0
    return below, _times(stop, a[n - 1]) + _times(channel.partial_inv_log(threshold), b[n - 1])


def _forced(system: System, n: int) -> float:
    """``E[eta_n(gamma_n)]``, the expected cost of a forced upload at stage ``n``."""
    a, b = system.stage_costs
    return float(a[n - 1]) + float(b[n - 1]) * system.channels[n - 1].mean_inv_log()


def optimal_thresholds(system: System, placement: int) -> tuple[FloatArray, FloatArray]:
    """Backward induction for ``M = placement``: thresholds and ``E[V_n]``.

    Returns
    -------
    thresholds
        ``gamma_hat_1..gamma_hat_M`` (``inf``: never stop there).
    values
        ``E[V_1..V_{M+1}]``, the optimal expected ETC from each stage on; ``values[0]`` is the
        optimal expected ETC of an inference.
    """
    m = system.check_placement(placement)
    a, b = system.stage_costs
    values = np.empty(m + 1)
    thresholds = np.empty(m)
    values[m] = _forced(system, m + 1)
    for n in range(m, 0, -1):  # stages M..1, E[V_n] = E[min(eta_n, E[V_{n+1}])]
        target = values[n]
        t = threshold_at(a[n - 1], b[n - 1], target)
        below, stop_value = _stage(system, n, t)
        thresholds[n - 1] = t
        values[n - 1] = _times(below, target) + stop_value
    return thresholds, values


def one_step_thresholds(system: System) -> FloatArray:
    """1-sla thresholds for stages ``1..N``: stop iff ``eta_n(gamma_n) <= E[eta_{n+1}]``.

    They do not depend on the placement ``M``: the rule for ``M`` uses the first ``M``.
    """
    a, b = system.stage_costs
    n_layers = system.n_layers
    forced = [_forced(system, n) for n in range(2, n_layers + 2)]
    return np.array([threshold_at(a[n], b[n], forced[n]) for n in range(n_layers)])


def evaluate_thresholds(
    system: System, thresholds: Sequence[float] | FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Cost-to-go and split probabilities of the threshold rule with ``M = len(thresholds)``.

    Returns
    -------
    values
        ``W_1..W_{M+1}``: expected ETC from stage ``n`` on, following the rule.
    split_probabilities
        ``P(split at n)``, ``n = 1..M+1`` (sums to 1).
    """
    m = system.check_placement(len(thresholds))
    values = np.empty(m + 1)
    values[m] = _forced(system, m + 1)
    below = np.empty(m)
    for n in range(m, 0, -1):
        below[n - 1], stop_value = _stage(system, n, float(thresholds[n - 1]))
        values[n - 1] = _times(below[n - 1], values[n]) + stop_value
    reach = np.concatenate(([1.0], np.cumprod(below)))
    split = reach.copy()
    split[:m] *= 1.0 - below
    return values, split


def one_step_terms(system: System) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The 1-sla rule for every placement ``M = 0..N`` in O(N).

    ``ETC(M) = sum_{n<=M} P(reach n) E[eta_n; gamma_n >= t_n] + P(reach M+1) E[eta_{M+1}]``,
    with prefix sums over ``n`` because the thresholds ``t_n`` do not depend on ``M``.

    Returns
    -------
    etc
        ``ETC(M)``, the expected ETC of 1-sla with ``M`` layers placed.
    reach
        ``P(reach M+1) = prod_{k<=M} P(gamma_k < t_k)`` under 1-sla.
    forced
        ``E[eta_{M+1}]``, the expected cost of a forced split at stage ``M + 1``.
    """
    thresholds = one_step_thresholds(system)
    n_layers = system.n_layers
    reach = np.ones(n_layers + 1)
    stopped = np.zeros(n_layers + 1)  # sum_{n<=M} P(reach n) E[eta_n; stop at n]
    for n in range(1, n_layers + 1):
        below, stop_value = _stage(system, n, float(thresholds[n - 1]))
        stopped[n] = stopped[n - 1] + _times(reach[n - 1], stop_value)
        reach[n] = reach[n - 1] * below
    forced = np.array([_forced(system, n) for n in range(1, n_layers + 2)])
    etc = stopped + np.array([_times(r, f) for r, f in zip(reach, forced, strict=True)])
    return etc, reach, forced


def one_step_etc_all(system: System) -> FloatArray:
    """Expected ETC of the 1-sla rule for every placement ``M = 0..N`` in O(N)."""
    return one_step_terms(system)[0]


def optimality_probability(system: System, placement: int) -> float:
    """The exact probability that 1-sla splits at the stage where the optimal rule splits.

    Both rules continue at ``k`` iff ``gamma_k`` is below both thresholds and both stop at
    ``n`` iff ``gamma_n`` is at or above both, so with ``lo_k = min`` and ``hi_k = max`` of the
    two thresholds::

        P = sum_{n<=M} prod_{k<n} F_k(lo_k) * (1 - F_n(hi_n))  +  prod_{k<=M} F_k(lo_k)

    Examples
    --------
    >>> from inferplan.coinference import default_system
    >>> optimality_probability(default_system(), 1)
    1.0
    """
    m = system.check_placement(placement)
    if system.chain is not None:
        from inferplan.coinference import markov_stopping as memory

        return memory.agreement_probability(
            system,
            memory.memory_thresholds(system, m)[0],
            memory.memory_one_step_thresholds(system)[:m],
        )
    optimal, _ = optimal_thresholds(system, m)
    one_step = one_step_thresholds(system)[:m]
    total, reach = 0.0, 1.0
    for n in range(1, m + 1):
        channel = system.channels[n - 1]
        lo = min(optimal[n - 1], one_step[n - 1])
        hi = max(optimal[n - 1], one_step[n - 1])
        total += reach * (1.0 - channel.below(hi))
        reach *= channel.below(lo)
    return min(1.0, total + reach)


@dataclass(frozen=True)
class StoppingSolution:
    """A splitting rule for a fixed placement ``M`` and its expected performance.

    Attributes
    ----------
    rule
        ``"optimal"`` (backward induction) or ``"1sla"``.
    placement
        ``M``, the number of layers on the device.
    thresholds
        ``gamma_hat_1..gamma_hat_M`` (``inf``: never split there).
    stage_values
        Expected ETC from stage ``n`` on, ``n = 1..M+1`` (``E[V_n]`` for the optimal rule).
    split_probabilities
        ``P(split at n)``, ``n = 1..M+1``.
    expected_etc
        ``E[eta_S(gamma_S)]`` per inference.
    placement_cost
        ``c(M)`` per inference.
    state_thresholds
        On a channel with memory: ``(M, K)``, split at stage ``n`` in state ``k`` iff
        ``gamma_n >= state_thresholds[n-1][k]`` (the rule the device runs); then
        :attr:`thresholds` holds per stage the SNR of the lowest state the rule splits in, the
        same rule where :attr:`threshold_structure` says so. ``None`` without memory.
    boundaries
        On a channel with memory: the SNRs between its states (between its rings, when the
        states are also sectors of the gain's phase).
    phases
        On a channel with memory: the phase sectors per ring (1: the SNR alone is the state).
    threshold_structure
        On a channel with memory: per stage, whether the states the rule splits in are all the
        states above one SNR.
    """

    rule: str
    placement: int
    thresholds: tuple[float, ...]
    stage_values: tuple[float, ...]
    split_probabilities: tuple[float, ...]
    expected_etc: float
    placement_cost: float
    state_thresholds: tuple[tuple[float, ...], ...] | None = None
    boundaries: tuple[float, ...] | None = None
    threshold_structure: tuple[bool, ...] | None = None
    phases: int = 1

    @property
    def expected_cost(self) -> float:
        """``Z(M) = c(M) + E[eta_S]``."""
        return self.placement_cost + self.expected_etc

    def policy(self) -> Policy:
        """The O(1) on-device rule."""
        if self.state_thresholds is not None:
            assert self.boundaries is not None
            return StatePolicy(self.boundaries, self.state_thresholds, self.phases)
        return SplitPolicy(self.thresholds)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule": self.rule,
            "placement": self.placement,
            "expected_cost": self.expected_cost,
            "expected_etc": self.expected_etc,
            "placement_cost": self.placement_cost,
            "thresholds": [t if math.isfinite(t) else None for t in self.thresholds],
            "stage_values": list(self.stage_values),
            "split_probabilities": list(self.split_probabilities),
        }
        if self.state_thresholds is not None:
            out["state_thresholds"] = [
                [t if math.isfinite(t) else None for t in row] for row in self.state_thresholds
            ]
            out["boundaries"] = list(self.boundaries or ())
            out["threshold_structure"] = list(self.threshold_structure or ())
            if self.phases > 1:
                out["phases"] = self.phases
        return out


def solve_stopping(system: System, placement: int, *, rule: str = "optimal") -> StoppingSolution:
    """The splitting rule ``rule`` for ``M = placement`` layers on the device.

    Examples
    --------
    >>> from inferplan.coinference import default_system
    >>> s = default_system()
    >>> opt, sla = solve_stopping(s, 5), solve_stopping(s, 5, rule="1sla")
    >>> opt.expected_etc <= sla.expected_etc
    True
    """
    m = system.check_placement(placement)
    if system.chain is not None and rule in RULES:
        return _solve_with_memory(system, m, rule)
    if rule == "optimal":
        thresholds, _ = optimal_thresholds(system, m)
    elif rule == "1sla":
        thresholds = one_step_thresholds(system)[:m]
    else:
        raise InvalidArgument(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    values, split = evaluate_thresholds(system, thresholds)
    return StoppingSolution(
        rule=rule,
        placement=m,
        thresholds=tuple(float(t) for t in thresholds),
        stage_values=tuple(float(v) for v in values),
        split_probabilities=tuple(float(p) for p in split),
        expected_etc=float(values[0]),
        placement_cost=float(system.placement_costs[m]),
    )


def _solve_with_memory(system: System, m: int, rule: str) -> StoppingSolution:
    """:func:`solve_stopping` on a channel with memory: thresholds per stage and state."""
    from inferplan.coinference import markov_stopping as memory

    if rule == "optimal":
        table = memory.memory_thresholds(system, m)[0]
    else:
        table = memory.memory_one_step_thresholds(system)[:m]
    values, split = memory.evaluate_rule(system, table)
    policy = memory.state_policy(system, table)
    return StoppingSolution(
        rule=rule,
        placement=m,
        thresholds=memory.stage_thresholds(system, table),
        stage_values=tuple(float(v) for v in values),
        split_probabilities=tuple(float(p) for p in split),
        expected_etc=float(values[0]),
        placement_cost=float(system.placement_costs[m]),
        state_thresholds=policy.thresholds,
        boundaries=policy.boundaries,
        threshold_structure=memory.threshold_structure(system, table),
        phases=policy.phases,
    )


def evaluate_policy(system: System, policy: Policy) -> tuple[float, FloatArray]:
    """Expected ETC and split probabilities of any on-device policy on the system's channel."""
    if system.chain is None:
        if not isinstance(policy, SplitPolicy):
            raise InvalidArgument("a per-state policy needs a channel with memory")
        values, split = evaluate_thresholds(system, np.asarray(policy.thresholds))
        return float(values[0]), split
    from inferplan.coinference import markov_stopping as memory

    if isinstance(policy, StatePolicy):
        chain = system.chain
        if policy.boundaries != tuple(chain.boundaries.tolist()) or policy.phases != chain.phases:
            raise InvalidArgument("the policy's states are not the channel's")
        table = np.asarray(policy.thresholds, dtype=np.float64).reshape(
            policy.placement, chain.states
        )
    else:
        table = np.asarray(policy.thresholds, dtype=np.float64)
    values, split = memory.evaluate_rule(system, table)
    return float(values[0]), split
