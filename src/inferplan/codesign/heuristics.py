"""The co-design paper's baselines: PFP (frozen partitioning) and PWF (water-filling)."""

from __future__ import annotations

import itertools
from typing import Literal

import numpy as np

from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.plan import (
    INTERVAL_RTOL,
    Deployment,
    Plan,
    build_plan,
    stage_delays,
    stage_increments,
)
from inferplan.codesign.throughput import throughput_optimal

__all__ = ["TieBreak", "solve_pfp", "solve_pwf"]

TieBreak = Literal["solver", "keep"]


def _indices(inst: CodesignInstance, deployment: Deployment) -> list[int]:
    position = {v: k for k, v in enumerate(inst.node_ids)}
    return [position[v] for v in deployment.path]


def _path_links(inst: CodesignInstance, path: list[int]) -> list[int]:
    return [inst.link_index(u, v) for u, v in itertools.pairwise(path)]


def solve_pfp(inst: CodesignInstance, beta: float) -> Plan:
    """PFP: freeze a throughput-optimal deployment, then buy the least increments that bring
    each of its stages down to ``beta``."""
    deployment = throughput_optimal(inst)
    path, partition = _indices(inst, deployment), list(deployment.partition)
    rho, sigma = stage_increments(inst, path, partition, beta, inst.capacity, inst.bandwidth)
    node_added = np.zeros(len(inst.node_ids))
    node_added[path] = rho
    link_added = np.zeros(len(inst.links))
    link_added[_path_links(inst, path)] = sigma
    return build_plan(inst, "pfp", beta, path, partition, node_added, link_added)


def solve_pwf(
    inst: CodesignInstance,
    beta: float,
    *,
    tie_break: TieBreak = "solver",
    max_rounds: int | None = None,
) -> Plan:
    """PWF: water-fill the bottleneck stages of a throughput-optimal deployment, level by level.

    Each round lowers every stage slower than the next delay level ``d`` (the largest stage
    delay below the current interval, or ``beta`` if larger) to ``d``, keeps what it bought, and
    recomputes a throughput-optimal deployment. ``tie_break`` decides what happens when the
    current deployment is still among the throughput-optimal ones: ``"solver"`` takes the one
    :func:`throughput_optimal` returns (the paper's "first found"), ``"keep"`` stays put.

    The interval falls strictly every round; after ``max_rounds`` (default ``2 (|V| + |E|) +
    2``) the next round fills straight to ``beta``, so the loop always ends.
    """
    C, B = inst.capacity.copy(), inst.bandwidth.copy()
    rounds = max_rounds if max_rounds is not None else 2 * (len(C) + len(B)) + 2
    deployment = throughput_optimal(inst, C, B)
    path, partition = _indices(inst, deployment), list(deployment.partition)
    for round_number in range(rounds + 1):
        compute, transfer = stage_delays(inst, path, partition, C, B)
        delays = np.concatenate((compute, transfer))
        interval = float(delays.max())
        if interval <= beta * (1 + INTERVAL_RTOL):
            break
        below = delays[delays < interval * (1 - INTERVAL_RTOL)]
        level = max(beta, float(below.max())) if below.size else beta
        if round_number == rounds:
            level = beta
        rho, sigma = stage_increments(inst, path, partition, level, C, B)
        C[path] += rho
        B[_path_links(inst, path)] += sigma
        best = throughput_optimal(inst, C, B)
        if tie_break == "keep":
            compute, transfer = stage_delays(inst, path, partition, C, B)
            current = float(np.concatenate((compute, transfer)).max())
            if current <= best.interval * (1 + INTERVAL_RTOL):
                continue
        path, partition = _indices(inst, best), list(best.partition)
    return build_plan(inst, "pwf", beta, path, partition, C - inst.capacity, B - inst.bandwidth)
