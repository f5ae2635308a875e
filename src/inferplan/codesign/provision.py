"""The public entry points of the co-design planner: :func:`provision` and :func:`throughput`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from inferplan.codesign.heuristics import TieBreak, solve_pfp, solve_pwf
from inferplan.codesign.instance import CodesignInstance, compile_instance
from inferplan.codesign.milp import solve_milp
from inferplan.codesign.plan import Deployment, Plan
from inferplan.codesign.psg import reference_psg, solve_psg
from inferplan.codesign.throughput import throughput_optimal
from inferplan.errors import InvalidArgument
from inferplan.network.network import Network
from inferplan.profiles.profile import Profile

__all__ = ["METHODS", "Method", "provision", "target_interval", "throughput"]


@dataclass(frozen=True)
class Method:
    """A provisioning method: its solver and whether it needs an acyclic network."""

    solve: Callable[[CodesignInstance, float], Plan]
    acyclic_only: bool = True
    summary: str = ""


METHODS: dict[str, Method] = {
    "psg": Method(solve_psg, summary="exact minimum cost (acyclic networks)"),
    "pfp": Method(solve_pfp, summary="baseline: provisioning under frozen partitioning"),
    "pwf": Method(solve_pwf, summary="baseline: provisioning with water-filling"),
    "psg-reference": Method(reference_psg, summary="the paper's Algorithm 1, scalar loops"),
    "milp": Method(
        solve_milp, acyclic_only=False, summary="exact MILP (HiGHS) on any network, cycles too"
    ),
}


def target_interval(interval: float | None = None, throughput: float | None = None) -> float:
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
    tie_break: TieBreak = "solver",
    seed: int | None = None,
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
        ``"psg"`` (exact on acyclic networks), ``"milp"`` (exact on any network, cycles
        included; linear, module and convex tiered costs), ``"pfp"`` or ``"pwf"`` (the paper's
        baselines), ``"psg-reference"`` (the paper's Algorithm 1 as written).
    tie_break, seed
        PFP and PWF only: which throughput-optimal deployment to follow when several tie,
        ``"solver"``, ``"keep"`` or ``"random"`` (drawn from ``seed``); see
        :func:`inferplan.codesign.solve_pwf`.

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
    beta = target_interval(interval, throughput)
    if method not in METHODS:
        raise InvalidArgument(
            f"unknown method {method!r} (known: {', '.join(METHODS)})", field="method"
        )
    chosen = METHODS[method]
    inst = compile_instance(network, profile, require_acyclic=chosen.acyclic_only)
    if method == "pwf":
        return solve_pwf(inst, beta, tie_break=tie_break, seed=seed)
    if method == "pfp":
        return solve_pfp(inst, beta, tie_break=tie_break, seed=seed)
    return chosen.solve(inst, beta)


def throughput(network: Network, profile: Profile) -> Deployment:
    """The throughput-optimal deployment and its interval ``T*`` (acyclic networks).

    Examples
    --------
    >>> import inferplan
    >>> best = inferplan.throughput(inferplan.tiered(seed=7), inferplan.load_profile("vgg16"))
    >>> best.path[0], best.path[-1], best.partition[-1]
    ('s', 't', 16)
    """
    return throughput_optimal(compile_instance(network, profile))
