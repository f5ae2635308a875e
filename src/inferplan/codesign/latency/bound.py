"""Plans under a latency bound, and the deployment of least latency.

**The trade of one stage.** A stage with load ``w`` (the FLOPs a node computes, or the bits a
link carries) on capacity ``C`` takes ``w / (C + x)`` seconds after ``x`` is bought at
``f(x)``; the interval asks ``x >= rho = max(0, w / beta - C)`` and the cost allows ``x <=``
its cap. Under a latency bound ``L`` buying more than ``rho`` can pay, so each stage is priced
at a multiplier ``lambda >= 0`` (seconds priced at ``lambda`` each) by its best response::

    phi(lambda) = min over rho <= x <= cap of f(x) + lambda w / (C + x)

exact for every piecewise-linear cost (on each segment ``p x + lambda w / (C + x)`` is convex:
its minimum is the stationary point ``x = sqrt(lambda w / p) - C`` clamped to the segment) and
for module costs (the same in whole modules: the two counts around the stationary one).

**A fixed deployment** (:func:`allocate`): least ``sum f(x)`` with ``sum w / (C + x) <= L -
(its propagation delays)``. For convex costs (linear, capped, tiers of rising prices) it is a
convex problem whose optimum is every stage's best response at the one multiplier where the
delays just fit, found by bisection (the delays fall as the multiplier grows). Module costs
and tiers of falling prices are not convex: their stages are enumerated exactly, piece by
piece (each module count, each tier), each choice's convex rest allocated by bisection,
branch and bound on cost and delay.

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

**Least latency** (:func:`least_latency`): the state graph with each transition weighed by
its delay ``w(i, j) / C_v + D_j / B_(v,z) + delay_s(v, z)`` (min-sum), transitions slower than
an interval ruled out.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from inferplan.arrays import FloatArray, IntArray
from inferplan.codesign.engine.psg import (
    Relaxation,
    backtrack,
    by_chunks,
    psg_path,
    relax_generations,
    take_min,
)
from inferplan.codesign.instance import CodesignInstance, Generation
from inferplan.codesign.memory import most_memory
from inferplan.codesign.plan import (
    INTERVAL_RTOL,
    Deployment,
    Plan,
    PlanStatus,
    build_deployment,
    build_plan,
    check_scale,
    plan_from_path,
)
from inferplan.codesign.stages import stages
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.costs import CapacityCost, ModuleCost, segments

__all__ = [
    "LATENCY_RTOL",
    "MAX_RANKED",
    "LatencyProblem",
    "Trade",
    "allocate",
    "least_latency",
    "solve_latency",
    "throughput_within",
    "trade_of",
]

LATENCY_RTOL = 1e-9
"""A plan is ``optimal`` when its cost is within this fraction of the proven lower bound."""
MAX_RANKED = 200_000
"""The most state-path expansions (and branch-and-bound leaves) before a plan is left
``uncertified``."""
# The multipliers' bisections: steps of the search for a feasible multiplier, halvings of the
# bracket (of its logarithm) after it in an allocation, and in the search for the best bound
# (few: the ranking closes what a rougher bound leaves; 6 rather than 30 cuts the solve time
# on the paper's family by two thirds and on 1,000 nodes by a sixth, and changes no plan).
_DOUBLINGS, _HALVINGS, _DUAL_HALVINGS = 2_200, 100, 6
# Stages of a deployment from which their responses are computed with numpy at once.
_MANY_STAGES = 24
# Bounds within 2**+-_UNSCALED seconds are solved in seconds; others in a unit of their own size.
_UNSCALED = 64
FREE_SHARE = 1e-12
"""The share of the latency bound a stage on capacity that is free without end is sped up to
(every allocation under a latency bound, single or joint services, uses it)."""


@dataclass(frozen=True)
class Trade:
    """A capacity cost as a trade of cost against delay: piecewise linear (``starts``,
    ``slopes``, ``values`` at each start, ``cap``) or modules (``size``, ``price``, at most
    ``modules`` of them)."""

    starts: tuple[float, ...] = ()
    slopes: tuple[float, ...] = ()
    values: tuple[float, ...] = ()
    cap: float = math.inf
    size: float = 0.0
    price: float = 0.0
    modules: float = 0.0

    @property
    def is_modules(self) -> bool:
        return self.size > 0

    @cached_property  # asked of every stage of every deployment an allocation ranks
    def convex(self) -> bool:
        """Whether the cost is convex (piecewise linear with rising slopes, or free)."""
        if self.is_modules:
            return self.price == 0
        return all(b >= a for a, b in itertools.pairwise(self.slopes))

    @cached_property
    def most(self) -> float:
        """The most capacity that can be added."""
        return self.modules * self.size if self.is_modules else self.cap

    def ends(self) -> list[float]:
        return [*self.starts[1:], self.cap]

    def response(
        self, load: FloatArray, have: float, need: FloatArray, lam: float
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The best response at multiplier ``lam`` of stages with ``load`` on capacity
        ``have`` needing at least ``need``: the capacity bought, its cost and the delay
        (``inf`` cost where nothing within the cap meets ``need``)."""
        load, need = np.asarray(load, dtype=np.float64), np.asarray(need, dtype=np.float64)
        best_x = np.full(load.shape, np.nan)
        best_f = np.full(load.shape, np.inf)
        best_v = np.full(load.shape, np.inf)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for x, f in self._candidates(load, have, need, lam):
                delay = np.where(load > 0, load / (have + x), 0.0)
                value = f + lam * delay
                better = value < best_v
                best_x = np.where(better, x, best_x)
                best_f = np.where(better, f, best_f)
                best_v = np.where(better, value, best_v)
            delay = np.where(load > 0, load / (have + best_x), 0.0)
        return best_x, best_f, np.where(np.isfinite(best_f), delay, np.inf)

    def _candidates(
        self, load: FloatArray, have: float, need: FloatArray, lam: float
    ) -> list[tuple[FloatArray, FloatArray]]:
        if self.is_modules:
            low = np.ceil(need / self.size * (1 - 1e-12))
            if self.price > 0:
                star = (_root(lam, load * self.size, self.price) - have) / self.size
                counts = [np.floor(star), np.ceil(star)]
            else:
                counts = [np.full(load.shape, self.modules)]
            out = []
            for m in counts:
                m = np.minimum(np.maximum(m, low), self.modules)
                ok = (m >= low) & np.isfinite(m) | (self.price == 0)
                x = np.where(np.isfinite(m), m * self.size, np.inf)
                out.append((x, np.where(ok, self.price * np.where(np.isfinite(m), m, 0), np.inf)))
            return out
        out = []
        for a, b, p, v in zip(self.starts, self.ends(), self.slopes, self.values, strict=True):
            lo = np.maximum(need, a)
            if p > 0:
                x = np.minimum(np.maximum(_root(lam, load, p) - have, lo), b)
                f = v + p * (x - a)
            else:
                x = np.full(load.shape, b)
                f = np.full(load.shape, v)
            out.append((x, np.where(lo <= b, f, np.inf)))
        return out

    def cost(self, x: float) -> float:
        """The cost of adding ``x`` (within the cap)."""
        if self.is_modules:
            return self.price * math.ceil(x / self.size * (1 - 1e-12))
        k = max(0, int(np.searchsorted(self.starts, x, side="right")) - 1)
        return self.values[k] + self.slopes[k] * (x - self.starts[k]) if self.slopes[k] else (
            self.values[k])  # fmt: skip

    def relaxation(self) -> Trade:
        """A convex cost at most this one: modules priced per unit, tiers at their lowest
        marginal price."""
        if self.is_modules:
            return Trade((0.0,), (self.price / self.size,), (0.0,), self.most)
        return Trade((0.0,), (min(self.slopes),), (0.0,), self.cap)

    def scaled(self, unit: float) -> Trade:
        """The same cost with time in units of ``unit`` seconds: amounts of capacity (work
        per unit of time) times ``unit``, prices per amount divided by it."""
        if unit == 1.0:
            return self
        return Trade(tuple(a * unit for a in self.starts), tuple(p / unit for p in self.slopes),
                     self.values, self.cap * unit, self.size * unit, self.price,
                     self.modules)  # fmt: skip

    def pieces(self, need: float, budget: float) -> Iterator[Trade]:
        """The convex pieces of a cost that is not convex, each as a trade of its own: each
        segment, or each module count from the least that meets ``need`` while its cost is
        below ``budget``."""
        if not self.is_modules:
            yield from (Trade((a,), (p,), (v,), b) for a, b, p, v in
                        zip(self.starts, self.ends(), self.slopes, self.values, strict=True)
                        if max(a, need) <= b)  # fmt: skip
            return
        m = float(math.ceil(need / self.size * (1 - 1e-12)))
        while m <= self.modules and self.price * m < budget:  # free modules are convex
            yield Trade((m * self.size,), (0.0,), (self.price * m,), m * self.size)
            m += 1


def time_unit(latency: float, capacity: float = 1.0) -> float:
    """The unit of time, in seconds, a solve under a bound of ``latency`` seconds works in: the
    second for bounds of ordinary size, otherwise the largest power of two not above the bound
    (so that it is finite for every finite bound, 1e308 s included). The
    multiplier is a price per unit of time, about the cost divided by the bound, and the
    capacities bought are work per unit of time: at a bound of ``1e-200`` s either, in
    seconds, is beyond floating point (their squares, or their product with a load), in
    units of the bound they are of the plan's own scale. Above ``2**64`` s the unit is also
    kept small enough that ``capacity`` (the largest the solve holds) times it stays within
    ``2**512``, so that their squares are finite (a bound of 1e307 s over capacities of 1e8
    is solved in units of 2**484 s, not 2**1019 s, which left every capacity inf), and large
    enough that the bound is within ``2**1000`` of it. A power of two, so every quantity
    rescaled is the same number of seconds exactly."""
    exponent = math.frexp(latency)[1]
    if abs(exponent) <= _UNSCALED:
        return 1.0
    if exponent > 0 and capacity > 1.0:
        # capacities times the unit within 2**512 (their squares finite), the bound in units
        # within 2**1000
        least = exponent - 1000
        exponent = max(min(exponent, 512 - math.frexp(capacity)[1]), least)
    return math.ldexp(1.0, exponent - 1)


def _root(lam: float, load: FloatArray, price: float) -> FloatArray:
    """``sqrt(lam load / price)``, the stationary capacity of a stage, without forming the
    product (which leaves floating point before its root does)."""
    return math.sqrt(lam) * (np.sqrt(load) / math.sqrt(price))


def trade_of(cost: CapacityCost) -> Trade:
    """The trade of a linear, tiered, capped or module cost.

    Raises
    ------
    InvalidArgument
        For a cost given as a function, whose best response has no exact form.
    """
    if isinstance(cost, ModuleCost):
        if cost.price == 0:  # free modules, however small, are free capacity up to the cap
            most = cost.max_modules * cost.size
            return Trade((0.0,), (0.0,), (0.0,), most if math.isfinite(most) else cost.max_amount)
        return Trade(size=cost.size, price=cost.price, modules=cost.max_modules)
    pieces = segments(cost)
    if pieces is None:
        raise InvalidArgument(
            f"a latency bound needs linear, tiered, capped or module costs, got {cost!r}",
            field="latency",
        )
    # Python floats: a cost beyond floating point is inf, without numpy's overflow warning
    starts, slopes, values = (tuple(map(float, x)) for x in (pieces.starts, pieces.slopes,
                                                             pieces.values))  # fmt: skip
    return Trade(starts, slopes, values, pieces.cap)


@dataclass(frozen=True)
class _Stage:
    load: float
    have: float
    need: float
    trade: Trade

    def scaled(self, unit: float) -> _Stage:
        """The stage with time in units of ``unit`` seconds (see :meth:`Trade.scaled`)."""
        if unit == 1.0:
            return self
        return _Stage(self.load, self.have * unit, self.need * unit, self.trade.scaled(unit))

    def respond(self, lam: float) -> tuple[float, float, float]:
        """The best response at ``lam``: capacity bought, its cost and the delay (plain
        Python: one stage at a time is what an allocation asks, and numpy's cost per call
        would outweigh it)."""
        w, C, need, t = self.load, self.have, self.need, self.trade
        if w <= 0:
            return need, t.cost(need) if need > 0 else 0.0, 0.0
        best = (math.nan, math.inf, math.inf, math.inf)  # value, x, cost, delay
        if t.is_modules:
            low = need / t.size * (1 - 1e-12)
            if math.isinf(low):  # more modules than floating point counts, at a price
                return math.nan, math.inf, math.inf
            low = float(math.ceil(low))
            if t.price > 0:
                star = (math.sqrt(lam) * (math.sqrt(w) * math.sqrt(t.size) / math.sqrt(t.price))
                        - C) / t.size  # fmt: skip
                # beyond floating point, as many as can be bought: at a price, inf
                whole = math.isfinite(star)
                counts = [float(math.floor(star)), float(math.ceil(star))] if whole else [t.modules]
            else:
                counts = [t.modules]
            for m in counts:
                m = min(max(m, low), t.modules)
                x = m * t.size if math.isfinite(m) else math.inf
                f = t.price * m if math.isfinite(m) else math.inf if t.price > 0 else 0.0
                d = w / (C + x)
                value = f + lam * d
                if not value >= best[0]:
                    best = (value, x, f, d)
            if low > t.modules:
                return math.nan, math.inf, math.inf
            return best[1], best[2], best[3]
        for a, b, p, v in zip(t.starts, t.ends(), t.slopes, t.values, strict=True):
            lo = max(need, a)
            if lo > b:
                continue
            if p > 0:
                x = min(max(math.sqrt(lam) * (math.sqrt(w) / math.sqrt(p)) - C, lo), b)
                f = v + p * (x - a)
            else:
                x, f = b, v
            d = w / (C + x)
            value = f + lam * d
            if not value >= best[0]:
                best = (value, x, f, d)
        return best[1], best[2], best[3]


def allocate(
    stage_list: Sequence[_Stage], budget: float, limit: int = MAX_RANKED
) -> tuple[list[float], float, bool] | None:
    """The cheapest capacities for ``stage_list`` whose delays sum to at most ``budget``
    (seconds): each stage's purchase, the total cost, and whether the enumeration of
    non-convex stages ran to its end (``limit`` nodes); ``None`` if no purchase within the
    caps fits.

    Convex costs: every stage's best response at the multiplier where the delays just fit.
    Otherwise branch and bound over the pieces of the non-convex stages (each module count,
    each tier), bounded below by the convex relaxation of the stages not yet fixed (modules
    priced per unit, falling tiers at their lowest price), each leaf allocated as convex.
    A budget far from a second is allocated in units of its own size (:func:`time_unit`)."""
    most = max((s.have for s in stage_list), default=1.0)
    unit = time_unit(budget, most) if budget > 0 else 1.0
    if unit != 1.0:
        in_units = allocate([s.scaled(unit) for s in stage_list], budget / unit, limit)
        if in_units is None:
            return None
        return [x / unit for x in in_units[0]], in_units[1], in_units[2]
    if budget < 0 or any(s.need > s.trade.most for s in stage_list):
        return None
    if budget == 0 and any(s.load > 0 for s in stage_list):
        return None  # no finite capacity does work in no time
    least = math.fsum(s.load / (s.have + s.trade.most) for s in stage_list if s.load > 0)
    if least > budget:
        return None
    odd = [k for k, s in enumerate(stage_list) if not s.trade.convex and s.load > 0]
    found = _convex_allocation(stage_list, budget)  # exact if convex, feasible otherwise
    if not odd:
        return None if found is None else (*found, True)
    best: list[tuple[list[float], float] | None] = [found]
    relaxed = {k: replace(stage_list[k], trade=stage_list[k].trade.relaxation()) for k in odd}
    at_least = [s.load / (s.have + s.need) if s.load > 0 else 0.0 for s in stage_list]
    nodes = [0]

    def search(depth: int, chosen: dict[int, _Stage]) -> None:
        nodes[0] += 1
        trial = [chosen.get(k) or relaxed.get(k) or s for k, s in enumerate(stage_list)]
        bound = _convex_allocation(trial, budget)
        incumbent = best[0][1] if best[0] is not None else math.inf
        if bound is None or bound[1] >= incumbent * (1 - LATENCY_RTOL):
            return  # not even the relaxation of the rest beats the best
        if depth == len(odd):
            best[0] = bound
            return
        if nodes[0] >= limit:
            return
        k = odd[depth]
        s = stage_list[k]
        others = math.fsum(d for j, d in enumerate(at_least) if j != k and j not in odd[depth:])
        others += math.fsum(chosen[j].load / (chosen[j].have + chosen[j].trade.cap)
                            for j in chosen)  # fmt: skip
        floor = math.fsum(t.trade.cost(t.need) for j, t in enumerate(stage_list)
                          if j != k and j not in chosen)  # fmt: skip
        floor += math.fsum(t.trade.cost(t.trade.starts[0]) for t in chosen.values())
        for piece in s.trade.pieces(s.need, incumbent - floor):
            search(depth + 1, {**chosen, k: replace(s, trade=piece)})
            later = math.fsum(at_least[j] for j in odd[depth + 1 :])
            if s.trade.is_modules and others + s.load / (s.have + piece.cap) + later <= budget:
                break  # the rest fit at their least: more modules here only cost more

    search(0, {})
    if best[0] is None:
        return None
    return best[0][0], best[0][1], nodes[0] < limit


def _convex_allocation(
    stage_list: Sequence[_Stage], budget: float
) -> tuple[list[float], float] | None:
    """Every stage's best response at the least multiplier whose delays fit ``budget``: the
    optimum when every cost is convex, a feasible allocation otherwise."""

    def one_by_one(lam: float) -> tuple[list[float], float, float, int]:
        xs, fs, ds, free = [], [], [], 0
        for s in stage_list:
            x, f, d = s.respond(lam)
            xs.append(x)
            fs.append(f)
            ds.append(d)
            free += math.isinf(x) and s.load > 0
        return xs, math.fsum(fs), math.fsum(ds), free

    if math.fsum(s.load / (s.have + s.trade.most) for s in stage_list if s.load > 0) > budget:
        return None  # too slow even at the caps
    modules = any(s.trade.is_modules for s in stage_list)
    # piecewise-linear costs: the segments' marks at once; the responses of many stages at
    # once too (numpy), of a few one by one (numpy's cost per call would outweigh them)
    many = not modules and len(stage_list) >= _MANY_STAGES
    segments = _Segments(stage_list) if many else None
    at = segments.at if segments is not None else one_by_one
    xs, cost, delay, _ = at(0.0)
    if not math.isfinite(cost):
        return None
    if not modules:
        if delay > budget:
            segments = segments or _Segments(stage_list)
            xs, cost, delay, _ = at(segments.multiplier(budget, at))
    elif delay > budget:
        lo, hi = 0.0, 1.0
        for _ in range(_DOUBLINGS):
            xs, cost, delay, _ = at(hi)
            if delay <= budget:
                break
            lo, hi = hi, hi * 2.0
        else:
            return None
        if lo == 0.0:  # the bound may hold at a smaller multiplier: search below 1 too
            lo = hi
            for _ in range(_DOUBLINGS):
                lo /= 2.0
                trial = at(lo)
                if trial[2] > budget or lo < 1e-300:
                    break
                xs, cost, delay, _ = trial
                hi = lo
        for _ in range(_HALVINGS):
            mid = math.sqrt(lo * hi) if lo > 0 else hi / 2.0
            if not lo < mid < hi:
                break
            trial = at(mid)
            if trial[2] <= budget:
                hi, (xs, cost, delay, _) = mid, trial
            else:
                lo = mid
    return _finite(stage_list, xs, budget, delay), cost


class _Segments:
    """The stages of a deployment whose costs are piecewise linear (no modules) as arrays of
    their segments, so that every stage's best response at a multiplier (what
    :meth:`_Stage.respond` gives, segment by segment) is a few numpy operations, and the
    least multiplier whose responses fit a budget is found among the segments' marks."""

    def __init__(self, stage_list: Sequence[_Stage]) -> None:
        self.stages = len(stage_list)
        trades = [st.trade for st in stage_list]
        owner = [k for k, t in enumerate(trades) for _ in t.slopes]
        a = [x for t in trades for x in t.starts]
        b = [x for t in trades for x in t.ends()]
        p = [x for t in trades for x in t.slopes]
        v = [x for t in trades for x in t.values]
        self.owner = np.array(owner, dtype=np.int64)
        self.a, self.b, self.p, self.v = (np.array(x, dtype=np.float64) for x in (a, b, p, v))
        load = np.array([st.load for st in stage_list], dtype=np.float64)
        need = np.array([st.need for st in stage_list], dtype=np.float64)
        self.load, self.have = load, np.array([st.have for st in stage_list], dtype=np.float64)
        self.w, self.C = load[self.owner], self.have[self.owner]
        self.lo = np.maximum(need[self.owner], self.a)
        self.valid = self.lo <= self.b
        self.sloped = self.p > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            # sqrt(w / p), of which the response is sqrt(lam) times: never w / p, which
            # overflows where a bound near 1e308 s prices capacity per unit of its own size
            self.root = np.where(self.sloped,
                                 np.sqrt(self.w) / np.sqrt(np.where(self.sloped, self.p, 1.0)),
                                 0.0)  # fmt: skip
        # a stage without load buys what the interval needs, at its price, and takes no time
        self.idle = load <= 0
        self.idle_x = need
        self.idle_f = np.array([st.trade.cost(st.need) if st.need > 0 else 0.0
                                for st in stage_list])  # fmt: skip
        # each stage's segments in order: the first of the least value wins, as in respond
        self.order = np.arange(self.owner.size)

    def respond(self, lam: float) -> tuple[FloatArray, FloatArray, FloatArray, IntArray]:
        """Every stage's best response at ``lam``: capacity bought, its cost and delay, and the
        segment it buys in (``inf`` purchase, cost and delay where no segment meets the
        need)."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x = np.where(self.sloped, math.sqrt(lam) * self.root - self.C, self.b)
            np.maximum(x, self.lo, out=x, where=self.sloped)
            np.minimum(x, self.b, out=x)
            f = np.where(self.sloped, self.v + self.p * (x - self.a), self.v)
            d = self.w / (self.C + x)
            value = f + lam * d
        value[~self.valid] = np.inf
        first = np.lexsort((self.order, value, self.owner))
        chosen = first[np.flatnonzero(np.r_[True, self.owner[first][1:] != self.owner[first][:-1]])]
        stage = self.owner[chosen]
        xs, fs, ds = (np.full(self.stages, np.inf) for _ in range(3))
        ok = self.valid[chosen]
        xs[stage[ok]], fs[stage[ok]], ds[stage[ok]] = x[chosen][ok], f[chosen][ok], d[chosen][ok]
        segment = np.full(self.stages, -1, dtype=np.int64)
        segment[stage[ok]] = chosen[ok]
        xs[self.idle], fs[self.idle], ds[self.idle] = self.idle_x[self.idle], self.idle_f[
            self.idle], 0.0  # fmt: skip
        segment[self.idle] = -1
        return xs, fs, ds, segment

    def at(self, lam: float) -> tuple[list[float], float, float, int]:
        """The responses at ``lam`` as :func:`_convex_allocation` sums them."""
        xs, fs, ds, _ = self.respond(lam)
        free = int(np.count_nonzero(np.isinf(xs) & ~self.idle))
        return xs.tolist(), math.fsum(fs.tolist()), math.fsum(ds.tolist()), free

    def multiplier(
        self, budget: float, at: Callable[[float], tuple[list[float], float, float, int]]
    ) -> float:
        """The least multiplier whose best responses (summed by ``at``) fit ``budget``.

        A stage's delay is constant in the multiplier except where it buys inside a segment
        of slope ``p``: there ``x = sqrt(lam w / p) - C`` and the delay is ``sqrt(w p /
        lam)``. Between two of the multipliers where a stage enters or leaves a segment the
        total is ``K + A / sqrt(lam)``; the bracket where it crosses ``budget`` is found among
        them by bisection and the multiplier solved there in closed form."""
        use = (self.w > 0) & self.sloped & self.valid
        with np.errstate(over="ignore"):  # p (C + x)^2 / w, as the square of its root
            scale = np.sqrt(self.p[use]) / np.sqrt(self.w[use])
            marks = np.concatenate((
                (scale * (self.C[use] + self.lo[use])) ** 2,
                (scale * (self.C[use] + self.b[use])) ** 2,
            ))  # fmt: skip
        points = np.unique(marks[np.isfinite(marks) & (marks > 0)]).tolist()
        lo, hi = 0, len(points)  # the first mark whose responses fit, or len(points)
        while lo < hi:
            mid = (lo + hi) // 2
            if at(points[mid])[2] <= budget:
                hi = mid
            else:
                lo = mid + 1
        below = points[lo - 1] if lo > 0 else 0.0
        above = points[lo] if lo < len(points) else math.inf
        probe = math.sqrt(below * above) if below > 0 and math.isfinite(above) else (
            above / 2 if math.isfinite(above) else max(2 * below, 1.0))  # fmt: skip
        xs, _, ds, segment = self.respond(probe)
        k = np.maximum(segment, 0)
        inside = (~self.idle & (segment >= 0) & self.sloped[k]
                  & (self.lo[k] < xs) & (xs < self.b[k]))  # fmt: skip
        sloped = np.sqrt(self.load[inside] * self.p[k[inside]]).tolist()
        room = budget - math.fsum(ds[~inside].tolist())
        ratio = math.fsum(sloped) / room if sloped and room > 0 else math.inf
        if ratio * ratio < math.inf:  # a square beyond floating point: search as past the marks
            lam = min(max(ratio * ratio, below), above)
            for _ in range(4):  # rounding may leave the sum a hair above the budget
                if at(lam)[2] <= budget:
                    return lam
                lam *= 1 + 1e-14
        if math.isfinite(above):
            return above
        lam = probe
        for _ in range(_DOUBLINGS):  # past every mark: the responses fit for a large enough one
            if at(lam)[2] <= budget:
                break
            lam *= 2.0
        return lam


def _finite(
    stage_list: Sequence[_Stage], xs: list[float], budget: float, delay: float
) -> list[float]:
    """``xs`` with every unbounded free purchase made finite: each such stage gets a small
    share of the latency left (free capacity costs nothing, so the cost is unchanged)."""
    free = [k for k, x in enumerate(xs) if math.isinf(x)]
    if not free:
        return xs
    share = max(budget - delay, 0.0) / len(free)
    share = share if share > 0 else FREE_SHARE * budget
    out = list(xs)
    for k in free:
        s = stage_list[k]
        out[k] = max(s.need, s.load / share - s.have) if s.load > 0 else s.need
    return out


class _LinearStages:
    """The stages of the elements of one linear price (capped or not) in a table, priced
    together at each multiplier: ``min p x + lam w / (C + x)`` over ``need <= x <= cap``, the
    stationary point ``x = sqrt(lam w / p) - C`` clamped to that range, or the cap where
    capacity is free (``inf`` where ``need`` exceeds the cap). What does not depend on the
    multiplier is computed once: a solve prices the same tables at a dozen multipliers.

    ``rows`` are the elements' rows of the table, ``load`` the loads broadcast against
    ``need`` (one row per element), ``have``, ``price`` and ``cap`` one value per element."""

    def __init__(
        self,
        rows: IntArray,
        load: FloatArray,
        have: FloatArray,
        need: FloatArray,
        price: FloatArray,
        cap: FloatArray,
    ) -> None:
        shape = (-1,) + (1,) * (need.ndim - 1)
        p, top = price.reshape(shape), cap.reshape(shape)
        self.rows = rows
        self.have = have.reshape(shape)
        self.load = np.broadcast_to(load, need.shape)
        self.price = np.where(p > 0, p, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.root = np.where(p > 0, np.sqrt(self.load) / np.sqrt(p), 0.0)  # sqrt(w / p)
        self.low = need
        self.top = np.broadcast_to(top, need.shape)
        self.free = np.broadcast_to(p <= 0, need.shape)
        self.any_free = bool(self.free.any())
        self.idle = self.load <= 0
        self.blocked = need > self.top

    def value(self, lam: float) -> FloatArray:
        """Every stage's best response's value ``f(x) + lam w / (C + x)`` at ``lam``."""
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x = math.sqrt(lam) * self.root
            x -= self.have
            if self.any_free:
                x[self.free] = self.top[self.free]
            np.maximum(x, self.low, out=x)
            np.minimum(x, self.top, out=x)
            delay = self.load / (self.have + x)
            delay[self.idle] = 0.0
            value = self.price * x
            if self.any_free:  # 0 * inf where free capacity is unbounded: nothing to pay
                value[self.free] = 0.0
            value += lam * delay
        value[self.blocked] = np.inf
        return value


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
        self.work = inst.work_or_zero
        self.bits = inst.activation_bits
        self.need_node = unit * np.maximum(0.0, self.work[None] / beta
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
            (self.unit_trades[0], self.work[None], self.unit_have[0], self.need_node),
            (self.unit_trades[1], self.bits[None], self.unit_have[1], self.need_link),
        ):  # fmt: skip
            single = [k for k, t in enumerate(trades) if not t.is_modules and len(t.slopes) == 1]
            rows = np.array(single, dtype=np.int64)
            self.linear.append(_LinearStages(
                rows, load, have[rows], need[rows],
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
            (self.unit_trades[1], self.bits, self.unit_have[1], self.need_link, self.linear[1],
             self.others[1]),
        ):  # fmt: skip
            if not others:  # every element linear: the table is theirs, in row order
                table = linear.value(lam)
            else:
                table = np.empty(need.shape)
                if linear.rows.size:
                    table[linear.rows] = linear.value(lam)
                for k in others:
                    _, f, d = trades[k].response(load, float(have[k]), need[k], lam)
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
            node = self.work[None] / node_most[:, None, None]
            link = self.bits[None] / link_most[inst.sweep_links, None]
        node = np.where(self.work[None] > 0, node, 0.0)
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
        for _ in range(_DOUBLINGS):
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
    if not least[0] <= latency * (1 + INTERVAL_RTOL):
        raise unreachable(beta, latency, least[0], math.fsum(inst.link_delay[least[3]]))
    return problem.search(method, cheapest.cost)


def check_latency(latency: float) -> None:
    """Refuse a latency bound that is not a positive finite number of seconds."""
    if isinstance(latency, bool) or not (
        isinstance(latency, int | float) and math.isfinite(latency) and latency > 0
    ):
        raise InvalidArgument(f"must be a positive finite number of seconds, got {latency!r}",
                              field="latency")  # fmt: skip


def unreachable(
    beta: float, latency: float, least: float | None = None, floor: float = 0.0
) -> Infeasible:
    """The error every method raises when no plan meets both ``beta`` and ``latency``:
    ``least``, the least latency within the caps, when known, and ``floor``, the propagation
    delays of that deployment's links; when they are all of ``least`` (every stage takes no
    time at the caps, as where nothing is capped), the message blames them, not the caps."""
    if least is not None and least <= floor * (1 + INTERVAL_RTOL):
        return Infeasible(f"no plan reaches an interval of {beta:g} s and a latency of "
                          f"{latency:g} s: the least latency is {least:.6g} s, all of it the "
                          "propagation delays of the links on the way (delay_s), which no "
                          "capacity bought can shorten")  # fmt: skip
    more = "" if least is None else f" (the least latency within the caps is {least:.6g} s)"
    return Infeasible(f"no plan reaches an interval of {beta:g} s and a latency of "
                      f"{latency:g} s within the capacity caps{more}")  # fmt: skip


def least_delay(
    inst: CodesignInstance,
    capacity: FloatArray,
    bandwidth: FloatArray,
    beta: float | None,
    memory: FloatArray | None = None,
) -> tuple[float, list[int], list[int], list[int]]:
    """The deployment of least latency under ``capacity`` and ``bandwidth`` among those whose
    every stage takes at most ``beta`` (any, for ``None``) and whose every node holds its
    blocks within ``memory`` (bytes per node; today's when not given): its latency, path,
    partition and links (``inf`` and no path when none). The state graph, min-sum, each
    transition weighed by its compute, transfer and propagation delays; the nodes' pairs in
    chunks, so no table of every transition is ever held."""
    need = inst.memory_need
    memory = inst.memory if memory is None else memory
    limited = bool(np.isfinite(memory).any())
    work, forbidden = inst.work_or_zero, inst.forbidden
    limit = math.inf if beta is None else beta * (1 + INTERVAL_RTOL)

    def stage(gen: Generation, dist: FloatArray) -> tuple[FloatArray, IntArray]:
        have, room = capacity[gen.rows], memory[gen.rows]

        def step(part: slice) -> tuple[FloatArray, IntArray]:
            if np.isfinite(have[part]).all():  # inf / C is inf where i > j: one pass less
                delay = inst.work_between[None] / have[part, None, None]
            else:  # 0 where no work, even at an unbounded capacity
                delay = work[None] / have[part, None, None]
                delay += forbidden
            if limited:
                delay[need[None] > room[part, None, None]] = np.inf
            if beta is not None:
                delay[delay > limit] = np.inf
            delay += dist[part, :, None]
            return take_min(delay)

        rows, width = dist.shape
        return by_chunks(rows, width, step)

    links = inst.sweep_links
    with np.errstate(divide="ignore"):
        link = inst.activation_bits[None, :] / bandwidth[links, None]
    if beta is not None:
        link[link > limit] = np.inf
    link += inst.link_delay[links, None]
    start = np.full((len(inst.node_ids), inst.n_cuts), np.inf)
    start[inst.source, 0] = 0.0
    relaxed = relax_generations(inst, start, stage, link, np.add)
    total = float(relaxed.stage_min[inst.target, -1])
    if not math.isfinite(total):
        return total, [], [], []
    return (total, *backtrack(inst, relaxed))


def least_latency(inst: CodesignInstance, beta: float | None = None) -> Deployment:
    """The deployment of least latency under the existing capacities, among those whose
    every stage takes at most ``beta`` when given (acyclic instances).

    Raises
    ------
    Infeasible
        If no deployment meets ``beta``.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, throughput_optimal
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> fast = least_latency(inst)
    >>> fast.latency <= throughput_optimal(inst).latency
    True
    """
    inst.check_acyclic("the least-latency deployment")
    _, path, partition, links = least_delay(inst, inst.capacity, inst.bandwidth, beta)
    if not path:
        raise Infeasible(
            "no deployment runs the model as the network is (its memory fits no path's nodes, "
            "or every latency is beyond floating point)"
            if beta is None
            else f"no deployment reaches an interval of {beta:g} s as the network is"
        )
    return build_deployment(inst, path, partition, links=links)


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
        raise unreachable(beta, latency)
    return problem.plan(path, partition, links, found[0], method, status)


def throughput_within(inst: CodesignInstance, latency: float) -> Deployment:
    """The deployment of least interval under the existing capacities among those whose
    latency is at most ``latency`` (acyclic instances): the interval is one of the stage
    delays, found by bisection over them, each probe one :func:`least_delay`.

    Raises
    ------
    Infeasible
        If every deployment is slower than ``latency``.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, throughput_optimal
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> best = throughput_optimal(inst)
    >>> throughput_within(inst, best.latency).interval == best.interval
    True
    """
    inst.check_acyclic("T* with a latency bound")
    check_latency(latency)
    C, B = inst.capacity, inst.bandwidth
    slack = latency * (1 + INTERVAL_RTOL)  # sums of the same delays in another order
    if least_delay(inst, C, B, None)[0] > slack:
        fastest = least_latency(inst).latency
        raise Infeasible(f"no deployment has a latency of {latency:g} s as the network is "
                         f"(the least is {fastest:.6g} s)")  # fmt: skip
    with np.errstate(divide="ignore", invalid="ignore"):
        node = np.where(inst.work_or_zero[None] > 0, inst.work_or_zero[None] / C[:, None, None], 0)
    candidates = np.unique(np.concatenate((
        node[:, ~inst.no_transition].ravel(),
        (inst.activation_bits[None, :] / B[:, None]).ravel(),
    )))  # fmt: skip
    lo, hi = 0, candidates.size - 1  # the largest delay admits every deployment
    while lo < hi:
        mid = (lo + hi) // 2
        if least_delay(inst, C, B, float(candidates[mid]))[0] <= slack:
            hi = mid
        else:
            lo = mid + 1
    _, path, partition, links = least_delay(inst, C, B, float(candidates[lo]))
    return build_deployment(inst, path, partition, links=links)
