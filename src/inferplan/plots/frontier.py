"""The cost-throughput frontier as a figure."""

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
    """Draw the least cost against the target throughput and save it to ``paths`` (format by
    suffix), marking where the optimal path (red, dotted) or only the partition (green, dashed)
    changes; the legend sits below the axes, clear of the curve and the marks.

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
    with styled_figure(targets, figsize=(3.5, 2.3), layout="constrained") as fig:
        ax = fig.add_subplot()
        feasible = [p for p in frontier.points if math.isfinite(p.cost)]
        ax.plot([p.throughput for p in feasible], [p.cost for p in feasible], color="C0",
                label=f"least cost ({frontier.method})")  # fmt: skip
        labelled: set[bool] = set()
        for change in frontier.changes:
            path = bool(change.to_dict()["path_changes"])
            ax.axvline(
                change.high.throughput,
                color="C3" if path else "C2",
                linestyle=":" if path else "--",
                linewidth=0.8,
                label=None if path in labelled else ("path changes" if path else
                                                     "partition changes"),
            )  # fmt: skip
            labelled.add(path)
        ax.set_xlabel("target throughput (inferences/s)")
        ax.set_ylabel("cost of added capacity")
        if title:
            ax.set_title(title)
        fig.legend(loc="outside lower center", ncols=3, frameon=False)
