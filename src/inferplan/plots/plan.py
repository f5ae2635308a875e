"""A picture of a provisioning plan: the network, the chosen path, the blocks each node runs
and the capacity bought."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import networkx as nx

from inferplan.codesign.plan import Plan
from inferplan.network.network import Network
from inferplan.plots._mpl import BELOW_NODE, BESIDE_NODE, beside_arrow, place_clear, styled_figure
from inferplan.units import si

__all__ = ["layered_positions", "plot_plan"]

_PATH, _IDLE, _BOUGHT, _SLOW = "#1f77b4", "#b0b0b0", "#c0392b", "#e67e22"


def layered_positions(network: Network) -> dict[str, tuple[float, float]]:
    """Node positions: columns by depth (longest path from a node without predecessors), rows
    in file order. A node other than the source without predecessors sits one column before
    its first successor, so dead-end branches line up with their tier.

    A network with a cycle falls back to a seeded spring layout.
    """
    graph = network.graph
    if not nx.is_directed_acyclic_graph(graph):
        layout = nx.spring_layout(graph, seed=0)
        return {v: (float(x), float(y)) for v, (x, y) in layout.items()}
    order = list(nx.topological_sort(graph))
    depth: dict[str, int] = {}
    for v in order:
        depth[v] = max((depth[u] + 1 for u in graph.predecessors(v)), default=0)
    for v in reversed(order):
        if v != network.source and graph.in_degree(v) == 0 and graph.out_degree(v) > 0:
            depth[v] = max(0, min(depth[w] for w in graph.successors(v)) - 1)
    file_order = {node.id: k for k, node in enumerate(network.nodes)}
    columns: dict[int, list[str]] = {}
    for v in sorted(depth, key=file_order.__getitem__):
        columns.setdefault(depth[v], []).append(v)
    pos = {}
    for column, members in columns.items():
        for row, v in enumerate(members):
            pos[v] = (float(column), (len(members) - 1) / 2 - row)
    return pos


def plot_plan(
    network: Network,
    plan: Plan,
    paths: str | Path | Sequence[str | Path],
    *,
    title: str | None = None,
    block_names: Sequence[str] | None = None,
) -> None:
    """Draw ``plan`` on ``network`` and save it to ``paths`` (format by suffix).

    The path is drawn thick and blue; beside each of its nodes, the blocks it runs (by number,
    and by name from ``block_names``, the profile's, when given, else from the plan's own
    ``layers``; a plan cut at ideals of a layer graph by its layers' names); compute and
    bandwidth bought in red beside their node or on their arrow; the bottleneck stage in
    orange (its ring or its arrow) and named. Labels are placed where they cross no line and
    no other label.

    Examples
    --------
    >>> import tempfile, pathlib, inferplan
    >>> net = inferplan.tiered(seed=1)
    >>> plan = inferplan.provision(net, inferplan.vgg16(), throughput=30.0)
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "plan.png"
    >>> plot_plan(net, plan, out, block_names=inferplan.vgg16().blocks)
    >>> out.read_bytes()[:4] == b"\\x89PNG"
    True
    """
    targets = [paths] if isinstance(paths, str | Path) else list(paths)
    pos = layered_positions(network)
    on_path = set(zip(plan.path[:-1], plan.path[1:], strict=True))
    bought_links = {(u.source, u.target): u.amount for u in plan.link_upgrades}
    slowest = plan.bottleneck.id if plan.bottleneck else None
    blocks = _runs(plan, block_names)
    columns = 1 + max(x for x, _ in pos.values())
    rows = 1 + max(y for _, y in pos.values()) - min(y for _, y in pos.values())
    size = (max(4.0, 1.5 * columns + 1), max(2.5, 1.1 * rows + 1.2))
    labels = []
    with styled_figure(targets, figsize=size, layout="constrained") as fig:
        ax = fig.subplots()
        for link in network.links:
            name = f"{link.source}->{link.target}"
            chosen = (link.source, link.target) in on_path
            colour = _SLOW if name == slowest else _PATH if chosen else _IDLE
            ax.annotate("", xy=pos[link.target], xytext=pos[link.source], zorder=1,
                        arrowprops={"arrowstyle": "-|>", "color": colour,
                                    "lw": 2.2 if chosen else 0.8, "shrinkA": 11, "shrinkB": 11,
                                    "mutation_scale": 10})  # fmt: skip
            lines = []
            amount = bought_links.get((link.source, link.target))
            if amount:
                lines.append(f"+{si(amount, 'bit/s')}")
            if name == slowest:
                lines.append("bottleneck")
            if lines:
                (x0, y0), (x1, y1) = pos[link.source], pos[link.target]
                label = ax.annotate("\n".join(lines), xy=((x0 + x1) / 2, (y0 + y1) / 2),
                                    xytext=(0, 0), textcoords="offset points", ha="center",
                                    va="center", fontsize=6.5, zorder=3,
                                    color=_BOUGHT if amount else _SLOW)  # fmt: skip
                labels.append((label, beside_arrow(x1 - x0, y1 - y0)))
        for node in network.nodes:
            x, y = pos[node.id]
            chosen = node.id in blocks
            ring = _SLOW if node.id == slowest else _PATH if chosen else _IDLE
            ax.scatter([x], [y], s=420, color=_PATH if chosen else "white", zorder=2,
                       edgecolors=ring, linewidths=2.4 if node.id == slowest else 1.2)  # fmt: skip
            ax.text(x, y, node.id, ha="center", va="center", zorder=4, fontsize=7,
                    color="white" if chosen else "0.3", fontweight="bold")  # fmt: skip
            amount = plan.node_upgrades.get(node.id)
            for text, colour, places in (
                (blocks.get(node.id), _PATH, BESIDE_NODE),
                (amount and f"+{si(amount, 'FLOP/s')}", _BOUGHT, BELOW_NODE),
                (node.id == slowest and "bottleneck", _SLOW, BELOW_NODE),
            ):  # fmt: skip
                if text:
                    label = ax.annotate(text, xy=(x, y), xytext=places[0],
                                        textcoords="offset points", ha="center", va="center",
                                        fontsize=6.5, color=colour, zorder=3)  # fmt: skip
                    labels.append((label, places))
        ax.set_xlim(-0.5, columns - 0.5)
        ys = [y for _, y in pos.values()]
        ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
        ax.set_axis_off()
        ax.set_title(
            title
            or f"{plan.method.upper()}: cost {plan.cost:.4g}, interval {si(plan.interval, 's')} "
            f"(target {si(plan.target_interval, 's')})"
        )
        place_clear(fig, labels)


def _runs(plan: Plan, block_names: Sequence[str] | None, shown: int = 3) -> dict[str, str]:
    """What each path node runs, as the label beside it."""
    out: dict[str, str] = {}
    previous = 0
    for k, (node_id, done) in enumerate(zip(plan.path, plan.cut_indices, strict=True)):
        names = tuple(plan.layers[k]) if plan.layers else ()
        if plan.cuts == "chain" and block_names:
            names = tuple(block_names[previous:done])
        if not names and done == previous:
            out[node_id] = "forwards"
        elif plan.cuts == "graph":
            more = f" +{len(names) - shown}" if len(names) > shown else ""
            out[node_id] = ", ".join(names[:shown]) + more
        elif done == previous + 1:
            out[node_id] = f"block {done}" + (f"\n{names[0]}" if names else "")
        else:
            out[node_id] = f"blocks {previous + 1}–{done}" + (
                f"\n{names[0]} … {names[-1]}" if names else ""
            )
        previous = done
    return out
