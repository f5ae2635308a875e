"""PSG under a latency bound: the co-design's Lagrangian relaxation and its ranked state paths.

A stage's trade (its best response at a multiplier) and a fixed deployment's exact allocation
are :mod:`~inferplan.codesign.latency.trade`; the least latency, the bound's check and the
error when no plan meets it are :mod:`~inferplan.codesign.latency.least`.

**The co-design under a latency bound** (:func:`solve_latency`, acyclic networks): a
Lagrangian relaxation of the latency constraint. At a multiplier ``lambda`` every transition
of PSG's state graph is priced by the best responses of its node and its link plus ``lambda``
times the link's propagation delay, and one relaxation of the state graph gives ``Phi(lambda)
= min over deployments``; ``Phi(lambda) - lambda L`` is a lower bound on the optimum for every
``lambda``. The multiplier is searched by bisection on the sign of its subgradient (the
latency of the relaxation's deployment, minus ``L``), and the state paths are then ranked by
their weight at the best multiplier found (Handler and Zang's method for constrained
shortest paths): a backward best-first search from the terminal, the forward labels as its
exact heuristic, yields the deployments in order of weight; each is allocated exactly; the
search stops when the next weight, less ``lambda L``, reaches the best plan's cost. The plan
is then proven optimal (status ``optimal`` when the bound meets its cost within
:data:`LATENCY_RTOL`).

**PFP under a latency bound** (:func:`frozen_latency_plan`): its frozen deployment, allocated
exactly.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field, replace

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.codesign.engine.psg import (
    Relaxation,
    backtrack,
    psg_path,
    relax_generations,
    take_min,
)
from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.latency.least import (
    check_latency,
    least_delay,
    least_latency,
    throughput_within,
    unreachable,
)
from inferplan.codesign.latency.trade import (
    DOUBLINGS,
    LATENCY_RTOL,
    MAX_RANKED,
    Trade,
    _LinearStages,
    _Stage,
    allocate,
    time_unit,
    trade_of,
)
from inferplan.codesign.memory import most_memory
from inferplan.codesign.plan import (
    INTERVAL_RTOL,
    Plan,
    PlanStatus,
    build_plan,
    check_scale,
    plan_from_path,
)
from inferplan.codesign.stages import stages
from inferplan.errors import Infeasible

__all__ = [
    "LATENCY_RTOL",
    "MAX_RANKED",
    "LatencyProblem",
    "Trade",
    "allocate",
    "check_latency",
    "frozen_latency_plan",
    "least_latency",
    "solve_latency",
    "throughput_within",
    "trade_of",
    "unreachable",
]
"""This module's names, and those it exported before :mod:`.trade` and :mod:`.least` were cut
from it (their homes), so that imports from here keep working."""

# The halvings of the search for the best bound (few: the ranking closes what a rougher bound
# leaves; 6 rather than 30 cuts the solve time on the paper's family by two thirds and on
# 1,000 nodes by a sixth, and changes no plan).
_DUAL_HALVINGS = 6


# A deployment read back from the terminal: (node, blocks done there, link out or -1) each.
_Suffix = tuple[tuple[int, int, int], ...]


@dataclass
class _Best:
    """The cheapest plan found so far: its cost, its deployment and purchases (path,
    partition, links, each stage's purchase), whether every allocation was exact to its end,
    and the deployments allocated already."""

    cost: float = math.inf
    deployment: tuple[list[int], list[int], list[int], list[float]] | None = None
    complete: bool = True
    seen: set[tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=set)


class LatencyProblem:
    """One co-design under a latency bound: the instance's trades, each deployment's exact
    allocation (:meth:`allocation`, on any network) and its plan (:meth:`plan`), and the
    stage tables the relaxation prices at each multiplier (acyclic networks).

    The relaxation works in units of :attr:`unit` seconds (:func:`time_unit`): its
    multipliers are prices per unit, its tables' capacities work per unit, the bound is
    :attr:`bound` units; deployments, allocations and plans are in seconds."""

    def __init__(self, inst: CodesignInstance, beta: float, latency: float) -> None:
        self.inst, self.beta, self.latency = inst, beta, latency
        largest = max(np.max(inst.capacity, initial=0.0), np.max(inst.bandwidth, initial=0.0))
        unit = self.unit = time_unit(latency, float(largest))
        self.bound = latency / unit
        self.node_trades = [trade_of(inst.node_costs[v]) for v in range(len(inst.node_ids))]
        links = inst.sweep_links
        self.link_trades = [trade_of(inst.link_costs[int(e)]) for e in links]
        # each node's loads, (1, K, K) when every node shares them (broadcast over nodes)
        self.work = inst.loads_or_zero_of(slice(None))
        self.bits = inst.activation_bits
        self.need_node = unit * np.maximum(0.0, self.work / beta
                                           - inst.capacity[:, None, None])  # fmt: skip
        self.need_link = unit * np.maximum(0.0, self.bits[None] / beta
                                           - inst.bandwidth[links, None])  # fmt: skip
        self.delay = inst.link_delay[links]
        # in units: what the tables price
        self.unit_trades = ([t.scaled(unit) for t in self.node_trades],
                            [t.scaled(unit) for t in self.link_trades])  # fmt: skip
        self.unit_have = (inst.capacity * unit, inst.bandwidth[links] * unit)
        self.unit_delay = self.delay / unit
        # the extra terms of the transitions (memory, ...): they depend on no capacity bought
        # here, so they add to every multiplier's prices and to a deployment's cost alike
        self.extra_node = inst.terms.node(np.arange(len(inst.node_ids)))
        self.extra_link = inst.terms.link(links)
        self.node_base = inst.forbidden + self.extra_node
        # the elements of one linear price (capped or not) priced together, the others one at
        # a time, by ``tables``
        self.linear: list[_LinearStages] = []
        self.others: list[list[int]] = []
        for trades, load, have, need in (
            (self.unit_trades[0], self.work, self.unit_have[0], self.need_node),
            (self.unit_trades[1], self.bits[None], self.unit_have[1], self.need_link),
        ):  # fmt: skip
            single = [k for k, t in enumerate(trades) if not t.is_modules and len(t.slopes) == 1]
            rows = np.array(single, dtype=np.int64)
            self.linear.append(_LinearStages(
                rows, load if len(load) == 1 else load[rows], have[rows], need[rows],
                np.array([trades[k].slopes[0] for k in single], dtype=np.float64),
                np.array([trades[k].cap for k in single], dtype=np.float64),
            ))  # fmt: skip
            self.others.append(sorted(set(range(len(trades))) - set(single)))

    def most(self) -> tuple[FloatArray, FloatArray]:
        """Every node's and link's capacity with the most its cost lets be added."""
        inst = self.inst
        node = inst.capacity + np.array([t.most for t in self.node_trades])
        link = inst.bandwidth.copy()
        link[inst.sweep_links] += np.array([t.most for t in self.link_trades])
        return node, link

    def tables(self, lam: float) -> tuple[FloatArray, FloatArray]:
        """Every transition's compute and link parts at multiplier ``lam`` (a price per
        :attr:`unit`; links in sweep order, with ``lam`` times their propagation delay): the
        elements of one linear price (capped or not) all at once, the others one at a time."""
        out = []
        for trades, load, have, need, linear, others in (
            (self.unit_trades[0], self.work, self.unit_have[0], self.need_node, self.linear[0],
             self.others[0]),
            (self.unit_trades[1], self.bits[None], self.unit_have[1], self.need_link,
             self.linear[1], self.others[1]),
        ):  # fmt: skip
            if not others:  # every element linear: the table is theirs, in row order
                table = linear.value(lam)
            else:
                table = np.empty(need.shape)
                if linear.rows.size:
                    table[linear.rows] = linear.value(lam)
                for k in others:
                    own = load[k if len(load) > 1 else 0]  # its loads, or the shared ones
                    _, f, d = trades[k].response(own, float(have[k]), need[k], lam)
                    with np.errstate(invalid="ignore"):  # 0 * inf where nothing fits: inf below
                        table[k] = np.where(np.isfinite(f), f + lam * d, np.inf)
            out.append(table)
        node, link = out
        node += self.node_base
        if lam:
            with np.errstate(invalid="ignore"):
                link += lam * self.unit_delay[:, None]
        link += self.extra_link
        return node, link

    def relax(self, lam: float) -> tuple[Relaxation, FloatArray, FloatArray]:
        """The relaxed state graph at multiplier ``lam`` and its two tables (``Phi(lam)`` is
        the target's last stage minimum); at ``lam = 0``, PSG's."""
        return self.relaxed(*self.tables(lam))

    def relax_delays(self) -> tuple[Relaxation, FloatArray, FloatArray]:
        """The state graph weighed by each transition's least delay (at the caps; ``inf``
        where the caps cannot meet the interval), relaxed, and its two tables."""
        inst = self.inst
        node_most, link_most = self.most()
        with np.errstate(divide="ignore", invalid="ignore"):
            node = self.work / node_most[:, None, None]
            link = self.bits[None] / link_most[inst.sweep_links, None]
        node = np.where(self.work > 0, node, 0.0)
        limit = self.beta * (1 + INTERVAL_RTOL)
        node[node > limit] = np.inf
        link[link > limit] = np.inf
        fits_node = np.where(np.isfinite(self.extra_node), 0.0, np.inf)
        fits_link = np.where(np.isfinite(self.extra_link), 0.0, np.inf)
        return self.relaxed(node + inst.forbidden + fits_node,
                            link + self.delay[:, None] + fits_link)  # fmt: skip

    def relaxed(
        self, node: FloatArray, link: FloatArray
    ) -> tuple[Relaxation, FloatArray, FloatArray]:
        """The state graph of transitions weighing ``node`` plus ``link`` (tables as
        :meth:`tables` makes them) relaxed, min-sum, and the two tables."""
        inst = self.inst
        start = np.full((len(inst.node_ids), inst.n_cuts), np.inf)
        start[inst.source, 0] = 0.0
        relaxed = relax_generations(
            inst, start, lambda gen, dist: take_min(dist[:, :, None] + node[gen.rows]),
            link.copy(), np.add,
        )  # fmt: skip
        return relaxed, node, link

    def search(self, method: str, floor: float) -> Plan:
        """The cheapest plan meeting the bound (the cheapest for the interval alone, of cost
        ``floor``, does not): the multiplier's search, then the ranking of state paths."""
        bound, best = self.bound, _Best()
        lower, lam = floor, 0.0  # the cheapest plan for the interval bounds every other one
        hi = max(floor, 1.0) / bound  # a first multiplier of the plans' own scale
        lo = 0.0
        for _ in range(DOUBLINGS):
            value, slow, found = self.dual(hi)
            if value > lower:
                lower, lam = value, hi
            if slow <= bound:
                self.consider(best, *found)
                break
            lo, hi = hi, hi * 2.0
        for _ in range(_DUAL_HALVINGS):
            if lower >= best.cost * (1 - LATENCY_RTOL):
                break
            mid = math.sqrt(lo * hi) if lo > 0 else hi / 2.0
            if not lo < mid < hi:
                break
            value, slow, found = self.dual(mid)
            if value > lower:
                lower, lam = value, mid
            if slow <= bound:
                self.consider(best, *found)
                hi = mid
            else:
                lo = mid
        lower = max(lower, self.rank(lam, best))
        if best.deployment is None:
            raise unreachable(self.beta, self.latency)
        certified = best.complete and best.cost <= lower + LATENCY_RTOL * abs(best.cost)
        return self.plan(*best.deployment, method, "optimal" if certified else "uncertified")

    def consider(
        self, best: _Best, path: list[int], partition: list[int], links: list[int]
    ) -> None:
        """Allocate a deployment exactly (once) and keep it if it is the cheapest yet."""
        key = (tuple(path), tuple(partition))
        if key in best.seen:
            return
        best.seen.add(key)
        found = self.allocation(path, partition, links)
        if found is None:
            return
        xs, cost, whole = found
        best.complete &= whole
        if cost < best.cost:
            best.cost, best.deployment = cost, (path, partition, links, xs)

    def dual(self, lam: float) -> tuple[float, float, tuple[list[int], list[int], list[int]]]:
        """The lower bound ``Phi(lam) - lam L``, the latency of the relaxation's deployment
        at its best responses, and that deployment."""
        relaxed, _, _ = self.relax(lam)
        phi = float(relaxed.stage_min[self.inst.target, -1])
        path, partition, links = backtrack(self.inst, relaxed)
        stage_list, propagation = self.stage_list(path, partition, links)
        unit = self.unit
        slow = propagation / unit + math.fsum(s.scaled(unit).respond(lam)[2] for s in stage_list)
        return phi - lam * self.bound, slow, (path, partition, links)

    def allocation(
        self, path: list[int], partition: list[int], links: list[int]
    ) -> tuple[list[float], float, bool] | None:
        """The exact allocation of a deployment (see :func:`allocate`), its cost with the
        extra terms of its transitions."""
        stage_list, propagation = self.stage_list(path, partition, links)
        found = allocate(stage_list, self.latency - propagation)
        if found is None:
            return None
        done = [0, *partition[:-1]]
        extra = math.fsum([
            *(float(self.extra_node[v, a, b]) for v, a, b in zip(path, done, partition,
                                                              strict=True)),
            *(float(self.extra_link[self.inst.sweep_position[e], b])
              for e, b in zip(links, partition, strict=False)),
        ])  # fmt: skip
        if not math.isfinite(extra):
            return None
        return found[0], found[1] + extra, found[2]

    def rank(self, lam: float, best: _Best) -> float:
        """Deployments in order of their weight at ``lam`` (a backward best-first search
        from the terminal whose heuristic, the forward labels, is exact), each allocated by
        :meth:`consider`, until the next weight less ``lam L`` reaches the best cost: the
        lower bound proven (``inf`` when no deployment is left). A partial path is dropped
        when even its cheapest completion at the interval's least purchases costs more than
        the best plan, or its fastest completion at the caps is slower than the bound."""
        inst, bound = self.inst, self.bound
        relaxed, node, link = self.relax(lam)
        cheap, cheap_node, cheap_link = self.relax(0.0)  # the interval's least purchases
        fast, fast_node, fast_link = self.relax_delays()
        label, N = relaxed.label, inst.last_cut
        position = inst.sweep_position
        # (priority, tie, node, blocks received, weight, cost and delay of the suffix, suffix)
        heap: list[tuple[float, int, int, int, float, float, float, _Suffix]] = []
        count = itertools.count()
        t = inst.target
        for i in range(N + 1):
            g = float(node[t, i, N])
            if math.isfinite(label[t, i] + g):
                heapq.heappush(heap, (float(label[t, i]) + g, next(count), t, i, g,
                                      float(cheap_node[t, i, N]), float(fast_node[t, i, N]),
                                      ((t, N, -1),)))  # fmt: skip
        expansions = 0
        slack = self.latency * (1 + INTERVAL_RTOL)  # the fastest delays are in seconds
        while heap:
            priority, _, v, i, g, c, d, suffix = heapq.heappop(heap)
            top = best.cost * (1 - LATENCY_RTOL)
            if priority - lam * bound >= top:
                return priority - lam * bound
            expansions += 1
            if expansions > MAX_RANKED:
                best.complete = False
                return priority - lam * bound
            if v == inst.source and i == 0:
                path = [u for u, _, _ in suffix]
                partition = [j for _, j, _ in suffix]
                self.consider(best, path, partition, [e for _, _, e in suffix if e >= 0])
                continue
            ins = inst.in_links[v]
            if not ins.size:
                continue
            us, rows = inst.link_src[ins], position[ins]
            lw = link[rows, i]
            lc = cheap_link[rows, i] + c
            ld = fast_link[rows, i] + d
            # every in-link's predecessors at once: h blocks done there, 0 <= h <= i
            reach = label[us, : i + 1] + node[us, : i + 1, i]
            keep = (np.isfinite(reach) & np.isfinite(lw)[:, None]
                    & (cheap.label[us, : i + 1] + cheap_node[us, : i + 1, i] + lc[:, None] < top)
                    & (fast.label[us, : i + 1] + fast_node[us, : i + 1, i] + ld[:, None] <= slack)
                    )  # fmt: skip
            for j, h in zip(*np.nonzero(keep), strict=True):
                u, e = int(us[j]), int(ins[j])
                heapq.heappush(heap, (float(reach[j, h]) + float(lw[j]) + g, next(count), u,
                                      int(h), g + float(node[u, h, i]) + float(lw[j]),
                                      float(lc[j]) + float(cheap_node[u, h, i]),
                                      float(ld[j]) + float(fast_node[u, h, i]),
                                      ((u, i, e), *suffix)))  # fmt: skip
        return math.inf

    def plan(
        self,
        path: list[int],
        partition: list[int],
        links: list[int],
        xs: list[float],
        method: str,
        status: PlanStatus,
    ) -> Plan:
        """The plan of a deployment and its stages' purchases (nodes first, then links)."""
        n = len(path)
        return build_plan(self.inst, method, self.beta, path, partition,
                          dict(zip(path, xs[:n], strict=True)),
                          dict(zip(links, xs[n:], strict=True)), links, status=status,
                          target_latency=self.latency)  # fmt: skip

    def stage_list(
        self, path: list[int], partition: list[int], links: list[int]
    ) -> tuple[list[_Stage], float]:
        """The stages of a deployment and its propagation delay."""
        inst = self.inst
        run = stages(inst, path, partition, links)
        rho, sigma = run.increments(self.beta, inst.capacity, inst.bandwidth)
        position = inst.sweep_position
        out = [_Stage(w, float(inst.capacity[v]), rho[v], self.node_trades[v])
               for v, w in zip(run.nodes, run.work, strict=True)]  # fmt: skip
        out += [_Stage(d, float(inst.bandwidth[e]), sigma[e],
                       self.link_trades[int(position[e])])
                for e, d in zip(run.links, run.bits, strict=True)]  # fmt: skip
        return out, math.fsum(run.propagation)


def solve_latency(inst: CodesignInstance, beta: float, *, latency: float) -> Plan:
    """The minimum-cost plan whose every stage takes at most ``beta`` and whose latency is at
    most ``latency`` (seconds), on an acyclic instance: the Lagrangian relaxation and the
    ranking of state paths of the module docstring, each deployment allocated exactly.

    Raises
    ------
    Infeasible
        If no deployment meets both bounds within the capacity caps (the least latency
        reachable is in the message).
    InvalidArgument
        For a cost given as a function, or a bound that is not a positive finite number.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, solve_psg, throughput_optimal
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> beta = 0.5 * throughput_optimal(inst).interval
    >>> free = solve_psg(inst, beta)
    >>> plan = solve_latency(inst, beta, latency=0.5 * free.latency)
    >>> plan.status, plan.latency <= 0.5 * free.latency * (1 + 1e-9), plan.cost > free.cost
    ('optimal', True, True)
    """
    inst.check_acyclic("PSG with a latency bound")
    check_latency(latency)
    check_scale(inst, beta)
    problem = LatencyProblem(inst, beta, latency)
    try:
        _, path, partition, links = psg_path(inst, beta)
    except Infeasible:
        raise unreachable(beta, latency) from None
    method = "psg"
    cheapest = plan_from_path(inst, method, beta, path, partition, links, status="optimal")
    if cheapest.latency is not None and cheapest.latency <= latency * (1 + INTERVAL_RTOL):
        return replace(cheapest, target_latency=latency)
    least = least_delay(inst, *problem.most(), beta, most_memory(inst))
    floor = math.fsum(inst.link_delay[least[3]])
    if not least[0] <= latency * (1 + INTERVAL_RTOL):
        raise unreachable(beta, latency, least[0], floor)
    try:
        return problem.search(method, cheapest.cost)
    except Infeasible:  # the least latency a hair within the bound: no purchase meets it
        raise unreachable(beta, latency, least[0], floor) from None


def frozen_latency_plan(
    inst: CodesignInstance,
    beta: float,
    latency: float,
    path: list[int],
    partition: list[int],
    method: str,
    status: PlanStatus,
) -> Plan:
    """The cheapest plan that runs ``partition`` along ``path`` within ``beta`` and
    ``latency``: the deployment's exact allocation (what PFP does under a latency bound).

    Raises
    ------
    Infeasible
        If no purchase within the caps brings this deployment within both bounds.
    """
    check_latency(latency)
    problem = LatencyProblem(inst, beta, latency)
    links = [inst.link_index(u, v) for u, v in itertools.pairwise(path)]
    found = problem.allocation(path, partition, links)
    if found is None:
        check_scale(inst, beta, math.inf)
        floor = math.fsum(inst.link_delay[links])
        # a bound at most the path's propagation delays leaves its stages no time
        raise unreachable(beta, latency, *((floor, floor) if latency <= floor else ()))
    return problem.plan(path, partition, links, found[0], method, status)
