"""A picture of a joint plan: every service's path on the network in one figure, with the
capacity bought."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inferplan.codesign.services.joint import ServicesPlan
from inferplan.network.network import Network
from inferplan.plots._mpl import BELOW_NODE, beside_arrow, place_clear, styled_figure
from inferplan.plots.plan import layered_positions
from inferplan.units import si

__all__ = ["plot_services", "plot_services_study"]

_IDLE, _BOUGHT = "#b0b0b0", "#c0392b"
# matplotlib's tab10 without its red (the colour of what is bought) and grey (idle links)
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")


def plot_services(
    network: Network,
    plan: ServicesPlan,
    paths: str | Path | Sequence[str | Path],
    *,
    title: str | None = None,
) -> None:
    """Draw every service's path of ``plan`` on ``network`` (one colour each, side by side
    where they share a link) and save it to ``paths`` (format by suffix). Compute and
    bandwidth bought are written in red next to the node or link.

    Examples
    --------
    >>> import tempfile, pathlib, inferplan
    >>> from inferplan.codesign.services.joint import Service, provision_services
    >>> net = inferplan.tiered(seed=1)
    >>> plan = provision_services(net, [Service("a", inferplan.vgg16(), "s", "t", 0.2),
    ...                                 Service("b", inferplan.alexnet(), "s", "t", 0.05)])
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "services.png"
    >>> plot_services(net, plan, out)
    >>> out.read_bytes()[:4] == b"\\x89PNG"
    True
    """
    targets = [paths] if isinstance(paths, str | Path) else list(paths)
    pos = layered_positions(network)
    columns = 1 + max(x for x, _ in pos.values())
    ys = [y for _, y in pos.values()]
    size = (max(4.5, 1.5 * columns + 2), max(2.8, 1.1 * (max(ys) - min(ys) + 1) + 1.2))
    count = len(plan.services)
    with styled_figure(targets, figsize=size, layout="constrained") as fig:
        ax = fig.subplots()
        for link in network.links:
            (x0, y0), (x1, y1) = pos[link.source], pos[link.target]
            ax.annotate("", xy=(x1, y1), xytext=(x0, y0), zorder=1,
                        arrowprops={"arrowstyle": "-", "color": _IDLE, "lw": 0.8,
                                    "shrinkA": 11, "shrinkB": 11})  # fmt: skip
        for k, service in enumerate(plan.services):
            colour = _COLOURS[k % len(_COLOURS)]
            offset = 0.06 * (k - (count - 1) / 2)  # side by side on shared links
            for u, v in zip(service.path[:-1], service.path[1:], strict=True):
                (x0, y0), (x1, y1) = pos[u], pos[v]
                ax.annotate("", xy=(x1, y1 + offset), xytext=(x0, y0 + offset), zorder=2,
                            arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 1.8,
                                        "shrinkA": 11, "shrinkB": 11,
                                        "mutation_scale": 9})  # fmt: skip
            ax.plot([], [], color=colour, lw=1.8, label=service.name)
        labels = []  # beside the arrows they name, clear of every line (place_clear)
        for (u, v), amount in plan.link_upgrades.items():
            (x0, y0), (x1, y1) = pos[u], pos[v]
            label = ax.annotate(f"+{si(amount, 'bit/s')}", xy=((x0 + x1) / 2, (y0 + y1) / 2),
                                xytext=(0, 0), textcoords="offset points", color=_BOUGHT,
                                ha="center", va="center", fontsize=6.5, zorder=4)  # fmt: skip
            labels.append((label, _beside_bundle(x1 - x0, y1 - y0, count)))
        used = {v for s in plan.services for v in s.path}
        for node in network.nodes:
            x, y = pos[node.id]
            ax.scatter([x], [y], s=420, color="white", zorder=3,
                       edgecolors="0.2" if node.id in used else _IDLE, linewidths=1.2)  # fmt: skip
            ax.text(x, y, node.id, ha="center", va="center", zorder=5, fontsize=7, color="0.2")
            added = plan.node_upgrades.get(node.id, 0.0)
            if added > 0:
                label = ax.annotate(f"+{si(added, 'FLOP/s')}", xy=(x, y), xytext=BELOW_NODE[0],
                                    textcoords="offset points", ha="center", va="center",
                                    fontsize=6.5, color=_BOUGHT, zorder=4)  # fmt: skip
                labels.append((label, BELOW_NODE))
        ax.set_xlim(-0.5, columns - 0.5)
        ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
        ax.set_axis_off()
        ax.legend(loc="upper left", fontsize=7, frameon=False)
        ax.set_title(
            title
            or f"{len(plan.services)} services, {plan.method}: cost {plan.cost:.4g} "
            f"({plan.status}, gap {plan.gap:.2%})"
        )
        place_clear(fig, labels)


def _beside_bundle(dx: float, dy: float, count: int) -> list[tuple[float, float]]:
    """Offsets (points) from a link's middle to either side of the bundle of ``count``
    services' arrows drawn side by side along it, nearest first."""
    return [(x * (1 + count / 2), y * (1 + count / 2)) for x, y in beside_arrow(dx, dy)]


def plot_services_study(
    rows: Sequence[Mapping[str, Any]], paths: str | Path | Sequence[str | Path]
) -> None:
    """The services study's figure (rows of ``inferplan sweep`` with ``study: services``):
    left, the saving of the joint plan over planning each service alone against the number of
    services, one line per ``alpha`` (median, with the least and most as a band); right, the
    fast planner's true gap ``(cost - optimum) / cost`` against the gap it states
    ``(cost - bound) / cost``, per point: never above the diagonal."""
    targets = [paths] if isinstance(paths, str | Path) else list(paths)
    solved = [r for r in rows if r.get("joint_status") not in (None, "", "infeasible")]
    alphas = sorted({float(r["alpha"]) for r in solved})
    with styled_figure(targets, figsize=(9.0, 3.6), layout="constrained") as fig:
        left, right = fig.subplots(1, 2)
        for k, alpha in enumerate(alphas):
            colour = _COLOURS[k % len(_COLOURS)]
            counts = sorted({int(r["services"]) for r in solved if float(r["alpha"]) == alpha})
            per = [[100 * float(r["saving"]) for r in solved
                    if float(r["alpha"]) == alpha and int(r["services"]) == n]
                   for n in counts]  # fmt: skip
            left.plot(counts, [statistics.median(v) for v in per], "o-", color=colour,
                      label=f"alpha = {alpha:g}")  # fmt: skip
            left.fill_between(counts, [min(v) for v in per], [max(v) for v in per],
                              color=colour, alpha=0.15, linewidth=0)  # fmt: skip
            fast = [r for r in solved if float(r["alpha"]) == alpha
                    and r.get("fast_status") not in (None, "", "infeasible")]  # fmt: skip
            right.scatter([100 * float(r["fast_gap"]) for r in fast],
                          [100 * _true_gap(r) for r in fast], s=12, color=colour,
                          label=f"alpha = {alpha:g}")  # fmt: skip
        left.set_xlabel("services sharing the network")
        left.set_ylabel("joint saving over each alone (%)")
        left.set_xticks(sorted({int(r["services"]) for r in solved}))
        right.set_xlabel("fast planner: stated gap (%)")
        right.set_ylabel("fast planner: true gap (%)")
        right.axline((0, 0), slope=1, color=_IDLE, lw=0.8)
        # one legend for both panels, below them: clear of the bands and the points
        fig.legend(*left.get_legend_handles_labels(), loc="outside lower center",
                   ncols=max(1, len(alphas)), fontsize=7, frameon=False)  # fmt: skip


def _true_gap(row: Mapping[str, Any]) -> float:
    """``(fast cost - optimum) / fast cost`` of a study row."""
    fast = float(row["fast_cost"])
    return 1.0 - float(row["joint_cost"]) / fast if fast > 0 else 0.0
