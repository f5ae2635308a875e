"""The fast joint planner: best responses with the exact single-service PSG, and a proven
lower bound, so that every plan states its gap (docs/services.md).

**Plan.** For an order of the services, each in turn is planned by PSG against what the
services before it already carry (a greedy start), then, round after round, each is re-planned
against all the others (a Gauss-Seidel best response) and the new deployment kept when the
joint cost falls, until a whole round improves nothing. A service's best response sees each
element through its *residual* capacity and *marginal* cost: with the others' load ``L`` on an
element of capacity ``C`` and cost ``f``, adding ``r`` more costs ``f(max(0, L + r - C)) -
f(max(0, L - C))``, which is again a capacity and a cost function of the same kind
(:func:`residual`), so PSG prices it exactly. Several orders (as given, reversed, and
:data:`RANDOM_ORDERS` drawn from ``seed``) run, and the cheapest plan is kept; each is
re-priced by :meth:`~inferplan.codesign.services.joint.JointProblem.cost`. Up to
:data:`PAIR_SERVICES` services, two larger moves follow, each kept when it lowers the cost:
every pair of services taken out and put back one after the other, and every service kicked
off each link of its path (two services swapping routes is a move no single best response
makes).

**Bound.** Replace every cost function by its convex envelope ``f^`` (module costs by their
price per unit, tiers by the lower convex hull of their knots; linear and convex tiers stay).
``h(x) = f^(max(0, x - C))`` is convex with ``h(0) = 0``, hence superadditive: ``h(a + b) >=
h(a) + h(b)``. So any joint plan costs at least ``sum_e h_e(sum_s r_(s,e)) >= sum_s sum_e
h_e(r_(s,e))``, and each service's inner sum is at least its own optimum under ``f^`` alone,
which PSG computes exactly. The sum of those optima is a lower bound on the joint optimum. (The
sum of the services' optima under the true costs is *not*: two half modules cost one module
together and two apart.) An element may instead be bounded by a supporting line of ``h``:
``h(y) >= lambda (y - C)`` for ``lambda`` the first slope of ``f^``, separable over the
services (each pays ``lambda`` per unit of its need there) less the constant ``lambda C``.
Any choice of elements so treated gives a valid bound; the planner tries none, those its plan
buys capacity on, and those of them several services share, keeps the largest, and (up to
:data:`PAIR_SERVICES` services) adds the elements several services' paths share one at a
time while the bound rises. When the
plan's cost meets the bound to
:data:`~inferplan.codesign.services.joint.CERTIFIED_GAP`, its status is ``"optimal"``; otherwise
``"heuristic"``, with the gap.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Sequence
from dataclasses import replace

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.codesign.engine.compiled import AUTO_STATES, Engine, available
from inferplan.codesign.engine.psg import solve_psg
from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.plan import Plan, PlanStatus
from inferplan.codesign.services.joint import (
    CERTIFIED_GAP,
    Choice,
    JointProblem,
    ServicesPlan,
    no_joint_plan,
)
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.costs import (
    MODULE_RTOL,
    CapacityCost,
    LinearCost,
    ModuleCost,
    TieredCost,
    segments,
)

__all__ = ["RANDOM_ORDERS", "convex_envelope", "residual", "solve_joint_fast", "split_bound"]

RANDOM_ORDERS = 2
"""Random service orders tried besides the given one and its reverse."""

PAIR_SERVICES = 6
"""Up to this many services, pairs of services are also re-planned together (``S (S - 1)``
re-insertions a pass), and each service is kicked off each link of its path in turn."""

MAX_ROUNDS = 20
"""Rounds of best responses per order, at the most."""

# A residual capacity of zero (the element already full) is given as this fraction of the
# element's capacity: networks need positive capacities. The best response then prices
# a hair of free capacity; every plan is re-priced exactly.
EMPTY = 1e-12


def residual(capacity: float, load: float, cost: CapacityCost) -> tuple[float, CapacityCost]:
    """The capacity left and the marginal cost of an element carrying ``load`` already: adding
    ``r`` costs ``cost(max(0, load + r - capacity)) - cost(max(0, load - capacity))``, which is
    ``f(max(0, r - capacity'))`` for the returned ``(capacity', f)`` (up to :data:`EMPTY`).

    Examples
    --------
    >>> residual(10.0, 4.0, LinearCost(2.0))
    (6.0, LinearCost(price=2.0, max_amount=inf))
    >>> residual(10.0, 25.0, ModuleCost(size=10.0, price=3.0))
    (5.0, ModuleCost(size=10.0, price=3.0, max_amount=inf))
    """
    if load < capacity:
        return capacity - load, cost
    excess = load - capacity
    free = 0.0
    shifted: CapacityCost
    if isinstance(cost, ModuleCost):
        bought = float(cost.modules(np.array([excess]))[0])
        free = cost.purchase(excess) - excess
        # modules too many to count are bought as the amount itself (ModuleCost.purchase)
        left = (cost.max_amount - excess if math.isinf(bought)
                else (cost.max_modules - bought) * cost.size)  # fmt: skip
        shifted = ModuleCost(cost.size, cost.price, max(0.0, left))
    elif isinstance(cost, TieredCost):
        shifted = _shifted_tiers(cost, excess)
    else:
        price = cost.linear_price
        assert price is not None  # JointProblem refuses function costs
        shifted = LinearCost(price, max(0.0, cost.max_amount - excess))
    return max(free, EMPTY * capacity), shifted


def _shifted_tiers(cost: TieredCost, excess: float) -> CapacityCost:
    """``x -> cost(excess + x) - cost(excess)`` as a cost function."""
    cap = max(0.0, cost.max_amount - excess)
    first = int(np.searchsorted(np.array(cost.upto), excess, side="right"))
    upto = tuple(u - excess for u in cost.upto[first:])
    prices = cost.prices[first:]
    if not prices:  # beyond the last tier: nothing more can be added
        return LinearCost(0.0, 0.0)
    if not upto or len(set(prices)) == 1:
        return LinearCost(prices[0], cap)
    return TieredCost(upto, prices, cap)


def convex_envelope(cost: CapacityCost, most: float) -> CapacityCost:
    """A convex cost function no dearer than ``cost`` on ``[0, most]``: its convex envelope
    there (``cost`` itself when already convex). Module costs become their price per unit
    with the same cap; tiers, the lower convex hull of their knots up to ``most``.

    Examples
    --------
    >>> convex_envelope(ModuleCost(size=10.0, price=3.0), 100.0)
    LinearCost(price=0.3, max_amount=inf)
    >>> convex_envelope(TieredCost(upto=(10.0,), prices=(3.0, 1.0)), 30.0)
    LinearCost(price=1.6666666666666667, max_amount=inf)
    """
    if isinstance(cost, ModuleCost):
        # a request a hair above whole modules counts as those modules (MODULE_RTOL)
        return LinearCost(cost.price / cost.size, cost.max_modules * cost.size / (1 - MODULE_RTOL))
    if not isinstance(cost, TieredCost) or cost.convex:
        return cost
    end = min(most, cost.max_amount)
    xs = [0.0, *(u for u in cost.upto if u < end), end] if end > 0 else [0.0]
    ys = cost(np.array(xs)).tolist()
    hull: list[tuple[float, float]] = []
    for point in zip(xs, ys, strict=True):
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], point) <= 0:
            hull.pop()
        hull.append(point)
    if len(hull) < 2:
        return LinearCost(0.0, cost.max_amount)
    slopes = [(y1 - y0) / (x1 - x0) for (x0, y0), (x1, y1) in itertools.pairwise(hull)]
    if len(slopes) == 1:
        return LinearCost(slopes[0], cost.max_amount)
    return TieredCost(tuple(x for x, _ in hull[1:-1]), tuple(slopes), cost.max_amount)


def _cross(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _rebuilt(
    problem: JointProblem,
    s: int,
    node: Sequence[tuple[float, CapacityCost]],
    link: Sequence[tuple[float, CapacityCost]],
    memory: Sequence[tuple[float, CapacityCost]],
) -> CodesignInstance:
    """Service ``s``'s instance with each element's capacity (memory) and cost replaced (by
    network index): the same arrays otherwise, so nothing is compiled again."""
    inst = problem.instances[s]
    nodes = [node[k] for k in problem.node_of[s].tolist()]
    links = [link[k] for k in problem.link_of[s].tolist()]
    held = [memory[k] for k in problem.node_of[s].tolist()]
    return inst.priced(
        np.array([c for c, _ in nodes], dtype=np.float64),
        [f for _, f in nodes],
        np.array([c for c, _ in links], dtype=np.float64),
        [f for _, f in links],
    ).with_memory(np.array([m for m, _ in held], dtype=np.float64), [f for _, f in held])


def engine(problem: JointProblem) -> Engine:
    """PSG's engine for the planner's many solves: the compiled one when numba is installed
    and one solve of every service in each order already relaxes :data:`AUTO_STATES` states
    (the rule ``engine="auto"`` applies to one solve), numpy's otherwise."""
    orders = 2 + RANDOM_ORDERS if len(problem.services) > 1 else 1
    states = sum((len(inst.node_ids) + len(inst.links)) * inst.n_cuts
                 for inst in problem.instances)  # fmt: skip
    return "compiled" if available() and orders * states >= AUTO_STATES else "auto"


def _most(problem: JointProblem) -> FloatArray:
    """The most the services can need on each element (nodes, then links): each runs its
    whole profile there, or sends its largest activation."""
    V = len(problem.capacity)
    most = np.zeros(V + len(problem.bandwidth))
    for s, inst in enumerate(problem.instances):
        beta = problem.services[s].interval
        # the whole model's load on each node: one value, formed alone, when all share it
        whole = (inst.work(0, inst.last_cut) if inst.shared_work
                 else inst.node_loads[:, 0, inst.last_cut])  # fmt: skip
        most[problem.node_of[s]] += whole / beta
        most[V + problem.link_of[s]] += float(inst.activation_bits.max()) / beta
    return most


def split_bound(problem: JointProblem, linearized: Collection[int] = ()) -> float:
    """A lower bound on the joint optimum: each element's cost replaced by its convex
    envelope, and each element of ``linearized`` (nodes ``0..V-1``, then links ``V + k``)
    further by a supporting line (see the module docstring).

    Raises
    ------
    Infeasible
        If a service has no plan within the caps even so: then no joint plan has one either.
    """
    V = len(problem.capacity)
    have = np.concatenate((problem.capacity, problem.bandwidth)).tolist()
    envelopes = _envelopes(problem)
    elements: list[tuple[float, CapacityCost]] = []
    shift = []
    for k, (c, f) in enumerate(zip(have, envelopes, strict=True)):
        if k in linearized:
            form = segments(f)
            assert form is not None  # envelopes are linear or tiers
            elements.append((EMPTY * c, LinearCost(form.slopes[0])))
            shift.append(form.slopes[0] * c)
        else:
            elements.append((c, f))
    # memory: each node's cost by its convex envelope over what the services can need there
    most_held = np.zeros(V)
    for s, inst in enumerate(problem.instances):
        most_held[problem.node_of[s]] += float(inst.memory_need[0, -1])
    memory = [(m, convex_envelope(f, x)) for m, f, x in zip(problem.memory.tolist(),
              problem.memory_costs, most_held.tolist(), strict=True)]  # fmt: skip
    total = []
    for s, service in enumerate(problem.services):
        try:
            total.append(
                solve_psg(
                    _rebuilt(problem, s, elements[:V], elements[V:], memory),
                    service.interval,
                    engine=engine(problem),
                ).cost
            )
        except Infeasible:
            raise no_joint_plan(problem, f"service {service.name!r} alone has none") from None
    return math.fsum(total) - math.fsum(shift)


def _envelopes(problem: JointProblem) -> list[CapacityCost]:
    """The convex envelope of every element's cost (nodes, then links) over what the services
    can need there."""
    costs = (*problem.node_costs, *problem.link_costs)
    return [convex_envelope(f, m) for f, m in zip(costs, _most(problem).tolist(), strict=True)]


def _choice(problem: JointProblem, s: int, plan: Plan) -> Choice:
    index = {v: k for k, v in enumerate(problem.instances[s].node_ids)}
    return tuple(index[v] for v in plan.path), plan.cut_indices


class _Responses:
    """Best responses, each computed once: a service's answer depends only on the others'
    deployments, and different orders often meet the same ones."""

    def __init__(self, problem: JointProblem) -> None:
        self.problem = problem
        self.engine = engine(problem)
        self.node = list(zip(problem.capacity.tolist(), problem.node_costs, strict=True))
        self.link = list(zip(problem.bandwidth.tolist(), problem.link_costs, strict=True))
        self.memory = list(zip(problem.memory.tolist(), problem.memory_costs, strict=True))
        self.known: dict[tuple[int, tuple[Choice | None, ...], int | None], Choice | None] = {}

    def __call__(
        self, s: int, choices: Sequence[Choice | None], avoid: int | None = None
    ) -> Choice | None:
        """Service ``s``'s cheapest deployment against the others' loads, not using link
        ``avoid`` (a network index) when given (``None``: no deployment of it fits within the
        caps)."""
        others = tuple(c if t != s else None for t, c in enumerate(choices))
        key = (s, others, avoid)
        if key not in self.known:
            self.known[key] = self._respond(s, others, avoid)
        return self.known[key]

    def _respond(self, s: int, others: Sequence[Choice | None], avoid: int | None) -> Choice | None:
        problem = self.problem
        node_load, link_load = problem.loads(others)
        node, link, memory = list(self.node), list(self.link), list(self.memory)
        for elements, loads in ((node, node_load), (link, link_load),
                                (memory, problem.memory_loads(others))):  # fmt: skip
            for k, x in loads.items():
                capacity, cost = elements[k]
                elements[k] = residual(capacity, x, cost)
        if avoid is not None:  # a hair of capacity and nothing to buy: no activation fits
            link[avoid] = (EMPTY * link[avoid][0], LinearCost(0.0, 0.0))
        inst = _rebuilt(problem, s, node, link, memory)
        try:
            plan: Plan = solve_psg(inst, problem.services[s].interval, engine=self.engine)
        except Infeasible:
            return None
        return _choice(problem, s, plan)


def _descend(
    problem: JointProblem, respond: _Responses, order: Sequence[int]
) -> tuple[float, list[Choice]] | None:
    """A greedy start in ``order``, then best-response rounds until none improves."""
    choices: list[Choice | None] = [None] * len(problem.services)
    for s in order:
        choices[s] = respond(s, choices)
        if choices[s] is None:
            return None
    done: list[Choice] = [c for c in choices if c is not None]
    return _rounds(problem, respond, order, problem.cost(done), done)


def _rounds(
    problem: JointProblem,
    respond: _Responses,
    order: Sequence[int],
    cost: float,
    done: list[Choice],
) -> tuple[float, list[Choice]]:
    """Best-response rounds in ``order`` from ``done`` (costing ``cost``) until none
    improves."""
    for _ in range(MAX_ROUNDS):
        improved = False
        for s in order:
            if len(order) == 1:
                break
            candidate = respond(s, done)
            if candidate is None or candidate == done[s]:
                continue
            trial = [*done[:s], candidate, *done[s + 1 :]]
            trial_cost = problem.cost(trial)
            if trial_cost < cost * (1 - 1e-12):
                done, cost, improved = trial, trial_cost, True
        if not improved:
            break
    return cost, done


def _pairs(
    problem: JointProblem, respond: _Responses, cost: float, done: list[Choice]
) -> tuple[float, list[Choice]]:
    """Re-plan two services at once: take both out, put them back one after the other by
    best responses (each pair in both orders), then best-response rounds; keep what is
    cheaper, until no pair improves (at most :data:`MAX_ROUNDS` passes). This escapes the
    plans where no single service can move alone."""
    S = len(done)
    for _ in range(MAX_ROUNDS):
        improved = False
        for a, b in itertools.permutations(range(S), 2):
            trial: list[Choice | None] = [
                c if t not in (a, b) else None for t, c in enumerate(done)
            ]
            for s in (a, b):
                trial[s] = respond(s, trial)
                if trial[s] is None:
                    break
            else:
                placed = [c for c in trial if c is not None]
                others = [t for t in range(S) if t not in (a, b)]
                found = _rounds(problem, respond, [a, b, *others], problem.cost(placed), placed)
                if found[0] < cost * (1 - 1e-12):
                    (cost, done), improved = found, True
        if not improved:
            break
    return cost, done


def _kicks(
    problem: JointProblem, respond: _Responses, cost: float, done: list[Choice]
) -> tuple[float, list[Choice]]:
    """Move one service off one link of its path (its best response without that link), then
    let every service respond again; keep what is cheaper, until no such kick improves (at
    most :data:`MAX_ROUNDS` passes). This escapes the plans where two services would have to
    swap routes, which no single best response does."""
    S = len(done)
    for _ in range(MAX_ROUNDS):
        improved = False
        for a in range(S):
            path, _ = done[a]
            links = problem.link_of[a]
            inst = problem.instances[a]
            for u, v in itertools.pairwise(path):
                moved = respond(a, done, int(links[inst.link_index(u, v)]))
                if moved is None:
                    continue
                trial = [*done[:a], moved, *done[a + 1 :]]
                order = [*(t for t in range(S) if t != a), a]
                found = _rounds(problem, respond, order, problem.cost(trial), trial)
                if found[0] < cost * (1 - 1e-12):
                    (cost, done), improved = found, True
                    break
            if improved:
                break
        if not improved:
            break
    return cost, done


def _linearized(problem: JointProblem, choices: Sequence[Choice]) -> list[set[int]]:
    """Elements worth bounding by a line: those the plan buys capacity on, and those of them
    that several services share."""
    V = len(problem.capacity)
    node, link = problem.loads(choices)
    bought = {k for k, x in node.items() if x > problem.capacity[k]}
    bought |= {V + k for k, x in link.items() if x > problem.bandwidth[k]}
    users: dict[int, int] = {}
    for s in range(len(choices)):
        mine = problem.loads([c if t == s else None for t, c in enumerate(choices)])
        for k in [*mine[0], *(V + e for e in mine[1])]:
            users[k] = users.get(k, 0) + 1
    shared = {k for k in bought if users.get(k, 0) > 1}
    return [bought, shared] if shared != bought else [bought]


def _shared(problem: JointProblem, choices: Sequence[Choice]) -> set[int]:
    """The elements (nodes, then links ``V + k``) on the paths of several services."""
    V = len(problem.capacity)
    count: dict[int, int] = {}
    for s, (path, _) in enumerate(choices):
        inst = problem.instances[s]
        mine = {int(problem.node_of[s][v]) for v in path}
        mine |= {V + int(problem.link_of[s][inst.link_index(u, v)])
                 for u, v in itertools.pairwise(path)}  # fmt: skip
        for k in mine:
            count[k] = count.get(k, 0) + 1
    return {k for k, c in count.items() if c > 1}


def _grown(problem: JointProblem, chosen: set[int], bound: float, candidates: set[int]) -> float:
    """Add the ``candidates`` to the linearized elements one at a time while the bound rises
    (at most :data:`MAX_ROUNDS` passes); the best bound."""
    for _ in range(MAX_ROUNDS):
        improved = False
        for k in sorted(candidates - chosen):
            trial = split_bound(problem, chosen | {k})
            if trial > bound * (1 + 1e-9):
                bound, chosen, improved = trial, chosen | {k}, True
        if not improved:
            break
    return bound


def solve_joint_fast(problem: JointProblem, *, seed: int = 0) -> ServicesPlan:
    """The fast planner's plan and its proven lower bound (see the module docstring).

    Raises
    ------
    Infeasible
        If the bound proves there is no plan, or no order found one.
    InvalidArgument
        For a ``seed`` that is not a non-negative integer.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidArgument(f"must be a non-negative integer, got {seed!r}", field="seed")
    for service in problem.services:
        if service.latency is not None:
            raise InvalidArgument(
                "the fast planner does not take latency bounds (method 'milp' does)",
                field=f"service {service.name!r}",
            )
    bound = split_bound(problem)
    S = len(problem.services)
    orders = [list(range(S))]
    if S > 1:
        orders.append(orders[0][::-1])
        rng = np.random.default_rng(seed)
        orders += [rng.permutation(S).tolist() for _ in range(RANDOM_ORDERS)]
    best: tuple[float, list[Choice]] | None = None
    respond = _Responses(problem)
    for order in orders:
        found = _descend(problem, respond, order)
        if found is not None and math.isfinite(found[0]) and (best is None or found[0] < best[0]):
            best = found
    if best is None:
        raise no_joint_plan(problem, proven=False)
    if S > 1 and S <= PAIR_SERVICES:
        best = _kicks(problem, respond, *_pairs(problem, respond, *best))
    _, choices = best
    plan = problem.plan("fast", "heuristic", choices, bound)
    if plan.cost > bound + CERTIFIED_GAP * plan.cost:
        tried = [(split_bound(problem, b), b) for b in _linearized(problem, choices)]
        best_bound, chosen = max([(bound, set()), *tried], key=lambda t: t[0])
        if 1 < S <= PAIR_SERVICES:
            best_bound = _grown(problem, chosen, best_bound, _shared(problem, choices))
        bound = max(bound, best_bound)
    proven = plan.cost <= bound + CERTIFIED_GAP * plan.cost
    status: PlanStatus = "optimal" if proven else "heuristic"
    return replace(plan, status=status, lower_bound=min(max(bound, 0.0), plan.cost))
