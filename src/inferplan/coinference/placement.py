"""Model placement: ``Z(M)`` for every ``M``, ``M*`` three ways, baselines, the MLP closed form.

:func:`~inferplan.coinference.strategies.plan_placement` picks one of the three by name.

``Z(M) = c(M) + E[eta_S(gamma_S)]`` for the splitting rule ``S`` used with ``M`` layers placed.

* ``optimal``: backward induction for every ``M`` (``(N+1)(N+2)/2`` stage expectations).
* ``1sla``: the 1-sla thresholds do not depend on ``M``, so ``Z`` for every ``M`` costs O(N).
* ``hybrid``: exact ``M*`` of the optimal rule by branch and bound (:func:`hybrid_placement`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.coinference.policy import Policy
from inferplan.coinference.stopping import (
    StoppingSolution,
    one_step_etc_all,
    one_step_terms,
    optimal_thresholds,
    optimality_probability,
    solve_stopping,
    threshold_at,
)
from inferplan.coinference.system import System
from inferplan.errors import InvalidArgument, InvalidSystem

__all__ = [
    "Baselines",
    "MlpPlacement",
    "PlacementPlan",
    "compare_baselines",
    "expected_costs",
    "fixed_split_costs",
    "hybrid_placement",
    "memoryless_placement",
    "mlp_placement",
    "one_step_placement",
    "optimal_placement",
    "optimality_probabilities",
]


def expected_costs(system: System, *, rule: str = "optimal") -> FloatArray:
    """``Z(0..N)`` under the optimal rule (O(N^2)) or the 1-sla rule (O(N)).

    Examples
    --------
    >>> from inferplan.coinference import default_system
    >>> s = default_system()
    >>> bool(np.all(expected_costs(s) <= expected_costs(s, rule="1sla") + 1e-15))
    True
    """
    if rule not in ("optimal", "1sla"):
        raise InvalidArgument(f"rule must be 'optimal' or '1sla', got {rule!r}")
    if system.chain is not None:
        etc = _memory_etc(system, rule)
    elif rule == "optimal":
        etc = np.array([optimal_thresholds(system, m)[1][0] for m in range(system.n_layers + 1)])
    else:
        etc = one_step_etc_all(system)
    with np.errstate(over="ignore"):  # a cost beyond floating point is inf
        return np.asarray(system.placement_costs + etc, dtype=np.float64)


def _memory_etc(system: System, rule: str) -> FloatArray:
    """The expected ETC of every placement on a channel with memory."""
    from inferplan.coinference import markov_stopping as memory

    assert system.chain is not None
    if rule == "1sla":
        return memory.memory_one_step_etc_all(system)
    return memory.memory_optimal_etc_all(system)


def optimality_probabilities(system: System) -> FloatArray:
    """The exact probability that 1-sla splits where the optimal rule does, for ``M = 0..N``."""
    return np.array([optimality_probability(system, m) for m in range(system.n_layers + 1)])


@dataclass(frozen=True)
class PlacementPlan:
    """The chosen placement ``M*``, its splitting rule and the cost curve.

    Attributes
    ----------
    method
        ``"optimal"``, ``"1sla"`` or ``"hybrid"``.
    placement
        ``M*``.
    costs
        ``Z(0..N)`` under the method's rule; ``nan`` for placements the hybrid proved
        suboptimal without evaluating them exactly.
    solution
        The splitting rule at ``M*`` (optimal for ``optimal``/``hybrid``, 1-sla for ``1sla``).
    stage_evaluations
        Stage expectations computed to find ``M*`` (the work measure of the three methods).
    """

    method: str
    placement: int
    costs: tuple[float, ...]
    solution: StoppingSolution
    stage_evaluations: int

    @property
    def expected_cost(self) -> float:
        """``Z(M*)``, exactly the entry of :attr:`costs` that was minimised."""
        return self.costs[self.placement]

    @property
    def thresholds(self) -> tuple[float, ...]:
        """``gamma_hat_1..gamma_hat_{M*}``."""
        return self.solution.thresholds

    def policy(self) -> Policy:
        """The O(1) on-device rule for ``M*``."""
        return self.solution.policy()

    def to_dict(self) -> dict[str, Any]:
        """The ``coinfer --json`` object (``null`` for infinite or unevaluated values); on a
        channel with memory also the rule per state (``state_thresholds``, ``boundaries``,
        ``threshold_structure``, and ``phases`` when the states are also phase sectors)."""
        out: dict[str, Any] = {
            "method": self.method,
            "placement": self.placement,
            "expected_cost": self.expected_cost,
            "costs": [z if math.isfinite(z) else None for z in self.costs],
            "thresholds": [t if math.isfinite(t) else None for t in self.thresholds],
        }
        solution = self.solution.to_dict()
        for key in ("state_thresholds", "boundaries", "threshold_structure", "phases"):
            if key in solution:
                out[key] = solution[key]
        return out


def _argmin(costs: FloatArray) -> int:
    # The smallest M among the minimisers: fewer layers to download for the same cost.
    best = int(np.nanargmin(costs))
    if not math.isfinite(costs[best]):
        raise InvalidSystem(
            f"every placement costs more than {sys.float_info.max:.4g} per inference (beyond "
            "floating point): check the units of the layers, the device, the edge and the links"
        )
    return best


def optimal_placement(system: System) -> PlacementPlan:
    """``M*`` by backward induction for every ``M`` (exact, ``(N+1)(N+2)/2`` stage
    expectations); the splitting rule at ``M*`` is the optimal one."""
    costs = expected_costs(system)
    m_star = _argmin(costs)
    work = (system.n_layers + 1) * (system.n_layers + 2) // 2
    return PlacementPlan(
        "optimal", m_star, tuple(costs.tolist()), solve_stopping(system, m_star), work
    )


def memoryless_placement(system: System) -> PlacementPlan:
    """``M*`` and thresholds computed as if the SNRs of successive stages were independent
    (backward induction on each stage's law), with ``Z`` evaluated on the channel as it is.

    Without memory this is :func:`optimal_placement`. On a channel with memory, ``costs`` are
    the true ``Z(M)`` of the i.i.d. rule for each ``M``, and the placement is the one the
    i.i.d. model believes best, so it need not minimise them.

    Examples
    --------
    >>> from inferplan.coinference import Markov, default_system
    >>> sticky = Markov((0.5, 3.0, 12.0), ((0.9, 0.1, 0.0), (0.05, 0.9, 0.05), (0.0, 0.1, 0.9)))
    >>> s = default_system(channel=sticky)
    >>> memoryless_placement(s).expected_cost >= optimal_placement(s).expected_cost
    True
    """
    if system.chain is None:
        plan = optimal_placement(system)
        return PlacementPlan(
            "memoryless", plan.placement, plan.costs, plan.solution, plan.stage_evaluations
        )
    from inferplan.coinference import markov_stopping as memory

    n_layers = system.n_layers
    believed = np.empty(n_layers + 1)
    true = np.empty(n_layers + 1)
    rules = []
    for m in range(n_layers + 1):
        thresholds, values = optimal_thresholds(system, m)
        believed[m] = values[0]
        true[m] = memory.evaluate_rule(system, thresholds)[0][0]
        rules.append(thresholds)
    with np.errstate(over="ignore"):
        m_star = _argmin(system.placement_costs + believed)
        costs = system.placement_costs + true
    values, split = memory.evaluate_rule(system, rules[m_star])
    solution = StoppingSolution(
        rule="memoryless",
        placement=m_star,
        thresholds=tuple(float(t) for t in rules[m_star]),
        stage_values=tuple(float(v) for v in values),
        split_probabilities=tuple(float(p) for p in split),
        expected_etc=float(values[0]),
        placement_cost=float(system.placement_costs[m_star]),
    )
    work = 2 * (n_layers + 1) * (n_layers + 2) // 2
    return PlacementPlan("memoryless", m_star, tuple(costs.tolist()), solution, work)


def one_step_placement(system: System) -> PlacementPlan:
    """``M*`` minimising ``Z`` under the 1-sla rule (O(N); its ``Z`` is an upper bound of the
    optimal one); the splitting rule at ``M*`` is 1-sla."""
    costs = expected_costs(system, rule="1sla")
    m_star = _argmin(costs)
    return PlacementPlan(
        "1sla",
        m_star,
        tuple(costs.tolist()),
        solve_stopping(system, m_star, rule="1sla"),
        2 * system.n_layers + 1,
    )


def hybrid_placement(system: System, *, rel_tol: float = 0.0) -> PlacementPlan:
    """The ``M*`` of :func:`optimal_placement` by branch and bound, with far fewer backward
    inductions (or, with ``rel_tol > 0``, a placement whose cost is within a factor
    ``1 + rel_tol`` of ``Z(M*)``).

    Notes
    -----
    The hybrid is a branch and bound on the optimal ``Z(M) = c(M) + V(M)``, where ``V(M)`` is
    the optimal expected ETC with ``M`` layers placed:

    * upper bound: ``Z(M) <= Z_1sla(M)`` (1-sla is one feasible rule), all ``M`` in O(N);
      exact for ``M <= 1`` (1-sla is optimal there);
    * lower bound from any evaluated ``M' > M``: the backward induction over stages ``M..1`` is
      a concave, non-decreasing function of the value it starts from, whose slope (the
      probability of reaching stage ``M + 1``) is at least the 1-sla one ``P1(reach M+1)``,
      because every optimal continuation value is at most the 1-sla one. Starting from
      ``E[eta_{M+1}]`` instead of ``E[V^{(M')}_{M+1}]`` therefore gives
      ``V(M) >= V(M') + P1(reach M+1) * (E[eta_{M+1}] - E[V^{(M')}_{M+1}])``.

    On a channel with memory these bounds do not hold as stated (the continuation is a vector
    over states), and the hybrid evaluates every placement exactly, as ``optimal`` does.

    ``V(N)`` is evaluated first (O(N)); then, best first, the open placement with the lowest
    bound is evaluated exactly, until every open bound exceeds the best exact cost (times
    ``1 + rel_tol``). With ``rel_tol = 0`` the result is the same ``M*`` as ``"optimal"``
    (ties: smallest ``M``); worst case O(N^2) stage expectations (plus O(N^2) arithmetic for
    the bounds), typically a few backward inductions. ``stage_evaluations`` reports the work.

    Examples
    --------
    >>> from inferplan.coinference import default_system
    >>> s = default_system()
    >>> hybrid_placement(s).placement == optimal_placement(s).placement
    True
    """
    if not (math.isfinite(rel_tol) and rel_tol >= 0):
        raise InvalidArgument(f"must be >= 0, got {rel_tol!r}", field="rel_tol")
    if system.chain is not None:  # the bounds are the i.i.d. model's: evaluate every M
        plan = optimal_placement(system)
        return PlacementPlan(
            "hybrid", plan.placement, plan.costs, plan.solution, plan.stage_evaluations
        )
    n_layers = system.n_layers
    c = system.placement_costs
    sla_etc, reach, forced = one_step_terms(system)
    upper = c + sla_etc
    etc = np.full(n_layers + 1, np.nan)  # exact V(M) where known
    etc[:2] = sla_etc[:2]  # 1-sla is optimal at M <= 1 (N >= 1 always)
    inductions: dict[int, FloatArray] = {}  # M' -> E[V_1..V_{M'+1}] of its backward induction
    work = 2 * n_layers + 1

    def evaluate(m: int) -> None:
        nonlocal work
        values = optimal_thresholds(system, m)[1]
        inductions[m] = values
        etc[m] = values[0]
        work += m + 1

    def lower_bound(m: int) -> float:
        # Z(M) >= c(M) + V(M') + P1(reach M+1) (E[eta_{M+1}] - E[V^{(M')}_{M+1}]), M' > M; a
        # bound that is inf - inf (both stage values beyond floating point) says nothing.
        bounds = [
            values[0] + (0.0 if reach[m] == 0.0 else reach[m] * (forced[m] - values[m]))
            for mp, values in inductions.items()
            if mp > m
        ]
        return float(c[m] + max((v for v in bounds if not math.isnan(v)), default=-math.inf))

    evaluate(n_layers)
    while True:  # best first: evaluate the open placement with the lowest bound that can win
        with np.errstate(over="ignore"):
            exact = c + etc
        best_m = int(np.nanargmin(exact))  # may still be inf: open placements can be finite
        bounds = {m: lower_bound(m) for m in range(n_layers + 1) if np.isnan(etc[m])}
        # A placement can still win if its bound is below the best exact cost (or ties it with
        # a smaller M, which the tie rule prefers).
        alive = [
            m
            for m, bound in bounds.items()
            if bound * (1.0 + rel_tol) < exact[best_m] or (bound == exact[best_m] and m < best_m)
        ]
        if not alive:
            break
        evaluate(min(alive, key=lambda m: (bounds[m], upper[m], m)))
    with np.errstate(over="ignore"):
        costs = c + etc
    m_star = _argmin(costs)
    return PlacementPlan(
        "hybrid", m_star, tuple(costs.tolist()), solve_stopping(system, m_star), work
    )


# ---------------------------------------------------------------------------------- baselines


@dataclass(frozen=True)
class Baselines:
    """Expected cost per inference (``Z``) of the joint plan and of the usual alternatives.

    Attributes
    ----------
    joint
        ``Z(M*)``: optimal placement with optimal splitting.
    joint_1sla
        ``Z`` of the 1-sla placement with 1-sla splitting.
    edge_only
        ``M = 0``: upload the raw input.
    device_only
        ``M = N`` and always run every layer (upload only the output).
    full_placement
        ``M = N`` with optimal splitting.
    fixed_split, fixed_stage
        Neurosurgeon-style: one split stage chosen offline by plugging the mean SNR into the
        rate (``R = W log2(1 + E[gamma])``), ``M = stage - 1`` placed, always split there.
    best_fixed_split, best_fixed_stage
        The fixed split with the lowest true expected cost (a fixed-split oracle).
    """

    joint: float
    joint_placement: int
    joint_1sla: float
    edge_only: float
    device_only: float
    full_placement: float
    fixed_split: float
    fixed_stage: int
    best_fixed_split: float
    best_fixed_stage: int

    def savings(self) -> dict[str, float]:
        """Relative saving of the joint plan against each baseline: ``1 - joint / baseline``."""
        names = (
            "joint_1sla",
            "edge_only",
            "device_only",
            "full_placement",
            "fixed_split",
            "best_fixed_split",
        )
        return {name: 1.0 - self.joint / getattr(self, name) for name in names}

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["savings"] = self.savings()
        return out


def fixed_split_costs(system: System) -> tuple[FloatArray, FloatArray]:
    """Per fixed split stage ``n = 1..N+1`` (``M = n - 1`` placed): the cost the mean-SNR
    planner believes, ``c(n-1) + eta_n(E[gamma_n])``, and the true ``c(n-1) + E[eta_n]``."""
    a, b = system.stage_costs
    mean_snr = np.array([ch.expected_snr() for ch in system.channels])
    mean_g = np.array([ch.mean_inv_log() for ch in system.channels])
    with np.errstate(over="ignore"):  # a cost beyond floating point is inf
        believed = system.placement_costs + a + b * math.log(2.0) / np.log1p(mean_snr)
        true = system.placement_costs + a + b * mean_g
    return believed, true


def compare_baselines(system: System) -> Baselines:
    """The joint plan against edge-only, device-only, full placement and fixed splits.

    Examples
    --------
    >>> from inferplan.coinference import default_system
    >>> b = compare_baselines(default_system())
    >>> b.joint <= min(b.edge_only, b.device_only, b.full_placement, b.best_fixed_split)
    True
    """
    costs = expected_costs(system)
    m_star = _argmin(costs)
    believed, true = fixed_split_costs(system)
    fixed = int(np.argmin(believed))
    best_fixed = int(np.argmin(true))
    return Baselines(
        joint=float(costs[m_star]),
        joint_placement=m_star,
        joint_1sla=float(np.min(expected_costs(system, rule="1sla"))),
        edge_only=float(true[0]),
        device_only=float(true[-1]),
        full_placement=float(costs[-1]),
        fixed_split=float(true[fixed]),
        fixed_stage=fixed + 1,
        best_fixed_split=float(true[best_fixed]),
        best_fixed_stage=best_fixed + 1,
    )


# --------------------------------------------------------------------------- MLP closed form


@dataclass(frozen=True)
class MlpPlacement:
    """The closed-form 1-sla placement of an equal-width MLP over an i.i.d. channel.

    Attributes
    ----------
    delta
        ``delta(X)``, the constant 1-sla threshold (``inf``: never split early).
    continue_probability
        ``q = F(delta)``.
    drift
        ``Delta = E[min(b g(gamma), b E[g] + d)] - b E[g] <= 0``: ``ETC(M+1) - ETC(M) = q^M Delta``.
    download_per_inference
        ``tau / K``, the placement cost of one layer per inference.
    placement
        ``M*``, the smallest ``M`` with ``tau / K + q^M Delta >= 0`` (``N`` if none).
    expected_cost
        ``Z(M*) = M* tau / K + E[eta_1] + Delta (1 - q^M*) / (1 - q)``.
    """

    delta: float
    continue_probability: float
    drift: float
    download_per_inference: float
    placement: int
    expected_cost: float

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["delta"] = self.delta if math.isfinite(self.delta) else None
        return out


def mlp_placement(system: System) -> MlpPlacement:
    """``M*`` in closed form for equal layers (the paper's equal-width MLP) and i.i.d. SNR.

    Requires equal ``L_i``, equal ``I_i`` (including ``I_{N+1}``), equal ``m_i`` and one channel
    for every stage; see docs/coinference.md for the derivation. With a device memory the
    placement is the closed form's, or the most layers that fit if fewer.

    Examples
    --------
    >>> from inferplan.coinference import default_system, mlp_layers
    >>> s = default_system(layers=mlp_layers(512, 6))
    >>> mlp_placement(s).placement == int(np.argmin(expected_costs(s, rule="1sla")))
    True
    """
    layers = system.layers
    for name in ("cycles", "input_bits", "param_bits"):
        if len(set(getattr(layers, name))) != 1:
            raise InvalidArgument(f"the MLP closed form needs equal layers.{name}")
    if len({id(ch) for ch in system.channels}) != 1 and len(set(system.channels)) != 1:
        raise InvalidArgument("the MLP closed form needs one channel for every stage (i.i.d. SNR)")
    n_layers = system.n_layers
    a, b_all = system.stage_costs
    d = float(a[1] - a[0])  # extra cost of running one more layer on the device
    b = float(b_all[0])
    channel = system.channels[0]
    g_mean = channel.mean_inv_log()
    delta = threshold_at(0.0, b, b * g_mean + d)
    q = channel.below(delta)
    h = channel.partial_inv_log(delta)
    drift = b * h + q * d - (1.0 - q) * b * g_mean
    # the device's memory holds M <= fits layers (equal layers: the need grows with M); Z
    # is convex in M (its steps step + drift q^M grow), so the best that fits is the nearest
    fits = int(np.isfinite(system.placement_costs).sum()) - 1
    unlimited = dataclasses.replace(system, device=dataclasses.replace(system.device, memory=None))
    step = float(unlimited.placement_costs[1])
    if step + drift >= 0:
        m_star = 0
    elif q == 0.0:
        m_star = 1
    elif q == 1.0 or step == 0.0:
        m_star = n_layers
    else:
        m_star = min(n_layers, math.ceil(math.log(step / -drift) / math.log(q)))
    m_star = min(m_star, fits)
    geometric = m_star if q == 1.0 else (1.0 - q**m_star) / (1.0 - q)
    cost = m_star * step + a[0] + b * g_mean + drift * geometric
    return MlpPlacement(delta, q, drift, step, m_star, float(cost))
