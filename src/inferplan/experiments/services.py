"""The services study: what planning several services together saves over planning each
alone (docs/services.md).

Parameters of a point (validated by :class:`ServicesParams`):

``network``
    ``"tiered"`` (default): a network of the co-design paper's study drawn from the point's
    seed, or the path of a network file. Every service runs from its source to its target.
``topology``
    Replicate index (default 0); it only matters through the seed.
``services``
    How many services share the network: drawn, with repetition, from the option ``dnns``
    by the point's seed.
``alpha``
    The target of each service: ``beta_s = alpha * T*_s``, its own throughput-optimal interval
    on the network as it is (alone).

Options: ``dnns`` (default ``[vgg16, resnet50, alexnet]``), ``fast`` (also run the fast planner,
default true), ``time_limit`` (seconds for the MILP, default none).

One row per point: ``dnns`` (the drawn profiles, ``+``-joined); ``joint_cost``,
``joint_status``, ``joint_s`` (the exact joint MILP), ``joint_latency_max`` (the largest
latency of its services, seconds); ``alone_cost``: each service planned
alone by PSG, its deployment kept, and the capacity their summed loads need bought (a feasible
plan, what planning separately costs); ``alone_sum``: the sum of the services' own plan costs
(buying each one's upgrades as if the capacity were its alone; when services share an element
that is not enough: ``alone_overloads`` says whether it is cheaper than ``alone_cost``, i.e.
the plans bought separately overload a shared element); ``saving`` = ``1 - joint_cost /
alone_cost``; with ``fast``: ``fast_cost``, ``fast_bound``, ``fast_status``, ``fast_s``, and
``fast_excess`` = ``fast_cost / joint_cost - 1`` (its true distance from the optimum) beside
``fast_gap`` (the gap it states). A point no plan serves has ``joint_status`` ``infeasible``
and empty costs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from inferplan.codesign.engine.psg import solve_psg
from inferplan.codesign.engine.throughput import throughput_optimal
from inferplan.codesign.instance import compile_instance
from inferplan.codesign.services.fast import solve_joint_fast
from inferplan.codesign.services.joint import JointProblem, Service
from inferplan.codesign.services.milp import solve_joint_milp
from inferplan.errors import Infeasible
from inferplan.network import load_network, tiered
from inferplan.profiles import load_profile

__all__ = [
    "SUMMARY_COLUMNS",
    "ServicesOptions",
    "ServicesParams",
    "check_values",
    "markdown_table",
    "services_point",
    "services_report",
    "summarize",
]

DEFAULT_DNNS = ("vgg16", "resnet50", "alexnet")


class ServicesParams(BaseModel):
    """The parameters of one point."""

    model_config = ConfigDict(extra="forbid")

    network: str = "tiered"
    topology: Annotated[int, Field(ge=0)] = 0
    services: Annotated[int, Field(ge=1, le=16)]
    alpha: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    sample: Annotated[int, Field(ge=0)] | None = None


class ServicesOptions(BaseModel):
    """Options shared by every point."""

    model_config = ConfigDict(extra="forbid")

    dnns: list[str] = Field(default_factory=lambda: list(DEFAULT_DNNS), min_length=1)
    fast: bool = True
    time_limit: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None


def check_values(name: str, value: Any) -> None:
    """Check a ``network`` value can be loaded, before a sweep starts.

    Raises
    ------
    InferplanError
        The loader's error, e.g. a missing file.
    """
    if name == "network" and value != "tiered":
        load_network(Path(str(value)))


def services_point(
    params: Mapping[str, Any], seed: int, options: Mapping[str, Any]
) -> dict[str, Any]:
    """Plan the point's services jointly and alone (the study's point function).

    Examples
    --------
    >>> row = services_point({"topology": 1, "services": 2, "alpha": 0.5}, 42, {})
    >>> row["joint_status"], row["joint_cost"] <= row["alone_cost"] * (1 + 1e-6)
    ('optimal', True)
    """
    p = ServicesParams.model_validate(params)
    o = ServicesOptions.model_validate(options)
    for name in o.dnns:
        load_profile(name)
    net = tiered(seed=seed) if p.network == "tiered" else load_network(Path(p.network))
    rng = np.random.default_rng(seed)
    names = [o.dnns[int(k)] for k in rng.integers(len(o.dnns), size=p.services)]
    services = []
    for k, name in enumerate(names):
        profile = load_profile(name)
        t_star = throughput_optimal(compile_instance(net, profile)).interval
        services.append(Service(f"{name}-{k}", profile, net.source, net.target,
                                p.alpha * t_star))  # fmt: skip
    problem = JointProblem(net, services, require_acyclic=False)
    row: dict[str, Any] = {"dnns": "+".join(names)}
    start = time.perf_counter()
    try:
        joint = solve_joint_milp(problem, time_limit=o.time_limit)
    except Infeasible:
        row.update(joint_status="infeasible", joint_cost=math.nan, joint_s=math.nan)
        return row
    latencies = [d.latency for d in joint.services if d.latency is not None]
    row.update(joint_cost=joint.cost, joint_status=joint.status,
               joint_s=time.perf_counter() - start, joint_latency_max=max(latencies))  # fmt: skip
    alone = []
    for s, service in enumerate(services):
        plan = solve_psg(problem.instances[s], service.interval)
        index = {v: k for k, v in enumerate(problem.instances[s].node_ids)}
        alone.append((tuple(index[v] for v in plan.path), plan.cut_indices, plan.cost))
    alone_cost = problem.cost([(path, partition) for path, partition, _ in alone])
    alone_sum = math.fsum(cost for _, _, cost in alone)
    row.update(
        alone_cost=alone_cost,
        alone_sum=alone_sum,
        alone_overloads=alone_sum < alone_cost,
        saving=1.0 - joint.cost / alone_cost if alone_cost > 0 else 0.0,
    )
    if o.fast:
        start = time.perf_counter()
        try:
            fast = solve_joint_fast(problem, seed=seed % 2**32)
        except Infeasible:  # none of its orders found a plan within the caps
            row.update(fast_status="infeasible", fast_s=time.perf_counter() - start)
            return row
        row.update(
            fast_cost=fast.cost,
            fast_bound=fast.lower_bound,
            fast_status=fast.status,
            fast_s=time.perf_counter() - start,
            fast_excess=fast.cost / joint.cost - 1.0 if joint.cost > 0 else 0.0,
            fast_gap=fast.gap,
        )
    return row


SUMMARY_COLUMNS = ("services", "alpha", "points", "saving_median", "saving_min", "saving_max",
                   "overloads", "fast_optimal", "fast_excess_median", "fast_excess_max",
                   "fast_gap_median", "joint_s_median", "fast_s_median")  # fmt: skip
"""The columns of :func:`summarize`: per number of services and ``alpha``, the points solved,
the saving of the joint plan over each service alone (median, least, most), the share of
points where buying each service's own upgrades overloads a shared element, the share the
fast planner proved optimal, its true excess over the optimum (median, most), its stated gap
(median), and the median seconds of the MILP and of the fast planner."""


def summarize(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The study's table: one row per ``(services, alpha)`` (see :data:`SUMMARY_COLUMNS`);
    points without a joint plan are left out.

    Examples
    --------
    >>> rows = [services_point({"topology": t, "services": 2, "alpha": 0.5}, t, {})
    ...         for t in range(2)]
    >>> [(r["services"], r["alpha"], r["points"]) for r in
    ...  summarize([{**r, "services": 2, "alpha": 0.5} for r in rows])]
    [(2, 0.5, 2)]
    """
    groups: dict[tuple[int, float], list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("joint_status") not in (None, "infeasible"):
            groups.setdefault((int(row["services"]), float(row["alpha"])), []).append(row)
    table = []
    for (count, alpha), members in sorted(groups.items()):
        saving = np.array([float(r["saving"]) for r in members])
        fast = [r for r in members if r.get("fast_status") not in (None, "", "infeasible")]
        excess = np.array([float(r["fast_excess"]) for r in fast]) if fast else np.array([np.nan])
        gap = np.array([float(r["fast_gap"]) for r in fast]) if fast else np.array([np.nan])
        table.append({
            "services": count, "alpha": alpha, "points": len(members),
            "saving_median": float(np.median(saving)), "saving_min": float(saving.min()),
            "saving_max": float(saving.max()),
            "overloads": float(np.mean([_true(r["alone_overloads"]) for r in members])),
            "fast_optimal": (float(np.mean([r["fast_status"] == "optimal" for r in fast]))
                             if fast else math.nan),
            "fast_excess_median": float(np.median(excess)), "fast_excess_max": float(excess.max()),
            "fast_gap_median": float(np.median(gap)),
            "joint_s_median": float(np.median([float(r["joint_s"]) for r in members])),
            "fast_s_median": (float(np.median([float(r["fast_s"]) for r in fast]))
                              if fast else math.nan),
        })  # fmt: skip
    return table


def _true(value: Any) -> bool:
    """A boolean cell, as written (``True``) or read back from CSV (``"True"``)."""
    return value is True or str(value).lower() == "true"


def services_report(out: str | Path) -> list[dict[str, Any]]:
    """Read ``out/results.csv`` (a finished ``inferplan sweep`` of this study), write the
    table (``services-table.md``, ``services-table.csv``) and the figure (``services.png``,
    ``services.pdf``) beside it, and return the table."""
    import csv

    from inferplan.experiments.store import write_csv
    from inferplan.plots.services import plot_services_study

    out = Path(out)
    with (out / "results.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    table = summarize(rows)
    write_csv(table, out / "services-table.csv", SUMMARY_COLUMNS)
    (out / "services-table.md").write_text(markdown_table(table), encoding="utf-8")
    plot_services_study(rows, [out / "services.png", out / "services.pdf"])
    return table


def markdown_table(table: Sequence[Mapping[str, Any]]) -> str:
    """The table of :func:`summarize` in Markdown, percentages and seconds rounded."""
    head = ("| services | alpha | points | saving: median (min-max) | alone plans overload "
            "| fast: proven optimal | fast: excess median / max | fast: stated gap median "
            "| MILP s | fast s |")  # fmt: skip
    lines = [head, "|" + " --- |" * 10]
    for r in table:
        lines.append(
            f"| {r['services']} | {r['alpha']:g} | {r['points']} | {r['saving_median']:.1%} "
            f"({r['saving_min']:.1%}-{r['saving_max']:.1%}) | {r['overloads']:.0%} "
            f"| {r['fast_optimal']:.0%} | {r['fast_excess_median']:.2%} / "
            f"{r['fast_excess_max']:.2%} | {r['fast_gap_median']:.1%} "
            f"| {r['joint_s_median']:.2f} | {r['fast_s_median']:.3f} |"
        )
    return "\n".join(lines) + "\n"
