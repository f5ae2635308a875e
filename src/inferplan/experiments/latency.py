"""The latency study: the latency of the cheapest plan for a throughput, and what meeting a
tighter latency bound costs (docs/codesign.md, "What a latency bound costs").

Parameters of a point (validated by :class:`LatencyParams`):

``network``
    ``"tiered"`` (default): a network of the co-design paper's study, drawn from the point's
    seed; or the path of a network file.
``topology``
    Replicate index (default 0); it only matters through the seed (with ``seed_from =
    ["network", "topology"]`` every DNN, target and bound of one topology share its network).
``dnn``
    A built-in profile name or a profile file.
``alpha``
    The target ``beta = alpha * T*``, relative to the network's throughput-optimal interval.
``share``
    The latency bound ``L = share * (the latency of the cheapest plan for beta alone)``.

One row per point: ``t_star``, ``target_interval``; the plan for the interval alone
(``free_cost``, ``free_latency``, its latency in intervals ``free_latency_intervals`` =
``free_latency / beta``, ``free_path``, ``free_partition``, ``free_ideals``: block counts,
or ideal numbers when cut at ideals of a layer graph, the other empty); the cheapest plan
within ``L`` (``bound``, ``status``, ``cost``, ``latency``, ``path``, ``partition``,
``ideals``, ``solve_s`` the wall
time of the solve) and what it changed: ``cost_ratio`` = ``cost / free_cost`` (1 when both
are 0), ``path_changes``, ``partition_changes``. A bound no plan meets within the caps has
``status`` ``infeasible`` and empty costs.

After a sweep of this study, :func:`latency_report` writes its table (``latency-table.md``,
``.csv``: :func:`summarize`) and figure (``latency.png``, ``.pdf``) beside the rows.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from inferplan.codesign.engine.psg import solve_psg
from inferplan.codesign.engine.throughput import throughput_optimal
from inferplan.codesign.instance import compile_instance
from inferplan.codesign.latency.bound import solve_latency
from inferplan.codesign.plan import cut_csv
from inferplan.errors import Infeasible
from inferplan.network import load_network, tiered
from inferplan.profiles import load_profile

__all__ = [
    "SUMMARY_COLUMNS",
    "LatencyOptions",
    "LatencyParams",
    "latency_point",
    "latency_report",
    "markdown_table",
    "summarize",
]

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class LatencyParams(BaseModel):
    """The parameters of one point."""

    model_config = ConfigDict(extra="forbid")

    network: str = "tiered"
    topology: Annotated[int, Field(ge=0)] = 0
    dnn: str
    alpha: Positive
    share: Positive
    sample: Annotated[int, Field(ge=0)] | None = None


class LatencyOptions(BaseModel):
    """Options shared by every point (none yet)."""

    model_config = ConfigDict(extra="forbid")


def latency_point(
    params: Mapping[str, Any], seed: int, options: Mapping[str, Any]
) -> dict[str, Any]:
    """Plan the point's target alone and within its latency bound (the study's point
    function).

    Examples
    --------
    >>> row = latency_point({"topology": 1, "dnn": "vgg16", "alpha": 0.5, "share": 0.5}, 42, {})
    >>> row["status"], row["latency"] <= 0.5 * row["free_latency"] * (1 + 1e-9)
    ('optimal', True)
    >>> row["cost_ratio"] >= 1
    True
    """
    p = LatencyParams.model_validate(params)
    LatencyOptions.model_validate(options)
    net = tiered(seed=seed) if p.network == "tiered" else load_network(Path(p.network))
    inst = compile_instance(net, load_profile(p.dnn))
    t_star = throughput_optimal(inst).interval
    beta = p.alpha * t_star
    row: dict[str, Any] = {"t_star": t_star, "target_interval": beta}
    try:
        free = solve_psg(inst, beta)
    except Infeasible:
        row.update(status="infeasible", cost=math.nan, free_cost=math.nan)
        return row
    assert free.latency is not None  # every plan states its latency
    bound = p.share * free.latency
    row.update(free_cost=free.cost, free_latency=free.latency,
               free_latency_intervals=free.latency / beta, free_path=">".join(free.path),
               free_partition=cut_csv(free.partition), free_ideals=cut_csv(free.ideals),
               bound=bound)  # fmt: skip
    start = time.perf_counter()
    try:
        plan = solve_latency(inst, beta, latency=bound)
    except Infeasible:
        row.update(status="infeasible", cost=math.nan, solve_s=time.perf_counter() - start)
        return row
    ratio = plan.cost / free.cost if free.cost > 0 else (1.0 if plan.cost == 0 else math.inf)
    row.update(status=plan.status, cost=plan.cost, latency=plan.latency,
               path=">".join(plan.path), partition=cut_csv(plan.partition),
               ideals=cut_csv(plan.ideals),
               solve_s=time.perf_counter() - start, cost_ratio=ratio,
               path_changes=plan.path != free.path,
               partition_changes=plan.cut_indices != free.cut_indices)  # fmt: skip
    return row


SUMMARY_COLUMNS = ("dnn", "alpha", "points", "free_latency_ms", "free_latency_intervals",
                   "ratio_075_median", "ratio_075_q75", "ratio_075_max", "ratio_050_median",
                   "ratio_050_q75", "ratio_050_max", "path_changes_050", "not_optimal")  # fmt: skip
"""The columns of :func:`summarize`: per DNN and ``alpha``, the points solved, the median
latency of the cheapest plan for the interval alone (ms, and in intervals), the cost ratio
within 0.75 and 0.5 of it (median, upper quartile, most), the share of points whose path moves
at 0.5, and the points whose plan is not proven optimal."""


def _number(row: Mapping[str, Any], name: str) -> float:
    """A numeric cell, as the rows hold it or as read back from CSV (empty: NaN)."""
    value = row.get(name, "")
    return math.nan if value in ("", None) else float(value)


def summarize(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The study's table: one row per ``(dnn, alpha)`` (see :data:`SUMMARY_COLUMNS`), over the
    points that have a plan for the interval alone; a share that is not swept leaves its
    columns NaN.

    Examples
    --------
    >>> rows = [{**latency_point({"topology": t, "dnn": "vgg16", "alpha": 0.5, "share": s},
    ...                          t, {}), "topology": t, "dnn": "vgg16", "alpha": 0.5, "share": s}
    ...         for t in range(2) for s in (0.5, 0.75)]
    >>> (table,) = summarize(rows)
    >>> table["points"], table["ratio_050_median"] >= table["ratio_075_median"] >= 1
    (2, True)
    """
    groups: dict[tuple[str, float], list[Mapping[str, Any]]] = {}
    for row in rows:
        if math.isfinite(_number(row, "free_cost")):
            groups.setdefault((str(row["dnn"]), float(row["alpha"])), []).append(row)
    table = []
    for (dnn, alpha), members in sorted(groups.items()):
        # the plan for the rate alone, once per network (every share of it solves it again)
        free = {(r.get("network"), r.get("topology"), r.get("sample")): r
                for r in members}.values()  # fmt: skip
        entry: dict[str, Any] = {
            "dnn": dnn, "alpha": alpha, "points": len(free),
            "free_latency_ms": 1e3 * statistics.median(_number(r, "free_latency") for r in free),
            "free_latency_intervals": statistics.median(
                _number(r, "free_latency_intervals") for r in free),
            "not_optimal": sum(1 for r in members if r.get("status") != "optimal"),
        }  # fmt: skip
        for share, key in ((0.75, "075"), (0.5, "050")):
            at = [r for r in members if float(r["share"]) == share]
            ratios = sorted(_number(r, "cost_ratio") for r in at)
            known = bool(ratios) and all(math.isfinite(x) for x in ratios)
            entry[f"ratio_{key}_median"] = statistics.median(ratios) if known else math.nan
            entry[f"ratio_{key}_q75"] = (statistics.quantiles(ratios, n=4)[2]
                                         if known and len(ratios) > 1 else math.nan)  # fmt: skip
            entry[f"ratio_{key}_max"] = max(ratios) if known else math.nan
            if key == "050":
                moved = [str(r.get("path_changes")).lower() == "true" for r in at]
                entry["path_changes_050"] = sum(moved) / len(moved) if moved else math.nan
        table.append(entry)
    return table


def markdown_table(table: Sequence[Mapping[str, Any]]) -> str:
    """The table of :func:`summarize` in Markdown."""
    head = ("| DNN | alpha | points | latency of the plan for the rate alone: ms (intervals) "
            "| cost within 0.75x: median / q75 / max | cost within 0.5x: median / q75 / max "
            "| path moves at 0.5x |")  # fmt: skip
    lines = [head, "|" + " --- |" * 7]
    for r in table:
        lines.append(
            f"| {r['dnn']} | {r['alpha']:g} | {r['points']} | {r['free_latency_ms']:.1f} "
            f"({r['free_latency_intervals']:.2f}) | {r['ratio_075_median']:.2f}x / "
            f"{r['ratio_075_q75']:.2f}x / {r['ratio_075_max']:.2f}x "
            f"| {r['ratio_050_median']:.2f}x / {r['ratio_050_q75']:.2f}x / "
            f"{r['ratio_050_max']:.2f}x | {r['path_changes_050']:.0%} |"
        )
    return "\n".join(lines) + "\n"


def latency_report(rows: Sequence[Mapping[str, Any]], out: Path, notes: list[str]) -> list[Path]:
    """Write the study's table (``latency-table.md``, ``latency-table.csv``) and figure
    (``latency.png``, ``latency.pdf``, when matplotlib is installed, else a note in
    ``notes``) into ``out``; the files written."""
    from inferplan.experiments.outputs import can_draw
    from inferplan.experiments.store import write_csv

    table = summarize(rows)
    written = [out / "latency-table.csv", out / "latency-table.md"]
    write_csv(table, written[0], SUMMARY_COLUMNS)
    written[1].write_text(markdown_table(table), encoding="utf-8")
    if can_draw(notes):
        from inferplan.plots.latency import plot_latency_study

        figures = [out / "latency.png", out / "latency.pdf"]
        plot_latency_study(rows, figures)
        written += figures
    return written
