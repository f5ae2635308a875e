"""The co-inference strategies: the one table of every way to place layers and split.

A strategy decides, for a system, how many layers ``M`` the device holds and the rule that
splits each inference (a :class:`~inferplan.coinference.policy.SplitPolicy`), with its exact
expected cost per inference ``Z``. The planner (:func:`plan_placement`), the simulator, the
study, the device runtime and the command line all read :data:`STRATEGIES`.

* Planners choose ``M`` by optimisation: ``optimal`` (backward induction for every ``M``),
  ``1sla`` (the one-stage look-ahead rule), ``hybrid`` (branch and bound, the same ``M*`` as
  ``optimal`` with far fewer backward inductions).
* Baselines: ``edge-only`` (upload the raw input, ``M = 0``), ``device-only`` (``M = N``, run
  every layer), ``full-placement`` (``M = N`` with optimal splitting), ``fixed-split`` (one
  stage chosen offline from the mean SNR), ``best-fixed-split`` (the fixed stage of least true
  expected cost), and ``fixed:K`` (``K`` layers on the device, always upload after them: split
  stage ``K + 1``; ``fixed:0`` is edge-only, ``fixed:N`` device-only).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from inferplan.errors import InvalidArgument

# The solvers load when a strategy runs: reading the table (names, help texts, choices) loads
# none of them, nor numpy and scipy.
if TYPE_CHECKING:
    from inferplan.coinference.placement import PlacementPlan
    from inferplan.coinference.policy import Policy
    from inferplan.coinference.system import System

__all__ = [
    "FIXED_PREFIX",
    "STRATEGIES",
    "Decision",
    "Strategy",
    "decide",
    "get_strategy",
    "plan_placement",
    "planner_names",
    "strategy_label",
]

FIXED_PREFIX = "fixed:"
"""``fixed:K`` is the strategy that holds ``K`` layers and always uploads after them."""


@dataclass(frozen=True)
class Decision:
    """What a strategy does on a system.

    Attributes
    ----------
    strategy
        Its name.
    placement
        ``M``, the layers the device holds.
    policy
        The on-device splitting rule.
    expected_cost
        ``Z``: the exact expected cost per inference, placement cost ``c(M)`` included.
    split_stage
        The stage a fixed split always splits at (``None`` for rules that read the SNR).
    """

    strategy: str
    placement: int
    policy: Policy
    expected_cost: float
    split_stage: int | None = None


@dataclass(frozen=True)
class Strategy:
    """A co-inference strategy.

    Attributes
    ----------
    name
        What users call it.
    label
        Its name in figures and reports.
    summary
        One line for help texts.
    exact
        Whether it reaches the joint optimum ``Z(M*)`` (the others are compared with it).
    place
        For planners: ``place(system, rel_tol) -> PlacementPlan``; ``None`` for baselines.
    decide
        ``decide(system) -> Decision``.
    options
        The options of :func:`plan_placement` it takes (``rel_tol``).
    same_as
        The strategy whose decision this one reproduces exactly (then tables and figures that
        compare strategies show only that one).
    """

    name: str
    label: str
    summary: str
    exact: bool
    place: Callable[[System, float], PlacementPlan] | None
    decide: Callable[[System], Decision]
    options: tuple[str, ...] = ()
    same_as: str | None = None

    @property
    def key(self) -> str:
        """The name as an identifier (``edge_only``), for table columns."""
        return self.name.replace("-", "_").replace(":", "_")

    @property
    def planner(self) -> bool:
        """Whether it chooses ``M`` by optimisation (a method of :func:`plan_placement`)."""
        return self.place is not None


def _planned(
    name: str, place: Callable[[System, float], PlacementPlan]
) -> Callable[[System], Decision]:
    def decide_planned(system: System) -> Decision:
        plan = place(system, 0.0)
        return Decision(name, plan.placement, plan.policy(), plan.expected_cost)

    return decide_planned


def _at_stage(name: str, stage: Callable[[System], int]) -> Callable[[System], Decision]:
    """A fixed split: place ``K - 1`` layers and always upload before layer ``K``."""

    def decide_fixed(system: System) -> Decision:
        from inferplan.coinference.placement import fixed_split_costs
        from inferplan.coinference.policy import SplitPolicy

        k = stage(system)
        _, true = fixed_split_costs(system)
        return Decision(name, k - 1, SplitPolicy((math.inf,) * (k - 1)), float(true[k - 1]), k)

    return decide_fixed


def _full_placement(system: System) -> Decision:
    from inferplan.coinference.stopping import solve_stopping

    solution = solve_stopping(system, system.n_layers)
    return Decision("full-placement", system.n_layers, solution.policy(), solution.expected_cost)


def _cheapest_stage(system: System, *, true_cost: bool) -> int:
    """The split stage of least expected cost: as estimated from the mean SNR, or the true."""
    from inferplan.coinference.placement import fixed_split_costs

    costs = fixed_split_costs(system)[1 if true_cost else 0]
    return min(range(len(costs)), key=lambda k: float(costs[k])) + 1


def _mean_snr_stage(system: System) -> int:
    return _cheapest_stage(system, true_cost=False)


def _best_stage(system: System) -> int:
    return _cheapest_stage(system, true_cost=True)


def _optimal(system: System, rel_tol: float) -> PlacementPlan:
    from inferplan.coinference.placement import optimal_placement

    return optimal_placement(system)


def _one_step(system: System, rel_tol: float) -> PlacementPlan:
    from inferplan.coinference.placement import one_step_placement

    return one_step_placement(system)


def _memoryless(system: System, rel_tol: float) -> PlacementPlan:
    from inferplan.coinference.placement import memoryless_placement

    return memoryless_placement(system)


def _hybrid(system: System, rel_tol: float) -> PlacementPlan:
    from inferplan.coinference.placement import hybrid_placement

    return hybrid_placement(system, rel_tol=rel_tol)


STRATEGIES: Mapping[str, Strategy] = {
    s.name: s
    for s in (
        Strategy(name="optimal", label="joint (optimal placement + splitting)",
                 summary="backward induction for every placement (exact)", exact=True,
                 place=_optimal, decide=_planned("optimal", _optimal)),
        Strategy(name="1sla", label="1-sla placement + splitting",
                 summary="the one-stage look-ahead rule for every placement (O(N))",
                 exact=False, place=_one_step, decide=_planned("1sla", _one_step)),
        Strategy(name="hybrid", label="hybrid placement",
                 summary="branch and bound: the optimal placement, fewer backward inductions",
                 exact=True, place=_hybrid, decide=_planned("hybrid", _hybrid),
                 options=("rel_tol",), same_as="optimal"),
        Strategy(name="memoryless", label="i.i.d. rule on a channel with memory",
                 summary="placement and thresholds as if the SNRs of successive stages were "
                 "independent (the optimal plan on a channel without memory)", exact=False,
                 place=_memoryless, decide=_planned("memoryless", _memoryless),
                 same_as="optimal"),
        Strategy(name="edge-only", label="edge-only", summary="upload the raw input (M = 0)",
                 exact=False, place=None, decide=_at_stage("edge-only", lambda system: 1)),
        Strategy(name="device-only", label="device-only",
                 summary="run every layer on the device (M = N)", exact=False, place=None,
                 decide=_at_stage("device-only", lambda system: system.n_layers + 1)),
        Strategy(name="full-placement", label="full placement (M = N), optimal splitting",
                 summary="hold every layer, split optimally", exact=False, place=None,
                 decide=_full_placement),
        Strategy(name="fixed-split", label="fixed split from the mean SNR",
                 summary="one split stage chosen offline from the mean SNR", exact=False,
                 place=None, decide=_at_stage("fixed-split", _mean_snr_stage)),
        Strategy(name="best-fixed-split", label="best fixed split",
                 summary="the fixed split stage of least expected cost", exact=False,
                 place=None, decide=_at_stage("best-fixed-split", _best_stage)),
    )
}  # fmt: skip
"""Every strategy, by name (``fixed:K`` besides, see :func:`get_strategy`)."""


def planner_names() -> tuple[str, ...]:
    """The strategies that choose ``M`` by optimisation: the methods of :func:`plan_placement`."""
    return tuple(name for name, s in STRATEGIES.items() if s.planner)


def _known() -> str:
    return ", ".join([*STRATEGIES, f"{FIXED_PREFIX}K"])


def get_strategy(name: str, *, system: System | None = None, n_layers: int | None = None
                 ) -> Strategy:  # fmt: skip
    """The strategy called ``name``: a name of :data:`STRATEGIES` or ``fixed:K`` (``K`` layers
    on the device, ``K`` in ``0..N``, checked against ``system`` or ``n_layers`` ``N`` when
    given).

    Raises
    ------
    InvalidArgument
        Naming the parameter ``strategy`` and the known names.
    """
    if name in STRATEGIES:
        return STRATEGIES[name]
    if name.startswith(FIXED_PREFIX):
        text = name[len(FIXED_PREFIX) :]
        if text.isdigit():
            k = int(text)
            n = system.n_layers if system is not None else n_layers
            if n is not None and k > n:
                raise InvalidArgument(f"{name!r}: the device holds 0..{n} layers (N), not {k}",
                                      field="strategy")  # fmt: skip
            return Strategy(name=f"{FIXED_PREFIX}{k}", label=f"{k} layers on the device",
                            summary=f"hold {k} layers, always upload after them", exact=False,
                            place=None, decide=_at_stage(f"{FIXED_PREFIX}{k}",
                                                         lambda system: k + 1))  # fmt: skip
    raise InvalidArgument(f"unknown strategy {name!r} (known: {_known()})", field="strategy")


def strategy_label(name: str) -> str:
    """The name of a strategy in figures and reports."""
    return get_strategy(name).label


def decide(system: System, strategy: str) -> Decision:
    """What ``strategy`` does on ``system``: ``M``, the splitting rule, and ``Z``.

    Examples
    --------
    >>> from inferplan.coinference import default_system
    >>> s = default_system()
    >>> decide(s, "optimal").expected_cost <= decide(s, "edge-only").expected_cost
    True
    >>> decide(s, "fixed:3").placement, decide(s, "fixed:3").split_stage
    (3, 4)
    """
    return get_strategy(strategy, system=system).decide(system)


def plan_placement(
    system: System, *, method: str = "optimal", rel_tol: float = 0.0
) -> PlacementPlan:
    """Choose the number of layers ``M*`` to place on the device.

    Parameters
    ----------
    system
        The device-edge system.
    method
        A planner of :data:`STRATEGIES`: ``"optimal"`` (backward induction for every ``M``,
        exact, O(N^2) stage expectations), ``"1sla"`` (minimise ``Z`` under the 1-sla rule,
        O(N); an upper bound of the optimal ``Z``), ``"hybrid"`` (branch and bound with the
        same ``M*`` as ``"optimal"``, see
        :func:`~inferplan.coinference.placement.hybrid_placement`).
    rel_tol
        Only for ``"hybrid"``: allowed relative excess over the optimum (0: exact).

    Examples
    --------
    >>> from inferplan.coinference import default_system
    >>> s = default_system()
    >>> plan_placement(s, method="hybrid").placement == plan_placement(s).placement
    True
    """
    strategy = get_strategy(method)
    if strategy.place is None:
        raise InvalidArgument(
            f"{method!r} is a baseline, not a placement method (planners: "
            f"{', '.join(planner_names())})",
            field="method",
        )
    if rel_tol != 0.0 and "rel_tol" not in strategy.options:
        raise InvalidArgument(f"method {method!r} does not take rel_tol", field="rel_tol")
    return strategy.place(system, rel_tol)
