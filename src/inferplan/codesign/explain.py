"""Why a plan is what it is: the runners-up, the constraints that bind, and what the target
and each binding limit cost at the margin.

Everything is computed by an exact method (PSG on an acyclic network, the MILP on any) on the
plan's own instance, from numbers alone:

- **the best plan on another path**: a simple path other than the plan's leaves out at least
  one of its links (a simple path from the source that holds every link of another one is that
  path), so it is the cheapest of the plans that avoid one link of the plan's path, one exact
  solve per link with that link forbidden (an infinite term of the state graph's transitions,
  :class:`~inferplan.codesign.instance.Terms`);
- **the best plan on other cuts** (the same path, another partition or other ideals): any other
  cut sequence first differs from the plan's at some path node ``l``; for each ``l`` one exact
  solve with every link off the path forbidden, the nodes before ``l`` held to the plan's
  stages and node ``l`` to any stage but the plan's (the cheapest of these is the runner-up);
- **binding constraints**, read off the plan's loads and capacities: each stage that takes
  the whole target interval (its element at exactly the capacity the target needs), each
  purchase at its cost's cap, each node's memory that its stage fills, and the latency bound
  when the plan's latency meets it;
- **marginal costs** by forward differences of exact re-solves: the target at ``(1 + eps)`` its
  throughput (price units per extra inference/s), each binding cap raised by ``eps`` of itself
  (one module for capacity sold in modules; price units saved per unit raised) and the latency
  bound loosened by ``eps`` of itself (saved per second). A re-solve that no plan meets makes
  the margin ``inf``.

None of this runs unless asked (``provision --explain``, ``--report``): it costs
``2 (L - 1)`` solves for a path of ``L`` nodes, plus one per margin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any, Literal

import numpy as np

from inferplan.arrays import FloatArray, IntArray
from inferplan.codesign.instance import CodesignInstance, Terms
from inferplan.codesign.methods import solve
from inferplan.codesign.plan import CAP_RTOL, Plan, cut_lists
from inferplan.codesign.stages import stages
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.costs import CapacityCost, ModuleCost
from inferplan.units import COST_UNIT, cost, link_name, si

__all__ = ["DEFAULT_EPS", "Alternative", "Constraint", "Explanation", "explain_plan"]

DEFAULT_EPS = 1e-3
"""The relative step of the marginal costs' forward differences."""

# A stage or a memory counts as tight within this relative slack (the solvers buy to the target
# exactly, in floating point).
_TIGHT = 1e-6

Element = Literal["node", "link"]


@dataclass(frozen=True)
class Alternative:
    """The cheapest plan of a kind other than the plan explained: ``"other path"`` (any path
    but the plan's) or ``"other cuts"`` (the plan's path, cut elsewhere). ``plan`` is ``None``
    when no such plan meets the target within the caps (or none exists: a path of one link
    and a model of one cut)."""

    kind: Literal["other path", "other cuts"]
    plan: Plan | None
    optimum: float

    @property
    def extra_cost(self) -> float:
        """What the runner-up costs beyond the plan explained (``inf`` without one)."""
        return math.inf if self.plan is None else self.plan.cost - self.optimum

    def line(self) -> str:
        """The runner-up in one line: its deployment, its cost and what it adds."""
        what = "another path" if self.kind == "other path" else "other cuts (the same path)"
        if self.plan is None:
            return f"best on {what}: none meets the target within the caps"
        p = self.plan
        cut = (f"partition {','.join(map(str, p.partition))}" if p.partition is not None
               else f"ideals {','.join(map(str, p.ideals or ()))}")  # fmt: skip
        tie = self.extra_cost <= 1e-9 * max(1.0, abs(self.optimum))
        more = "as cheap: a tie" if tie else f"{self.extra_cost:+.4g} against this plan"
        return f"best on {what}: {' -> '.join(p.path)}, {cut}: {cost(p.cost)} ({more})"

    def to_dict(self) -> dict[str, Any]:
        if self.plan is None:
            return {"kind": self.kind, "found": False}
        return {"kind": self.kind, "found": True, "cost": self.plan.cost,
                "extra_cost": self.extra_cost, "status": self.plan.status,
                "path": list(self.plan.path),
                **cut_lists(self.plan.partition, self.plan.ideals),
                "interval": self.plan.interval, "latency": self.plan.latency}  # fmt: skip


@dataclass(frozen=True)
class Constraint:
    """A constraint that binds at the plan: ``kind`` ``"interval"`` (a stage takes the whole
    target interval: its ``used`` is the capacity the target needs, FLOP/s or bit/s, its
    ``limit`` the element's capacity after the upgrades), ``"cap"`` (a purchase at its cost's
    cap: ``used`` the amount bought, ``limit`` the cap), ``"memory"`` (a node's memory full:
    ``used`` the need, ``limit`` its memory after the upgrades, bytes), ``"memory cap"`` (memory
    bought up to its cap) or ``"latency"`` (the plan's latency at the bound, seconds).
    ``marginal``: price units saved per unit the limit is raised (caps and the latency bound;
    ``None`` for the others, whose limit is what the plan buys)."""

    kind: Literal["interval", "cap", "memory", "memory cap", "latency"]
    element: Element | None
    id: str
    used: float
    limit: float
    unit: str
    marginal: float | None = None

    def line(self) -> str:
        """The constraint in one line, with its margin when it has one."""
        where = (link_name(self.id) if self.element == "link" else
                 f"node {self.id}" if self.element == "node" else "")  # fmt: skip
        said = {
            "interval": f"{self.element} {where.removeprefix('node ')} takes the whole target "
                        f"interval (needs {si(self.used, self.unit)}, has "
                        f"{si(self.limit, self.unit)})",
            "cap": f"{self.element} {where.removeprefix('node ')} bought up to its cap "
                   f"({si(self.used, self.unit)} of {si(self.limit, self.unit)})",
            "memory": f"{where} memory full (needs {si(self.used, 'B')}, has "
                      f"{si(self.limit, 'B')})",
            "memory cap": f"{where} memory bought up to its cap ({si(self.used, 'B')} of "
                          f"{si(self.limit, 'B')})",
            "latency": f"latency at its bound ({si(self.used, 's')} of {si(self.limit, 's')})",
        }[self.kind]  # fmt: skip
        if self.marginal is not None:
            per = "second" if self.unit == "s" else self.unit
            said += f": each {per} more saves {self.marginal:.4g} {COST_UNIT}"
        return said

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "element": self.element, "id": self.id, "used": self.used,
                "limit": self.limit, "unit": self.unit, "marginal": self.marginal}  # fmt: skip


@dataclass(frozen=True)
class Explanation:
    """Why a plan (see the module docstring): its two runners-up, the constraints that bind,
    and ``marginal_throughput``, price units per extra inference/s (``inf`` when the caps
    allow no faster plan), all by ``method`` with step ``eps``."""

    method: str
    cost: float
    other_path: Alternative
    other_cuts: Alternative
    binding: tuple[Constraint, ...]
    marginal_throughput: float
    eps: float

    @property
    def how(self) -> str:
        """How the margins were computed, in words."""
        bound = any(c.kind == "latency" for c in self.binding)
        return (f"forward differences of exact {self.method} re-solves: the target at "
                f"(1 + {self.eps:g}) x its throughput, each binding cap raised by {self.eps:g} "
                "of itself (one module for capacity sold in modules)"
                + (f", the latency bound loosened by {self.eps:g} of itself" if bound else ""))

    def lines(self) -> list[str]:
        """The explanation as lines of text: the runners-up, the binding constraints, the
        margin of the target."""
        margin = (f"{self.marginal_throughput:.4g} {COST_UNIT} per extra inference/s"
                  if math.isfinite(self.marginal_throughput) else
                  "no faster plan within the caps")  # fmt: skip
        binding = [f"binds: {c.line()}" for c in self.binding] or ["binds: nothing"]
        return [self.other_path.line(), self.other_cuts.line(), *binding,
                f"marginal cost of the target: {margin} (a re-solve at (1 + {self.eps:g}) x "
                f"the throughput)"]  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "runners_up": [self.other_path.to_dict(), self.other_cuts.to_dict()],
            "binding": [c.to_dict() for c in self.binding],
            "marginal_cost": {
                "throughput": self.marginal_throughput,
                "unit": f"{COST_UNIT} per inference/s",
                "how": self.how,
            },
        }


def explain_plan(
    inst: CodesignInstance,
    plan: Plan,
    *,
    method: str | None = None,
    eps: float = DEFAULT_EPS,
    time_limit: float | None = None,
) -> Explanation:
    """Why ``plan`` (made for ``inst``): see the module docstring. ``method``: the exact method
    to re-solve with, by default ``psg`` on an acyclic instance and ``milp`` otherwise (the
    plan's own when it is one of them); ``time_limit`` the MILP's, per solve.

    Raises
    ------
    InvalidArgument
        For a method that is not exact, or ``eps`` outside ``(0, 1)``.
    """
    if not 0 < eps < 1:
        raise InvalidArgument(f"must lie in (0, 1), got {eps!r}", field="eps")
    if method is None:
        method = plan.method if plan.method in ("psg", "milp") else (
            "psg" if inst.acyclic else "milp")  # fmt: skip
    if method not in ("psg", "milp"):
        raise InvalidArgument(f"explaining a plan takes an exact method (psg or milp), got "
                              f"{method!r}", field="method")  # fmt: skip
    options: dict[str, Any] = {"latency": plan.target_latency}
    if method == "milp":
        options["time_limit"] = time_limit

    def cheapest(problem: CodesignInstance, beta: float = plan.target_interval,
                 **changed: Any) -> Plan | None:  # fmt: skip
        try:
            return solve(problem, beta, method, **{**options, **changed})
        except Infeasible:
            return None

    index = {v: k for k, v in enumerate(inst.node_ids)}
    path = [index[v] for v in plan.path]
    links = [inst.link_index(u, v) for u, v in pairwise(path)]
    cut = list(plan.cut_indices)

    other_path = _best(cheapest(inst.with_terms(_forbidding(inst, {e}))) for e in links)
    off_path = set(range(len(inst.links))) - set(links)
    other_cuts = _best(
        cheapest(inst.with_terms(_forbidding(inst, off_path, _held(cut, path, at))))
        for at in range(len(path) - 1)
    )
    binding = _binding(inst, plan, path, links, cheapest, eps)
    faster = cheapest(inst, plan.target_interval / (1 + eps))
    rate = eps / plan.target_interval
    margin = math.inf if faster is None else (faster.cost - plan.cost) / rate
    return Explanation(method, plan.cost, Alternative("other path", other_path, plan.cost),
                       Alternative("other cuts", other_cuts, plan.cost), binding, margin,
                       eps)  # fmt: skip


def _best(plans: Any) -> Plan | None:
    """The cheapest of ``plans`` (``None`` entries skipped), the first on ties."""
    best: Plan | None = None
    for found in plans:
        if found is not None and (best is None or found.cost < best.cost):
            best = found
    return best


NodeRule = Callable[[int], FloatArray]


def _held(cut: Sequence[int], path: Sequence[int], at: int) -> dict[int, NodeRule]:
    """Node terms that hold the path nodes before ``at`` to the plan's stages and node ``at``
    to any stage from the plan's previous cut but the plan's own (each a ``(W, W)`` table of
    0 and ``inf`` by ``(a, b)``)."""
    done = [0, *cut[:-1]]

    def only(a: int, b: int) -> NodeRule:
        def rule(width: int) -> FloatArray:
            out = np.full((width, width), np.inf)
            out[a, b] = 0.0
            return out

        return rule

    def other_than(a: int, b: int) -> NodeRule:
        def rule(width: int) -> FloatArray:
            out = np.full((width, width), np.inf)
            out[a, :] = 0.0
            out[a, b] = np.inf
            return out

        return rule

    rules = {path[k]: only(done[k], cut[k]) for k in range(at)}
    rules[path[at]] = other_than(done[at], cut[at])
    return rules


def _forbidding(
    inst: CodesignInstance, banned: set[int], rules: dict[int, NodeRule] | None = None
) -> Terms:
    """Extra terms that forbid the links ``banned`` and give the nodes of ``rules`` their
    tables (every other transition untouched)."""
    width = inst.n_cuts
    held = rules or {}

    def node(nodes: IntArray) -> FloatArray:
        out = np.zeros((len(nodes), width, width))
        for r, v in enumerate(nodes.tolist()):
            if v in held:
                out[r] = held[v](width)
        return out

    def link(which: IntArray) -> FloatArray:
        out = np.zeros((len(which), width))
        out[np.isin(which, sorted(banned))] = np.inf
        return out

    as_array = np.array(sorted(held), dtype=np.int64)
    return Terms(node, as_array, None, None, link, np.array(sorted(banned), dtype=np.int64))


def _binding(
    inst: CodesignInstance,
    plan: Plan,
    path: Sequence[int],
    links: Sequence[int],
    cheapest: Callable[..., Plan | None],
    eps: float,
) -> tuple[Constraint, ...]:
    """The constraints that bind at ``plan`` (see :class:`Constraint`), each binding cap and the
    latency bound with its margin."""
    beta = plan.target_interval
    run = stages(inst, path, plan.cut_indices, links)
    _, C, B = inst.scalars
    bought_node = {v: plan.node_upgrades.get(inst.node_ids[v], 0.0) for v in path}
    bought_link = {e: _link_bought(plan, inst, e) for e in links}
    found: list[Constraint] = []

    def saved(changed: Plan | None, step: float) -> float:
        return math.inf if changed is None else (plan.cost - changed.cost) / step

    for k, v in enumerate(path):
        name = inst.node_ids[v]
        need, has = run.work[k] / beta, C[v] + bought_node[v]
        if need > 0 and need >= has * (1 - _TIGHT):
            found.append(Constraint("interval", "node", name, need, has, "FLOP/s"))
        cost = inst.node_costs[v]
        if _at_cap(cost, bought_node[v], need > 0 and need >= has * (1 - _TIGHT)):
            step = _step(cost, eps, need)
            costs = list(inst.node_costs)
            costs[v] = replace(cost, max_amount=cost.max_amount + step)  # type: ignore[type-var]
            raised = inst.priced(inst.capacity, costs, inst.bandwidth, inst.link_costs)
            found.append(Constraint("cap", "node", name, bought_node[v], cost.max_amount,
                                    "FLOP/s", saved(cheapest(raised), step)))  # fmt: skip
        if k < len(links):
            e = links[k]
            label = f"{plan.path[k]}->{plan.path[k + 1]}"
            need, has = run.bits[k] / beta, B[e] + bought_link[e]
            tight = need > 0 and need >= has * (1 - _TIGHT)
            if tight:
                found.append(Constraint("interval", "link", label, need, has, "bit/s"))
            cost = inst.link_costs[e]
            if _at_cap(cost, bought_link[e], tight):
                step = _step(cost, eps, need)
                costs = list(inst.link_costs)
                costs[e] = replace(cost, max_amount=cost.max_amount + step)  # type: ignore[type-var]
                raised = inst.priced(inst.capacity, inst.node_costs, inst.bandwidth, costs)
                found.append(Constraint("cap", "link", label, bought_link[e], cost.max_amount,
                                        "bit/s", saved(cheapest(raised), step)))  # fmt: skip
    for m in plan.memory:
        if m.memory is None or m.need <= 0 or m.need < m.memory * (1 - _TIGHT):
            continue
        found.append(Constraint("memory", "node", m.id, m.need, m.memory, "B"))
        v = inst.node_ids.index(m.id)
        cost = inst.memory_costs[v]
        if _at_cap(cost, m.added, True):
            step = _step(cost, eps, m.need)
            costs = list(inst.memory_costs)
            costs[v] = replace(cost, max_amount=cost.max_amount + step)  # type: ignore[type-var]
            raised = inst.with_memory(inst.memory, costs)
            found.append(Constraint("memory cap", "node", m.id, m.added, cost.max_amount, "B",
                                    saved(cheapest(raised), step)))  # fmt: skip
    bound = plan.target_latency
    if bound is not None and plan.latency is not None and plan.latency >= bound * (1 - _TIGHT):
        looser = cheapest(inst, latency=bound * (1 + eps))
        found.append(Constraint("latency", None, "latency", plan.latency, bound, "s",
                                saved(looser, bound * eps)))  # fmt: skip
    return tuple(found)


def _link_bought(plan: Plan, inst: CodesignInstance, e: int) -> float:
    link = inst.links[e]
    return math.fsum(u.amount for u in plan.link_upgrades
                     if (u.source, u.target) == (link.source, link.target))  # fmt: skip


def _at_cap(cost: CapacityCost, bought: float, tight: bool) -> bool:
    """Whether a purchase reaches its cost's cap: some capacity bought up to it, or none
    sold at all on a stage the target fills."""
    most = cost.max_amount
    if isinstance(cost, ModuleCost):
        most = cost.max_modules * cost.size
    if not math.isfinite(most):
        return False
    return (bought > 0 or tight) and bought >= most * (1 - CAP_RTOL)


def _step(cost: CapacityCost, eps: float, need: float) -> float:
    """How far to raise a cap for its margin: ``eps`` of it (of ``need``, what the target
    needs, for a cap of 0), a module at least."""
    step = eps * (cost.max_amount if cost.max_amount > 0 else need)
    if isinstance(cost, ModuleCost):
        step = max(step, cost.size)
    return step
