"""The public entry points of the co-design planner: :func:`provision` and :func:`throughput`."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from inferplan.codesign.explain import DEFAULT_EPS, Explanation, explain_plan
from inferplan.codesign.instance import CodesignInstance, compile_instance
from inferplan.codesign.methods import (
    METHODS,
    Method,
    TieBreak,
    get_method,
    resolve,
    solve,
    throughput_methods,
)
from inferplan.codesign.plan import Deployment, Plan, at_caps, beyond_caps
from inferplan.codesign.timing.stage import FLOPS_OVER_CAPACITY, NodeTimeModel, PerNodeTimeModel
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.network import Network
from inferplan.profiles.ideals import MAX_SUBSET_CUTS, CutKind
from inferplan.profiles.profile import Profile

__all__ = [
    "best_at_caps",
    "explain",
    "latency_optimal",
    "provision",
    "target_interval",
    "throughput",
]


def target_interval(*, interval: float | None = None, throughput: float | None = None) -> float:
    """The target output interval ``beta`` from exactly one of ``interval`` (s) or
    ``throughput`` (inferences/s)."""
    if (interval is None) == (throughput is None):
        raise InvalidArgument("give exactly one of interval or throughput")
    name, value = ("interval", interval) if interval is not None else ("throughput", throughput)
    assert value is not None
    if not (math.isfinite(value) and value > 0):
        raise InvalidArgument(f"must be a positive finite number, got {value!r}", field=name)
    return value if name == "interval" else 1.0 / value


def provision(
    network: Network,
    profile: Profile,
    *,
    interval: float | None = None,
    throughput: float | None = None,
    method: str = "psg",
    tie_break: TieBreak | None = None,
    seed: int | None = None,
    time_limit: float | None = None,
    cuts: CutKind | None = None,
    max_ideals: int | None = None,
    latency: float | None = None,
    node_time: NodeTimeModel | PerNodeTimeModel = FLOPS_OVER_CAPACITY,
) -> Plan:
    """Plan the cheapest capacity upgrades (and the deployment) that reach a target rate.

    Parameters
    ----------
    network, profile
        The compute network and the DNN.
    interval, throughput
        The target output interval ``beta`` in seconds, or the throughput ``1 / beta`` in
        inferences per second (give exactly one).
    method
        A name of :data:`~inferplan.codesign.METHODS`: ``"psg"`` (exact on acyclic
        networks), ``"milp"`` (exact on any network, cycles included), ``"pfp"`` or
        ``"pwf"`` (the paper's baselines),
        ``"psg-reference"`` (the paper's Algorithm 1 as written).
    tie_break, seed
        PFP and PWF only: which throughput-optimal deployment to follow when several tie,
        ``"solver"`` (the default), ``"keep"`` or ``"random"`` (drawn from ``seed``); see
        :func:`inferplan.codesign.solve_pwf`.
    time_limit
        MILP only: seconds HiGHS may take; at the limit the plan has status ``"time_limit"``.
    cuts, max_ideals
        Where the model may be cut: ``"chain"`` (between consecutive blocks) or ``"graph"``
        (at every ideal of the profile's layer graph, at most ``max_ideals`` of them); by
        default the graph's when the profile has one within the limits (see
        :func:`~inferplan.codesign.instance.compile_instance`).
    latency
        A bound (s) on the plan's latency, the time one inference takes through it: PSG
        (exact, acyclic networks; :mod:`inferplan.codesign.latency.bound`), the MILP (exact on any
        network; :mod:`inferplan.codesign.milp.latency`) and PFP (its frozen deployment,
        allocated exactly) take it.
    node_time
        How long a stage takes on a node (:mod:`inferplan.codesign.timing`): by default its
        FLOPs over the node's capacity; a per-node model such as
        :class:`~inferplan.codesign.timing.measured.MeasuredBlocks` gives each node its own
        times (every method reads it but the MILP under a latency bound, which refuses it).

    Returns
    -------
    Plan
        With ``status`` ``"optimal"`` (exact methods) or ``"heuristic"`` (baselines).

    Raises
    ------
    Infeasible
        If no plan of the method meets the target within the capacity caps (every method).
        Its message names the best interval the caps allow (``T*`` with every node and link
        at its cap) and the caps that bind it; its ``details`` hold the same as numbers.
    InvalidArgument
        For an unknown method, or an option the method does not take.

    Examples
    --------
    >>> import inferplan
    >>> net = inferplan.tiered(seed=7)
    >>> vgg = inferplan.load_profile("vgg16")
    >>> best = inferplan.throughput(net, vgg)
    >>> plan = inferplan.provision(net, vgg, interval=0.5 * best.interval)
    >>> plan.interval <= 0.5 * best.interval * (1 + 1e-9) and plan.cost > 0
    True
    """
    beta = target_interval(interval=interval, throughput=throughput)
    chosen, preset = resolve(method)
    tables, held = _tables(network, chosen, "solve", latency,
                           tie_break or preset.get("tie_break"))  # fmt: skip
    inst = compile_instance(network, profile, require_acyclic=chosen.acyclic_only, cuts=cuts,
                            max_ideals=max_ideals, pairs=tables, held=held,
                            node_time=node_time)  # fmt: skip
    try:
        return solve(inst, beta, method, tie_break=tie_break, seed=seed, time_limit=time_limit,
                     latency=latency)  # fmt: skip
    except Infeasible as error:
        if latency is not None:
            raise  # its message gives the least latency within the caps
        found = best_at_caps(inst)
        if found is None:  # not even the caps' capacities fit the model's memory
            raise
        raise beyond_caps(error, *found, beta) from None


def explain(
    network: Network,
    profile: Profile,
    plan: Plan,
    *,
    method: str | None = None,
    eps: float = DEFAULT_EPS,
    max_ideals: int | None = None,
    time_limit: float | None = None,
) -> Explanation:
    """Why ``plan`` (made for ``network`` and ``profile``) is what it is: the best plan on
    another path and on other cuts of its path, the constraints that bind, and the marginal
    cost of the target and of each binding cap and bound, all by an exact method (``psg``, or
    ``milp`` on a network with a cycle; see :mod:`inferplan.codesign.explain`).

    Examples
    --------
    >>> import inferplan
    >>> net, vgg = inferplan.load_network("examples/network.json"), inferplan.vgg16()
    >>> plan = inferplan.provision(net, vgg, throughput=30)
    >>> why = inferplan.explain(net, vgg, plan)
    >>> why.other_path.plan.path != plan.path and why.other_path.extra_cost >= 0
    True
    >>> why.other_cuts.plan.partition != plan.partition and why.other_cuts.plan.path == plan.path
    True
    >>> [(c.kind, c.id) for c in why.binding]  # the stages the target fills
    [('interval', 's->a1'), ('interval', 't')]
    >>> round(why.marginal_throughput, 2)  # price units per extra inference/s
    3.58
    """
    inst = compile_instance(network, profile, require_acyclic=False, cuts=plan.cuts,
                            max_ideals=max_ideals)  # fmt: skip
    return explain_plan(inst, plan, method=method, eps=eps, time_limit=time_limit)


def best_at_caps(inst: CodesignInstance) -> tuple[CodesignInstance, Deployment] | None:
    """``inst`` with every element at its cap (:func:`~inferplan.codesign.plan.at_caps`) and
    its ``T*``: by the state graph on an acyclic network, else by the MILP; ``None`` when not
    even the caps' capacities fit the model's memory."""
    capped = at_caps(inst)
    try:
        best: Deployment = METHODS["psg" if inst.acyclic else "milp"].throughput(capped)  # type: ignore[misc]
    except Infeasible:
        return None
    return capped, best


def throughput(
    network: Network,
    profile: Profile,
    *,
    method: str = "psg",
    cuts: CutKind | None = None,
    max_ideals: int | None = None,
    latency: float | None = None,
    node_time: NodeTimeModel | PerNodeTimeModel = FLOPS_OVER_CAPACITY,
) -> Deployment:
    """The throughput-optimal deployment and its interval ``T*``: the least output interval
    under the existing capacities.

    Parameters
    ----------
    network, profile
        The compute network and the DNN.
    method
        ``"psg"`` (the state graph with bottleneck relaxation; acyclic networks) or
        ``"milp"`` (exact on any network, cycles included; minimises the slowest stage): the
        methods of :data:`~inferplan.codesign.METHODS` with a ``throughput``.
    cuts, max_ideals
        Where the model may be cut, as for :func:`provision`. With ``"psg"``, no latency bound
        and no node's memory given, T* needs no tables of pairs (the lattice engine,
        :mod:`~inferplan.codesign.engine.lattice`): it takes every ideal up to ``max_ideals``, where
        the other planners hold at most :data:`~inferplan.profiles.ideals.MAX_STATE_CUTS`.
    latency
        Only deployments whose latency is at most this many seconds (``"psg"``; see
        :func:`~inferplan.codesign.latency.least.throughput_within`).
    node_time
        How long a stage takes on a node, as for :func:`provision`.

    Raises
    ------
    NetworkHasCycle
        With ``method="psg"``, if a cycle lies on the way from source to target.
    InvalidArgument
        For a method that does not compute ``T*``.

    Examples
    --------
    >>> import inferplan
    >>> best = inferplan.throughput(inferplan.tiered(seed=7), inferplan.load_profile("vgg16"))
    >>> best.path[0], best.path[-1], best.partition[-1]
    ('s', 't', 16)
    """
    chosen = get_method(method)
    if chosen.throughput is None:
        raise InvalidArgument(
            f"method {method!r} does not compute T* (methods: {', '.join(throughput_methods())})",
            field="method",
        )
    tables, held = _tables(network, chosen, "throughput", latency, None)
    inst = compile_instance(network, profile, require_acyclic=chosen.acyclic_only, cuts=cuts,
                            max_ideals=max_ideals, pairs=tables, held=held,
                            node_time=node_time)  # fmt: skip
    if latency is not None:
        if chosen.name != "psg":  # the state graph's bisection: acyclic networks only
            raise InvalidArgument(f"method {method!r} does not take latency (psg does)",
                                  field="latency")  # fmt: skip
        from inferplan.codesign.latency.least import throughput_within

        return throughput_within(inst, latency)
    best: Deployment = chosen.throughput(inst)
    return best


def _tables(
    network: Network,
    method: Method,
    entry: Literal["solve", "throughput"],
    latency: float | None,
    tie_break: str | None,
) -> tuple[bool, int | None]:
    """Whether ``method``'s ``entry`` keeps tables of every pair of cuts here (see
    :attr:`~inferplan.codesign.methods.Method.lattice`), so that the default cuts are a layer
    graph's only up to :data:`~inferplan.profiles.ideals.MAX_STATE_CUTS` ideals; and, when it
    keeps none, the most ideals it holds (PSG's solve:
    :data:`~inferplan.profiles.ideals.MAX_SUBSET_CUTS`; ``None``: every one)."""
    memory = bool(np.isfinite(network.node_memory).any())
    tables = (entry not in method.lattice or latency is not None or tie_break == "random"
              or (memory and entry not in method.memory_lattice))  # fmt: skip
    return tables, MAX_SUBSET_CUTS if entry in method.memory_lattice else None


def latency_optimal(
    network: Network,
    profile: Profile,
    *,
    interval: float | None = None,
    throughput: float | None = None,
    node_time: NodeTimeModel | PerNodeTimeModel = FLOPS_OVER_CAPACITY,
) -> Deployment:
    """The deployment of least latency under the existing capacities (acyclic networks),
    among those whose every stage meets ``interval`` (s) or ``throughput`` (inferences/s)
    when one is given: the state graph, min-sum over each transition's compute, transfer and
    propagation delays (:func:`~inferplan.codesign.latency.least.least_latency`).
    ``node_time``: how long a stage takes on a node, as for :func:`provision`.

    Raises
    ------
    Infeasible
        If no deployment meets the interval as the network is.

    Examples
    --------
    >>> import inferplan
    >>> net, vgg = inferplan.tiered(seed=7), inferplan.load_profile("vgg16")
    >>> fast = inferplan.latency_optimal(net, vgg)
    >>> fast.latency <= inferplan.throughput(net, vgg).latency
    True
    """
    from inferplan.codesign.latency.least import least_latency

    beta = None
    if interval is not None or throughput is not None:
        beta = target_interval(interval=interval, throughput=throughput)
    return least_latency(compile_instance(network, profile, node_time=node_time), beta)
