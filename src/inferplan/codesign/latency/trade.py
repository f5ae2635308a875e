"""The trade of one stage between cost and delay, and the exact allocation of a fixed
deployment under a latency bound.

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
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from inferplan.arrays import FloatArray, IntArray
from inferplan.errors import InvalidArgument
from inferplan.network.costs import CapacityCost, ModuleCost, segments

__all__ = ["FREE_SHARE", "LATENCY_RTOL", "MAX_RANKED", "Trade", "allocate", "time_unit", "trade_of"]

LATENCY_RTOL = 1e-9
"""A plan is ``optimal`` when its cost is within this fraction of the proven lower bound."""
MAX_RANKED = 200_000
"""The most state-path expansions (and branch-and-bound leaves) before a plan is left
``uncertified``."""
# The multipliers' bisections: steps of the search for a feasible multiplier and halvings of
# the bracket (of its logarithm) after it in an allocation (the co-design's search for the
# best bound, :mod:`~inferplan.codesign.latency.bound`, takes the same steps).
DOUBLINGS, _HALVINGS = 2_200, 100
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
        for _ in range(DOUBLINGS):
            xs, cost, delay, _ = at(hi)
            if delay <= budget:
                break
            lo, hi = hi, hi * 2.0
        else:
            return None
        if lo == 0.0:  # the bound may hold at a smaller multiplier: search below 1 too
            lo = hi
            for _ in range(DOUBLINGS):
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
        for _ in range(DOUBLINGS):  # past every mark: the responses fit for a large enough one
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
