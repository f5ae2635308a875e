"""The cost frontiers as figures: against the target throughput, or against the latency
bound at one throughput."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from inferplan.codesign.frontier import Frontier
from inferplan.plots._mpl import styled_figure

__all__ = ["plot_frontier"]


def plot_frontier(
    frontier: Frontier, paths: str | Path | Sequence[str | Path], *, title: str = ""
) -> None:
    """Draw the least cost against what the frontier sweeps (the target throughput, or the
    latency bound) and save it to ``paths`` (format by suffix), marking where the optimal path
    (red, dotted) or only the partition (green, dashed) changes, and shading what no plan
    reaches within the capacity caps; the cost on a log scale when it spans more than two
    decades (as it does when a latency bound nears the least latency reachable); the legend
    sits below the axes, clear of the curve and the marks.

    Examples
    --------
    >>> import inferplan, pathlib, tempfile
    >>> from inferplan.codesign import compile_instance, cost_frontier
    >>> front = cost_frontier(compile_instance(inferplan.tiered(seed=3), inferplan.vgg16()),
    ...                       points=5)
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "frontier.png"
    >>> plot_frontier(front, out)
    >>> out.read_bytes()[1:4]
    b'PNG'
    """
    targets = [paths] if isinstance(paths, str | Path) else list(paths)
    latency = frontier.sweep == "latency"
    # latency bounds in ms when they are below a second, as the tables print them
    scale = 1e3 if latency and frontier.points[-1].swept < 1 else 1.0
    with styled_figure(targets, figsize=(3.5, 2.3), layout="constrained") as fig:
        ax = fig.add_subplot()
        feasible = [p for p in frontier.points if math.isfinite(p.cost)]
        # a marker at each exact solve: the line between two of them is drawn, not solved
        ax.plot([p.swept * scale for p in feasible], [p.cost for p in feasible], color="C0",
                marker=".", markersize=3, label=f"least cost ({frontier.method})")  # fmt: skip
        labelled: set[str] = set()
        for change in frontier.changes:
            if not (change.low.path and change.high.path):  # where plans begin or end
                ends = (frontier.points[0], change.low) if change.high.path else (
                    change.high, frontier.points[-1])  # fmt: skip
                kind = "infeasible"
                ax.axvspan(ends[0].swept * scale, ends[1].swept * scale, color="0.85",
                           linewidth=0, label=None if kind in labelled else kind)  # fmt: skip
            else:
                path = change.low.path != change.high.path
                kind = "path changes" if path else "partition changes"
                ax.axvline(change.high.swept * scale, color="C3" if path else "C2",
                           linestyle=":" if path else "--", linewidth=0.8,
                           label=None if kind in labelled else kind)  # fmt: skip
            labelled.add(kind)
        if latency:
            unit = "ms" if scale == 1e3 else "s"
            ax.set_xlabel(f"latency bound ({unit}) at {frontier.points[0].throughput:.4g} "
                          "inferences/s")  # fmt: skip
        else:
            ax.set_xlabel("target throughput (inferences/s)")
        ax.set_ylabel("cost of added capacity")
        costs = [p.cost for p in feasible]
        if costs and min(costs) > 0 and max(costs) > 100 * min(costs):
            ax.set_yscale("log")
        if title:
            ax.set_title(title)
        fig.legend(loc="outside lower center", ncols=3, frameon=False)
