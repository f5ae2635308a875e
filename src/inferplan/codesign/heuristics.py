"""The co-design paper's baselines: PFP (frozen partitioning) and PWF (water-filling)."""

from __future__ import annotations

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.codesign.engine.throughput import throughput_optimal
from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.latency.bound import frozen_latency_plan
from inferplan.codesign.memory import most_memory
from inferplan.codesign.methods import TIE_BREAKS, TieBreak
from inferplan.codesign.optima import OptimalDeployments
from inferplan.codesign.plan import (
    INTERVAL_RTOL,
    Plan,
    added,
    build_plan,
    check_scale,
    plan_from_path,
)
from inferplan.codesign.stages import stages
from inferplan.errors import Infeasible, InvalidArgument

__all__ = ["TIE_BREAKS", "TieBreak", "solve_pfp", "solve_pwf"]


def _optimal_deployment(
    inst: CodesignInstance,
    C: FloatArray,
    B: FloatArray,
    tie_break: TieBreak,
    rng: np.random.Generator,
    current: tuple[list[int], list[int]] | None = None,
) -> tuple[list[int], list[int]]:
    """A throughput-optimal deployment under ``C``, ``B``, chosen among ties by ``tie_break``,
    among the deployments that fit the memory the nodes can have (buying what they need)."""
    memory = most_memory(inst)
    best = throughput_optimal(inst, C, B, memory=memory)
    if (
        tie_break == "keep"
        and current is not None
        and stages(inst, *current).interval(C, B) <= best.interval * (1 + INTERVAL_RTOL)
    ):
        return current
    if tie_break == "random":
        return OptimalDeployments(inst, C, B, best.interval, memory).draw(rng)
    position = {v: k for k, v in enumerate(inst.node_ids)}
    return [position[v] for v in best.path], list(best.cut_indices)


def _check_tie_break(tie_break: str) -> None:
    if tie_break not in TIE_BREAKS:
        raise InvalidArgument(
            f"unknown tie-break {tie_break!r} (known: {', '.join(TIE_BREAKS)})", field="tie_break"
        )


def solve_pfp(
    inst: CodesignInstance,
    beta: float,
    *,
    tie_break: TieBreak = "solver",
    seed: int | np.random.Generator | None = None,
    latency: float | None = None,
) -> Plan:
    """PFP: freeze a throughput-optimal deployment, then buy the least increments that bring
    each of its stages down to ``beta`` (with a ``latency`` bound, the cheapest that bring it
    within both: :func:`~inferplan.codesign.latency.bound.frozen_latency_plan`).

    ``tie_break`` picks the deployment among several optimal ones: ``"solver"`` (or ``"keep"``)
    the one :func:`throughput_optimal` returns, ``"random"`` one drawn uniformly from ``seed``.
    """
    _check_tie_break(tie_break)
    check_scale(inst, beta)
    rng = np.random.default_rng(seed)
    path, partition = _optimal_deployment(inst, inst.capacity, inst.bandwidth, tie_break, rng)
    if latency is not None:
        return frozen_latency_plan(inst, beta, latency, path, partition, "pfp", "heuristic")
    plan = plan_from_path(inst, "pfp", beta, path, partition, status="heuristic")
    check_scale(inst, beta, plan.cost)
    return plan


def solve_pwf(
    inst: CodesignInstance,
    beta: float,
    *,
    tie_break: TieBreak = "solver",
    seed: int | np.random.Generator | None = None,
    max_rounds: int | None = None,
) -> Plan:
    """PWF: water-fill the bottleneck stages of a throughput-optimal deployment, level by level.

    Each round lowers every stage slower than the next delay level ``d`` (the largest stage
    delay below the current interval, or ``beta`` if larger) to ``d``, keeps what it bought, and
    recomputes a throughput-optimal deployment. ``tie_break`` decides which one when several
    are optimal: ``"solver"`` takes the one :func:`throughput_optimal` returns (our reading of
    the paper's "first found"), ``"keep"`` stays on the current deployment while it is still
    optimal, ``"random"`` draws one uniformly (seeded by ``seed``; see
    :mod:`inferplan.codesign.optima`).

    PWF ignores prices, so caps do not steer it: when what it bought along the way exceeds a
    cap, the plan buys only what its final deployment needs, and raises
    :class:`~inferplan.errors.Infeasible` if even that exceeds a cap (as PFP does for its
    deployment).

    The interval falls strictly every round; after ``max_rounds`` (default ``2 (|V| + |E|) +
    2``) the next round fills straight to ``beta``, so the loop always ends.
    """
    _check_tie_break(tie_break)
    check_scale(inst, beta)
    rng = np.random.default_rng(seed)
    C, B = inst.capacity.copy(), inst.bandwidth.copy()
    rounds = max_rounds if max_rounds is not None else 2 * (len(C) + len(B)) + 2
    path, partition = _optimal_deployment(inst, C, B, tie_break, rng)
    for round_number in range(rounds + 1):
        deployment = stages(inst, path, partition)
        compute, transfer = deployment.delays(C, B)
        delays = compute + transfer
        interval = max(delays)
        if interval <= beta * (1 + INTERVAL_RTOL):
            break
        below = [d for d in delays if d < interval * (1 - INTERVAL_RTOL)]
        level = max(beta, max(below)) if below else beta
        if round_number == rounds:
            level = beta
        rho, sigma = deployment.increments(level, C, B)
        for v, amount in rho.items():
            C[v] += amount
        for e, amount in sigma.items():
            B[e] += amount
        path, partition = _optimal_deployment(inst, C, B, tie_break, rng, (path, partition))
    try:
        plan = build_plan(inst, "pwf", beta, path, partition, added(C - inst.capacity),
                          added(B - inst.bandwidth), status="heuristic")  # fmt: skip
    except Infeasible:
        # Capacity bought for earlier deployments broke a cap: buy only what the final one needs.
        plan = plan_from_path(inst, "pwf", beta, path, partition, status="heuristic")
    check_scale(inst, beta, plan.cost)
    return plan
