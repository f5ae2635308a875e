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
    suffix), marking where the optimal path (red) or partition (green) changes.

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
        for k, change in enumerate(frontier.changes):
            ax.axvline(
                change.high.throughput,
                color="C3" if change.to_dict()["path_changes"] else "C2",
                linestyle=":",
                linewidth=0.8,
                label=None if k else "deployment changes (red: path, green: partition)",
            )
        ax.set_xlabel("target throughput (inferences/s)")
        ax.set_ylabel("cost of added capacity")
        if title:
            ax.set_title(title)
        ax.legend(loc="upper left")
