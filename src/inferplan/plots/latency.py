"""The latency study as a figure: the latency of the cheapest plan for a rate, and what a
tighter latency bound costs."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inferplan.plots._mpl import styled_figure

__all__ = ["plot_latency_study"]


def _cell(row: Mapping[str, Any], name: str) -> float:
    value = row.get(name, "")
    return math.nan if value in ("", None) else float(value)


def _times(value: float, _: int) -> str:
    """A ratio's tick label (``2x``), on the log axis's 1-2-5 steps only."""
    leading = f"{value:.0e}"[0]
    return f"{value:g}x" if leading in "125" else ""


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    """Median, lower and upper quartile."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0], ordered[0], ordered[0]
    q1, _, q3 = statistics.quantiles(ordered, n=4)
    return statistics.median(ordered), q1, q3


def plot_latency_study(
    rows: Sequence[Mapping[str, Any]], paths: str | Path | Sequence[str | Path]
) -> None:
    """Draw the latency study's rows (:func:`~inferplan.experiments.latency.latency_point`)
    and save the figure to ``paths``: left, the latency of the cheapest plan for the rate alone
    in intervals (median and quartiles over the networks) per DNN and ``alpha``; right, the
    cost of the cheapest plan within a share of that latency over that plan's cost (log
    scale), against the share, one line per DNN (colour) and ``alpha`` (line style), median
    with the quartiles as bars; at share 1 the ratio is 1 by definition (the plan for the rate
    alone meets its own latency).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from inferplan.experiments.latency import latency_point
    >>> rows = [{**latency_point({"topology": t, "dnn": "vgg16", "alpha": 0.5, "share": s},
    ...                          t, {}), "topology": t, "dnn": "vgg16", "alpha": 0.5, "share": s}
    ...         for t in range(2) for s in (0.5, 0.75)]
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "latency.png"
    >>> plot_latency_study(rows, out)
    >>> out.read_bytes()[1:4]
    b'PNG'
    """
    targets = [paths] if isinstance(paths, str | Path) else list(paths)
    solved = [r for r in rows if math.isfinite(_cell(r, "free_cost"))]
    dnns = sorted({str(r["dnn"]) for r in solved})
    alphas = sorted({float(r["alpha"]) for r in solved})
    styles = ["-", "--", ":", "-."]
    with styled_figure(targets, figsize=(7.0, 2.8), layout="constrained") as fig:
        left, right = fig.subplots(1, 2, width_ratios=[1, 1.4])
        ticks, names = [], []
        for k, dnn in enumerate(dnns):
            for j, alpha in enumerate(alphas):
                once = {(r.get("network"), r.get("topology"), r.get("sample")): r for r in solved
                        if r["dnn"] == dnn and float(r["alpha"]) == alpha}.values()  # fmt: skip
                if not once:
                    continue
                mid, q1, q3 = _spread([_cell(r, "free_latency_intervals") for r in once])
                x = k * (len(alphas) + 1) + j
                left.errorbar([x], [mid], yerr=[[mid - q1], [q3 - mid]], fmt="o", color=f"C{k}",
                              capsize=2, markersize=4)  # fmt: skip
                ticks.append(x)
                names.append(f"{dnn}\nalpha {alpha:g}")
        left.set_xticks(ticks, names)
        left.set_ylabel("latency / interval")
        left.set_title("the plan for the rate alone")
        left.set_ylim(bottom=0)
        for k, dnn in enumerate(dnns):
            for j, alpha in enumerate(alphas):
                mine = [r for r in solved if r["dnn"] == dnn and float(r["alpha"]) == alpha
                        and math.isfinite(_cell(r, "cost_ratio"))]  # fmt: skip
                shares = sorted({float(r["share"]) for r in mine})
                if not shares:
                    continue
                spread = [_spread([_cell(r, "cost_ratio") for r in mine
                                   if float(r["share"]) == s]) for s in shares]  # fmt: skip
                xs, mids = [*shares, 1.0], [m for m, _, _ in spread] + [1.0]
                low = [m - q1 for m, q1, _ in spread] + [0.0]
                high = [q3 - m for m, _, q3 in spread] + [0.0]
                right.plot(
                    xs,
                    mids,
                    color=f"C{k}",
                    linestyle=styles[j % len(styles)],
                    marker="o",
                    markersize=3,
                    label=f"{dnn}, alpha {alpha:g}",
                )
                right.errorbar(xs, mids, yerr=[low, high], fmt="none", ecolor=f"C{k}",
                               capsize=2, linewidth=0.8)  # fmt: skip
        right.set_yscale("log")
        right.yaxis.set_major_formatter(_times)
        right.yaxis.set_minor_formatter(_times)
        right.set_xlabel("latency bound / latency of the plan for the rate alone")
        right.set_ylabel("cost / cost for the rate alone")
        right.set_title("what the bound costs")
        fig.legend(loc="outside lower center", ncols=max(1, len(dnns) * len(alphas)),
                   frameon=False, handlelength=3.5)  # fmt: skip
