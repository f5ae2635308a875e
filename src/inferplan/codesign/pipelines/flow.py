"""Flow plans as one MILP: a binary layout and continuous rates over the states ``(v, j)``.

With ``R`` a rate unit (the target rate when provisioning, an upper bound on the largest
rate otherwise), every rate is a fraction of ``R``::

    x[v, a, b] in {0, 1}    node v holds blocks a+1..b           sum_(a, b) x[v, a, b] <= 1
    f[v, a, b] >= 0         the flow v computes over (a, b]      f[v, a, b] <= x[v, a, b]
    g[e, j]    >= 0         the flow link e carries after j blocks
    sum_(e into v) g[e, j] + sum_a f[v, a, j] + [v = s, j = 0] phi
        = sum_(e out of v) g[e, j] + sum_b f[v, j, b] + [v = t, j = N] phi     every (v, j)
    node:   R sum_(a, b) f[v, a, b] w_v(a, b) <= C_v + n_v
    link:   R sum_j g[e, j] D_j <= B_e + m_e
    memory: sum_(a, b) x[v, a, b] need(a, b) <= M_v + k_v

``phi`` is the flow's share of ``R``: a variable maximised for the largest rate (no
purchases), 1 when provisioning, where the purchases ``n, m, k`` are priced exactly by their
cost kind (:meth:`~inferplan.codesign.milp.cost.Model.purchase`) and their sum minimised. For the
largest rate the node rows are one per range, ``f[v, a, b] R w_v(a, b) / C_v <= x[v, a, b]``,
which is the aggregate row at ``sum x <= 1`` and no big-M at all; when provisioning each range
that can overload its node also gets ``F w_v(a, b) f[v, a, b] <= C_v x[v, a, b] + n_v``, the
node row at one range per node and far tighter where ``x`` is fractional. Both problems solve
the LP relaxation first and try layouts rounded from it; one that meets the relaxation's bound
is optimal without the full MILP (:func:`_solve`). Relays are links in and out
of a node at the same ``j``. Links into the source and out of the target carry nothing, as
for one path. ``w_v(a, b)`` is node ``v``'s load for the range
(:func:`~inferplan.codesign.pipelines.timing.range_work`): the range's FLOPs ``W(a, b)`` on
every node by default, each node's own with a per-node time model (measured block times).
docs/model.md proves the MILP exact.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from inferplan.arrays import FloatArray, IntArray
from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.memory import memory_infeasible
from inferplan.codesign.milp.cost import MIP_REL_GAP, Model, highs
from inferplan.codesign.pipelines.decompose import Arc, cut, pipelines
from inferplan.codesign.pipelines.result import FlowPlan, Load, Pipeline
from inferplan.codesign.pipelines.timing import range_seconds, range_work
from inferplan.codesign.plan import at_caps
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.costs import CapacityCost, ModuleCost, segments
from inferplan.units import link_name

__all__ = ["flow_provision", "flow_throughput"]

TOLERANCE = 1e-7
"""HiGHS's feasibility and reduced-cost tolerance (continuous rates beside binaries). Not
tighter: without presolve, at 1e-8 and 1e-9 HiGHS's branch and bound proved a wrong bound on a
7-node network (a flow of 1.31 inferences/s called optimal where one path carries 6.14 and the
optimum is 6.87; ``tests/codesign/test_flow_regressions.py``); at 1e-7 it finds 6.87 and every
flow test against the brute force holds."""
SATURATED = 1e-6
"""An element whose headroom is below this fraction of its capacity is saturated."""


@dataclass
class _Columns:
    """The columns of one flow MILP: ranges ``(v, a, b)`` (``x`` then ``f``), link states
    ``(e, j)`` (``g``) and ``phi``."""

    rv: IntArray
    ra: IntArray
    rb: IntArray
    ge: IntArray
    gj: IntArray
    x0: int
    f0: int
    g0: int
    phi: int


def _check_time(time_limit: float | None) -> None:
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise InvalidArgument(f"must be a positive finite number of seconds, got {time_limit!r}",
                              field="time_limit")  # fmt: skip


def _columns(
    model: Model, inst: CodesignInstance, fits: npt.NDArray[np.bool_],
    usable: npt.NDArray[np.bool_],
) -> _Columns:  # fmt: skip
    """The columns of the ranges ``fits[v, a, b]`` (bool) and link states ``usable[e, j]``."""
    N = inst.last_cut
    fits = fits.copy()
    fits[inst.source, 1:, :] = False  # the source receives nothing but the input
    fits[inst.target, :, :N] = False  # the target sends nothing but the output
    rv, ra, rb = np.nonzero(fits)
    keep = (inst.link_dst != inst.source) & (inst.link_src != inst.target)
    ge, gj = np.nonzero(usable & keep[:, None])
    x0 = len(model.objective)
    for _ in range(rv.size):
        model.column(0.0, 1.0, True)
    f0 = len(model.objective)
    for _ in range(rv.size + ge.size):
        model.column(0.0, 1.0)
    phi = model.column(0.0, 1.0)
    return _Columns(rv, ra, rb, ge, gj, x0, f0, f0 + rv.size, phi)


def _structure(model: Model, inst: CodesignInstance, c: _Columns) -> sparse.csr_array:
    """The rows every flow MILP shares (one range per node, ``f <= x``) and the balance of
    every state as an equality matrix (``A_eq phi-column ... = 0``)."""
    V, W, N = len(inst.node_ids), inst.n_cuts, inst.last_cut
    for v in range(V):
        once = (c.x0 + np.flatnonzero(c.rv == v)).tolist()
        if len(once) > 1:
            model.add(once, [1.0] * len(once), 1.0)
    n_r, n_g = c.rv.size, c.ge.size
    rows: list[IntArray] = []
    cols: list[IntArray] = []
    vals: list[FloatArray] = []
    r = np.arange(n_r)
    # a range takes flow out of (v, a) and into (v, b); a link out of (u, j) into (v, j)
    rows += [c.rv * W + c.rb, c.rv * W + c.ra]
    cols += [c.f0 + r, c.f0 + r]
    vals += [np.ones(n_r), -np.ones(n_r)]
    g = np.arange(n_g)
    rows += [inst.link_dst[c.ge] * W + c.gj, inst.link_src[c.ge] * W + c.gj]
    cols += [c.g0 + g, c.g0 + g]
    vals += [np.ones(n_g), -np.ones(n_g)]
    rows += [np.array([inst.source * W, inst.target * W + N], dtype=np.int64)]
    cols += [np.array([c.phi, c.phi], dtype=np.int64)]
    vals += [np.array([1.0, -1.0])]
    return sparse.csr_array(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(V * W, len(model.objective)),
    )


def _solve(
    model: Model, balance: sparse.csr_array, rhs: FloatArray, time_limit: float | None,
    layout: _Columns | None = None, N: int = 0,
) -> tuple[int, FloatArray | None, float, str]:
    """HiGHS on the MILP: ``(status, solution, lower bound, message)``.

    With ``layout`` (the flow MILP's columns) the LP relaxation comes first, then the
    MILP at each layout rounded from it (:func:`_roundings`; module counts and tier binaries
    left, ``N`` the last cut); if one's cost meets the relaxation's bound it is optimal and the
    full MILP is never run. Otherwise the full MILP runs (within what is left
    of ``time_limit``) and the better of the two plans is returned with the MILP's bound."""
    n = len(model.objective)
    objective = np.asarray(model.objective)
    scale = float(np.abs(objective).max(initial=0.0)) or 1.0
    if balance.shape[1] < n:
        padding = sparse.csr_array((balance.shape[0], n - balance.shape[1]))
        balance = sparse.csr_array(sparse.hstack([balance, padding]))
    a_ub = model.matrix() if model.rhs else None
    integral = np.asarray(model.integral)
    lower_bounds, upper = np.zeros(n), np.asarray(model.upper, dtype=float)

    def run(
        integrality: npt.NDArray[np.int64], low: FloatArray, high: FloatArray,
        seconds: float | None,
    ) -> tuple[int, FloatArray | None, float, str]:  # fmt: skip
        result = highs(objective / scale, A_ub=a_ub,
                       b_ub=np.asarray(model.rhs) if model.rhs else None, A_eq=balance,
                       b_eq=rhs, bounds=np.column_stack([low, high]),
                       integrality=integrality, time_limit=seconds,
                       tolerance=TOLERANCE)  # fmt: skip
        if result.x is None:
            return result.status, None, math.nan, result.message
        bound = getattr(result, "mip_dual_bound", None) if integrality.any() else result.fun
        lower = float(bound) * scale if bound is not None and math.isfinite(bound) else -math.inf
        return result.status, np.asarray(result.x), lower, result.message

    if layout is None:
        return run(integral, lower_bounds, upper, time_limit)
    start = time.perf_counter()
    code, relaxed, bound, message = run(np.zeros(n, dtype=np.int64), lower_bounds, upper,
                                        time_limit)  # fmt: skip
    if relaxed is None:  # the relaxation infeasible (2): so is the MILP
        return code, None, math.nan, message
    incumbent: tuple[int, FloatArray | None, float, str] | None = None
    x = slice(layout.x0, layout.x0 + layout.rv.size)
    for fixed in _roundings(layout, relaxed, N) if code == 0 else []:
        low, high = lower_bounds.copy(), upper.copy()
        low[x], high[x] = fixed, np.minimum(fixed, upper[x])
        tried = run(integral, low, high, _left(time_limit, start))
        found = tried[1]
        if tried[0] != 0 or found is None:
            continue
        cost = float(objective @ found)
        if cost - bound <= MIP_REL_GAP * abs(cost) + TOLERANCE * scale:
            return 0, found, bound, tried[3]
        if incumbent is None or incumbent[1] is None or cost < float(objective @ incumbent[1]):
            incumbent = tried
    full = run(integral, lower_bounds, upper, _left(time_limit, start))
    if incumbent is None or incumbent[1] is None:
        return full
    if full[1] is not None and float(objective @ full[1]) <= float(objective @ incumbent[1]):
        return full
    if full[1] is None:  # the full MILP found nothing in time: the rounding, the relaxation's bound
        return 1, incumbent[1], bound, full[3]
    return full[0], incumbent[1], max(full[2], bound), full[3]


def _left(time_limit: float | None, start: float) -> float | None:
    """What is left of ``time_limit`` seconds since ``start`` (at least a millisecond)."""
    if time_limit is None:
        return None
    return max(time_limit - (time.perf_counter() - start), 1e-3)


def _roundings(c: _Columns, relaxed: FloatArray, N: int) -> list[FloatArray]:
    """Layouts (``x``, 0 or 1) rounded from a relaxed solution: each node that computes holds
    the hull ``(min a, max b]`` of the ranges it computes on (a relaxation often runs ``(a, j]``
    and ``(j, b]`` on one flow, which is the hull's load and traffic); and each node that
    computes holds the whole model ``(0, N]`` where it fits (replicas), else its hull."""
    f = relaxed[c.f0 : c.f0 + c.rv.size]
    busy = np.flatnonzero(f > 1e-9 * max(float(f.max(initial=0.0)), 1e-300))
    index = {(int(v), int(a), int(b)): k
             for k, (v, a, b) in enumerate(zip(c.rv, c.ra, c.rb, strict=True))}  # fmt: skip
    hulls, whole = np.zeros(c.rv.size), np.zeros(c.rv.size)
    for v in np.unique(c.rv[busy]).tolist():
        mine = busy[c.rv[busy] == v]
        hull = index.get((v, int(c.ra[mine].min()), int(c.rb[mine].max())))
        hull = int(mine[np.argmax(f[mine])]) if hull is None else hull
        hulls[hull] = 1.0
        whole[index.get((v, 0, N), hull)] = 1.0
    return [hulls, whole] if busy.size else []


def _rate_bound(inst: CodesignInstance, added: FloatArray, link_added: FloatArray) -> float:
    """An upper bound on any flow's rate: all compute over one inference's work, or all the
    source's out-links over the least activation."""
    with np.errstate(over="ignore"):
        return _bound(inst, added, link_added)


def _bound(inst: CodesignInstance, added: FloatArray, link_added: FloatArray) -> float:
    total_work = _least_work(inst)
    compute = float((inst.capacity + added).sum()) / total_work if total_work > 0 else math.inf
    least = float(inst.activation_bits.min())
    out = inst.link_src == inst.source
    bandwidth = float((inst.bandwidth + link_added)[out].sum())
    sending = bandwidth / least if least > 0 else math.inf
    if inst.source == inst.target:
        sending = math.inf
    return min(compute, sending)


def _least_work(inst: CodesignInstance) -> float:
    """The least capacity one inference takes, summed over the ranges that carry it: the
    whole model's work when every node shares the loads; with a load table per node, the
    least over chains of ranges ``0 = j_0, j_1, ..., N`` of ``sum_k min_v w_v(j_k, j_k+1)``
    (a shortest path over the cuts), so that no flow's rate passes all capacity over it."""
    if inst.shared_work:
        return float(inst.work_between[0, inst.last_cut])
    cheapest = np.where(inst.no_transition, np.inf, inst.node_loads.min(axis=0))
    np.fill_diagonal(cheapest, np.inf)
    least = np.full(inst.n_cuts, np.inf)
    least[0] = 0.0
    for _ in range(inst.n_cuts):  # each round adds one range; at most K ranges in a chain
        reached = np.minimum(least, (least[:, None] + cheapest).min(axis=0))
        if np.array_equal(reached, least):
            break
        least = reached
    return float(least[inst.last_cut])


def flow_throughput(inst: CodesignInstance, *, time_limit: float | None = None) -> FlowPlan:
    """The largest rate ``F`` that many pipelines carry at once on the network as it is.

    Parameters
    ----------
    inst
        A compiled instance (cycles allowed: ``compile_instance(..., require_acyclic=False)``).
    time_limit
        Seconds HiGHS may take; ``None`` for no limit.

    Raises
    ------
    Infeasible
        If no layout carries any flow (memory, or no capacity on every path).
    InvalidArgument
        If the rate is unbounded (no work and free links), or HiGHS finds nothing in time.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> plan = flow_throughput(inst)
    >>> one = inferplan.throughput(inst.network, inst.profile).throughput
    >>> plan.status, plan.throughput >= one * (1 - 1e-9)
    ('optimal', True)
    >>> abs(sum(p.rate for p in plan.pipelines) / plan.throughput - 1) < 1e-9
    True
    """
    _check_time(time_limit)
    unit = _rate_bound(inst, np.zeros(len(inst.node_ids)), np.zeros(len(inst.links)))
    if not math.isfinite(unit):
        raise InvalidArgument("the flow is unbounded: the model has no work and the source's "
                              "links carry free activations")  # fmt: skip
    if unit <= 0:
        raise Infeasible("no flow reaches the target: no capacity to run the model")
    seconds = range_seconds(inst) * unit  # the share of a node's time a flow of 1 R takes
    fits = np.isfinite(seconds) & (inst.memory_need[None] <= inst.memory[:, None, None])
    D = inst.activation_bits
    usable = (inst.bandwidth[:, None] > 0) | (D[None, :] == 0)
    model = Model(np.zeros(0), np.zeros(0), np.zeros(0))
    c = _columns(model, inst, fits, usable)
    model.objective[c.phi] = -1.0
    balance = _structure(model, inst, c)
    for k in range(c.rv.size):  # f share <= x, and f <= x (no flow is above R)
        busy = float(seconds[c.rv[k], c.ra[k], c.rb[k]])
        model.add([c.f0 + k, c.x0 + k], [max(busy, 1.0), -1.0], 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        share = unit * D[None, :] / inst.bandwidth[:, None]
    share[~np.isfinite(share)] = 0.0  # a link without bandwidth carries only what weighs 0
    _link_rows(model, inst, c, share, np.ones(len(inst.links)))
    code, x, bound, message = _solve(model, balance, np.zeros(balance.shape[0]), time_limit,
                                     c, inst.last_cut)
    if x is None:
        _no_answer(code, time_limit, message)
    assert x is not None
    rate = float(x[c.phi]) * unit
    if rate > 1e-12 * unit:
        x = _acyclic(inst, c, x)
    elif code == 1:  # the empty plan is feasible: at the time limit it proves nothing
        raise InvalidArgument(f"the MILP found no flow above 0 within {time_limit:g} s; give "
                              "it more time", field="time_limit")  # fmt: skip
    if rate <= 1e-12 * unit:
        if bool(np.any(inst.memory < inst.most_need)):
            raise memory_infeasible(inst, inst.memory)
        raise Infeasible("no flow reaches the target: every path lacks capacity")
    status = "time_limit" if code == 1 else "optimal"
    best = -bound * unit
    return _read(inst, c, x, unit, rate, "flow-throughput", status, 0.0, best,
                 np.zeros(len(inst.node_ids)), np.zeros(len(inst.links)),
                 np.zeros(len(inst.node_ids)), None)  # fmt: skip


def _link_rows(model: Model, inst: CodesignInstance, c: _Columns, share: FloatArray,
               rhs: FloatArray, purchase: dict[int, int] | None = None) -> None:  # fmt: skip
    """``sum_j g[e, j] share[e, j] <= rhs[e]`` (minus the purchase column where given; no
    row where ``rhs[e]`` is nan)."""
    order = np.argsort(c.ge, kind="stable")
    starts = np.searchsorted(c.ge[order], np.arange(len(inst.links) + 1))
    for e in np.flatnonzero(~np.isnan(rhs)).tolist():
        ks = order[starts[e] : starts[e + 1]]
        coef = share[e, c.gj[ks]]
        live = coef > 0
        if not live.any():
            continue
        cols = (c.g0 + ks[live]).tolist()
        vals = coef[live].tolist()
        if purchase is not None and e in purchase:
            cols.append(purchase[e])
            vals.append(-1.0)
        model.add(cols, vals, float(rhs[e]))


def _no_answer(code: int, time_limit: float | None, message: str) -> None:
    if code == 1:
        raise InvalidArgument(f"the MILP found no flow plan within {time_limit:g} s; give it "
                              "more time", field="time_limit")  # fmt: skip
    raise InvalidArgument(f"HiGHS found no flow plan: {message}", field="method")


def _priced(cost: CapacityCost, what: str) -> None:
    if not isinstance(cost, ModuleCost) and segments(cost) is None:
        raise InvalidArgument("flow plans price linear, capped, module and tiered costs, not "
                              "a cost given as a function", field=what)  # fmt: skip


def flow_provision(
    inst: CodesignInstance, throughput: float, *, time_limit: float | None = None
) -> FlowPlan:
    """The cheapest upgrades (compute, bandwidth, memory) under which many pipelines carry
    ``throughput`` inferences/s at once, with the layout and the flows.

    Parameters
    ----------
    inst
        A compiled instance (cycles allowed).
    throughput
        The target rate ``F`` (inferences/s).
    time_limit
        Seconds HiGHS may take; at the limit the plan has status ``"time_limit"``.

    Raises
    ------
    Infeasible
        If the caps allow no flow of ``throughput`` (the message says the most they allow).
    InvalidArgument
        If ``throughput`` is not a positive finite number, an element that must grow has a
        cost given as a function, or HiGHS finds nothing in time.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> one = inferplan.throughput(inst.network, inst.profile).throughput
    >>> plan = flow_provision(inst, 3 * one)
    >>> plan.status, plan.cost <= inferplan.provision(inst.network, inst.profile,
    ...                                                throughput=3 * one).cost * (1 + 1e-6)
    ('optimal', True)
    """
    _check_time(time_limit)
    if not (math.isfinite(throughput) and throughput > 0):
        raise InvalidArgument(f"must be a positive finite number, got {throughput!r}",
                              field="throughput")  # fmt: skip
    F = throughput
    work = range_work(inst)
    most_memory = inst.memory + inst.memory_pricing.cap
    fits = np.isfinite(work) & (inst.memory_need[None] <= most_memory[:, None, None])
    D = inst.activation_bits
    link_most = inst.bandwidth + inst.link_pricing.cap
    usable = (link_most[:, None] > 0) | (D[None, :] == 0)
    model = Model(np.zeros(0), np.zeros(0), np.zeros(0))
    c = _columns(model, inst, fits, usable)
    model.upper[c.phi] = 0.0  # phi = 1: its balance moved to the right-hand side below
    balance = _structure(model, inst, c)
    for k in range(c.rv.size):
        model.add([c.f0 + k, c.x0 + k], [1.0, -1.0], 0.0)
    names = inst.node_ids
    for v in range(len(names)):  # compute: R sum f W <= C + n
        ks = np.flatnonzero(c.rv == v)
        if not ks.size:
            continue
        load = F * work[v, c.ra[ks], c.rb[ks]]
        C = float(inst.capacity[v])
        need = float(load.max())
        if need <= C:
            continue
        cost = inst.node_costs[v]
        unit = C if C > 0 else need
        cols, vals = (c.f0 + ks).tolist(), (load / unit).tolist()
        n = None
        if cost.max_amount > 0:
            _priced(cost, f"node {names[v]!r}")
            n, _ = model.purchase(cost, unit, need - C)
            cols.append(n)
            vals.append(-1.0)
        model.add(cols, vals, C / unit)
        # the same row for each range alone, its capacity C x[v, a, b]: at one range per node
        # it is the row above, and where x is fractional it is much tighter (no big-M)
        for k, w in zip(ks.tolist(), (load / unit).tolist(), strict=True):
            if w * unit <= C:
                continue
            row, coef = [c.f0 + k, c.x0 + k], [w, -C / unit]
            if n is not None:
                row.append(n)
                coef.append(-1.0)
            model.add(row, coef, 0.0)
    link_buy: dict[int, int] = {}
    share = np.zeros((len(inst.links), D.size))
    rhs_links = np.full(len(inst.links), np.nan)  # nan: no row
    # each state's link column carries at most F once cycles are cancelled, and a flow may
    # cross a link at several j (there and back around a computing node), so the most a link
    # carries is F times the sum of D_j over its columns, not F max_j D_j
    crossing = np.zeros(len(inst.links))
    np.add.at(crossing, c.ge, D[c.gj])
    for e in range(len(inst.links)):
        B = float(inst.bandwidth[e])
        need = F * float(crossing[e])
        if need <= B:
            continue
        unit = B if B > 0 else need
        share[e], rhs_links[e] = F * D / unit, B / unit
        cost = inst.link_costs[e]
        if cost.max_amount > 0:
            _priced(cost, f"link {link_name(*_ends(inst, e))}")
            link_buy[e], _ = model.purchase(cost, unit, need - B)
    _link_rows(model, inst, c, share, rhs_links, link_buy)
    for v in range(len(names)):  # memory: sum x need <= M + k
        ks = np.flatnonzero(c.rv == v)
        if not ks.size:
            continue
        need_v = inst.memory_need[c.ra[ks], c.rb[ks]]
        M = float(inst.memory[v])
        if float(need_v.max()) <= M:
            continue
        unit = float(need_v.max())
        cost = inst.memory_costs[v]
        _priced(cost, f"node {names[v]!r} memory")
        k, _ = model.purchase(cost, unit, unit - M)
        model.add([*(c.x0 + ks).tolist(), k], [*(need_v / unit).tolist(), -1.0], M / unit)
    # phi = 1: the input enters at (s, 0), the output leaves at (t, N)
    W, N = inst.n_cuts, inst.last_cut
    rhs = np.zeros(balance.shape[0])
    rhs[inst.source * W] = -1.0
    rhs[inst.target * W + N] = 1.0
    code, x, bound, message = _solve(model, balance, rhs, time_limit, c, N)
    if x is None:
        if code == 2:
            raise _beyond_caps(inst, F)
        _no_answer(code, time_limit, message)
    assert x is not None
    x[c.phi] = 1.0
    x = _acyclic(inst, c, x)
    added_c, added_b, added_m, cost_total = _purchases(inst, c, x, F)
    status = "time_limit" if code == 1 else "optimal"
    return _read(inst, c, x, F, F, "flow-provision", status, cost_total, bound,
                 added_c, added_b, added_m, F)  # fmt: skip


def _acyclic(inst: CodesignInstance, c: _Columns, x: FloatArray) -> FloatArray:
    """``x`` with its rates (shares of one unit) replaced by the sum of a decomposition into
    source-target walks: no cycle of relays left (a solver may leave a free one, which would
    show as load), every load at most what the MILP had."""
    W, N = inst.n_cuts, inst.last_cut
    total = float(x[c.phi])
    columns = np.concatenate([c.f0 + np.arange(c.rv.size), c.g0 + np.arange(c.ge.size)])
    tails = np.concatenate([c.rv * W + c.ra, inst.link_src[c.ge] * W + c.gj])
    heads = np.concatenate([c.rv * W + c.rb, inst.link_dst[c.ge] * W + c.gj])
    live = np.flatnonzero(x[columns] > 1e-12 * total)
    arcs = [Arc(int(tails[k]), int(heads[k]), float(x[columns[k]]), ("", int(columns[k])))
            for k in live]  # fmt: skip
    clean = x.copy()
    clean[columns] = 0.0
    for walk, rate in pipelines(arcs, inst.source * W, inst.target * W + N, total):
        for k in walk:
            clean[arcs[k].element[1]] += rate
    return clean


def _ends(inst: CodesignInstance, e: int) -> tuple[str, str]:
    names = inst.node_ids
    return names[int(inst.link_src[e])], names[int(inst.link_dst[e])]


_CAP_RTOL = 1e-9  # a recomputed amount this close above its cap is the cap (HiGHS's tolerance)


def _purchases(
    inst: CodesignInstance, c: _Columns, x: FloatArray, F: float
) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """The capacity, bandwidth and memory each element must add for the flows and layout in
    ``x`` (what its cost sells: whole modules), and their exact price."""
    work = range_work(inst)
    f = x[c.f0 : c.f0 + c.rv.size] * F
    held = (x[c.x0 : c.x0 + c.rv.size] > 0.5) & (f > 1e-12 * F)  # a range nobody uses: none
    load = np.zeros(len(inst.node_ids))
    np.add.at(load, c.rv[held], f[held] * work[c.rv[held], c.ra[held], c.rb[held]])
    g = x[c.g0 : c.g0 + c.ge.size] * F
    carried = np.zeros(len(inst.links))
    np.add.at(carried, c.ge, g * inst.activation_bits[c.gj])
    need = np.zeros(len(inst.node_ids))
    need[c.rv[held]] = inst.memory_need[c.ra[held], c.rb[held]]
    total = 0.0
    added = []
    for have, use, costs in ((inst.capacity, load, inst.node_costs),
                             (inst.bandwidth, carried, inst.link_costs),
                             (inst.memory, need, inst.memory_costs)):  # fmt: skip
        more = np.zeros(have.size)
        for k in np.flatnonzero(use > have * (1 + 1e-12)).tolist():
            # the MILP keeps the purchase within the cap; the load recomputed from its rates
            # may pass it by rounding alone, which is no purchase beyond the cap
            amount = min(float(use[k] - have[k]), costs[k].max_amount) if (
                use[k] - have[k] <= costs[k].max_amount * (1 + _CAP_RTOL)
            ) else float(use[k] - have[k])
            more[k] = costs[k].purchase(amount)
            total += float(np.asarray(costs[k](np.array([amount])))[0])
        added.append(more)
    return added[0], added[1], added[2], total


def _beyond_caps(inst: CodesignInstance, F: float) -> Infeasible | InvalidArgument:
    """The error when the caps allow no flow of ``F``: what they allow at most."""
    try:
        most = flow_throughput(at_caps(inst)).throughput
    except (Infeasible, InvalidArgument):
        return Infeasible(f"no flow plan reaches {F:g} inferences/s within the capacity caps "
                          "(they allow no flow at all)")  # fmt: skip
    if most >= F:
        return InvalidArgument(f"HiGHS found no flow plan of {F:g} inferences/s, which the caps "
                               f"allow (up to {most:.6g}): the numbers span too many decades",
                               field="throughput")  # fmt: skip
    return Infeasible(f"no flow plan reaches {F:g} inferences/s within the capacity caps (they "
                      f"allow at most {most:.6g} inferences/s)")  # fmt: skip


def _read(
    inst: CodesignInstance,
    c: _Columns,
    x: FloatArray,
    unit: float,
    rate: float,
    method: str,
    status: str,
    cost: float,
    bound: float,
    added_c: FloatArray,
    added_b: FloatArray,
    added_m: FloatArray,
    target: float | None,
) -> FlowPlan:
    """The plan in solution ``x`` (rates in units of ``unit``): layout, pipelines, loads and
    the bottleneck cut."""
    names, W, N = inst.node_ids, inst.n_cuts, inst.last_cut
    work = range_work(inst)
    f = x[c.f0 : c.f0 + c.rv.size] * unit
    held = np.flatnonzero((x[c.x0 : c.x0 + c.rv.size] > 0.5) & (f > 1e-12 * rate))
    layout = {names[int(c.rv[k])]: (int(c.ra[k]), int(c.rb[k])) for k in held}
    arcs = [Arc(int(c.rv[k] * W + c.ra[k]), int(c.rv[k] * W + c.rb[k]),
                float(x[c.f0 + k]) * unit, ("node", int(c.rv[k]))) for k in held]  # fmt: skip
    for k in np.flatnonzero(x[c.g0 : c.g0 + c.ge.size] * unit > 1e-12 * rate):
        e = int(c.ge[k])
        arcs.append(Arc(int(inst.link_src[e] * W + c.gj[k]), int(inst.link_dst[e] * W + c.gj[k]),
                        float(x[c.g0 + k]) * unit, ("link", e)))  # fmt: skip
    node_load = np.zeros(len(names))
    link_load = np.zeros(len(inst.links))
    for a in arcs:
        kind, i = a.element
        if kind == "node":
            node_load[i] += a.flow * float(work[i, a.tail % W, a.head % W])
        else:
            link_load[i] += a.flow * float(inst.activation_bits[a.tail % W])
    loads: list[Load] = []
    saturated: set[tuple[str, int]] = set()
    for kind, load, have, more in (("node", node_load, inst.capacity, added_c),
                                   ("link", link_load, inst.bandwidth, added_b)):  # fmt: skip
        used = {a.element[1] for a in arcs if a.element[0] == kind}
        for i in sorted(used):
            label = names[i] if kind == "node" else "->".join(_ends(inst, i))
            capacity = float(have[i] + more[i])
            loads.append(Load(kind, label, float(load[i]), capacity, float(more[i])))  # type: ignore[arg-type]
            if capacity - load[i] <= SATURATED * capacity:
                saturated.add((kind, i))
    walks = pipelines(arcs, inst.source * W, inst.target * W + N, rate)
    found = []
    for walk, carried in walks:
        path: list[str] = [names[inst.source]]
        partition: list[int] = []
        for step in walk:
            if arcs[step].element[0] == "link":
                partition.append(arcs[step].tail % W)
                path.append(names[arcs[step].head // W])
        partition.append(N)
        found.append(Pipeline(tuple(path), tuple(partition), carried))
    bottleneck = cut(arcs, inst.source * W, saturated, rate)
    labels = sorted(names[i] if kind == "node" else "->".join(_ends(inst, i))
                    for kind, i in bottleneck)  # fmt: skip
    if method == "flow-throughput":
        gap = max(0.0, (bound - rate) / bound) if bound > 0 else 0.0
    else:
        gap = max(0.0, (cost - bound) / cost) if cost > 0 else 0.0
    memory_added = {names[v]: float(added_m[v]) for v in np.flatnonzero(added_m > 0)}
    return FlowPlan(method, status, rate, cost, bound, gap, layout, tuple(found),  # type: ignore[arg-type]
                    tuple(loads), tuple(labels), target, memory_added)  # fmt: skip
