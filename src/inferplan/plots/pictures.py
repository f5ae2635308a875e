"""Two explanatory pictures: a profile's per-block work and output size, and the state graph
``(v, i)`` of a small co-design instance with the optimal state path (``(v, J)`` for the ideals
``J`` of a layer graph, when the plan cuts at them)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from inferplan.codesign.plan import Plan
from inferplan.errors import InvalidArgument
from inferplan.network.network import Network
from inferplan.plots._mpl import beside_arrow, place_clear, styled_figure
from inferplan.plots.plan import layered_positions
from inferplan.profiles import Profile
from inferplan.profiles.ideals import CutKind, Cuts, count_ideals, cuts_of
from inferplan.units import listed

__all__ = [
    "MAX_STATE_NODES",
    "MAX_TRANSITIONS",
    "check_drawable",
    "plot_profile",
    "plot_state_graph",
    "state_graph_size",
]

MAX_STATE_NODES = 8
"""The most network nodes :func:`plot_state_graph` draws (one row each)."""
MAX_TRANSITIONS = 600
"""The most transitions it draws: beyond, the lines merge into a grey area."""

_WORK, _DATA, _PATH, _EDGE = "#4c72b0", "#dd8452", "#c0392b", "#9a9a9a"
_PATH_Z, _LABEL_Z = 4, 5  # the plan's path above the grey transitions, its labels above it


def _targets(paths: str | Path | Sequence[str | Path]) -> list[str | Path]:
    return [paths] if isinstance(paths, str | Path) else list(paths)


def plot_profile(profile: Profile, paths: str | Path | Sequence[str | Path]) -> None:
    """Per-block work (bars, left axis) and the size of each block's output (line, right axis),
    as co-inference papers draw AlexNet; the input's size is the first point of the line.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from inferplan.profiles import load_profile
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "alexnet.png"
    >>> plot_profile(load_profile("alexnet"), out)
    >>> out.read_bytes()[:4] == b"\\x89PNG"
    True
    """
    n = profile.n_blocks
    width = max(3.4, 0.32 * (n + 1) + 1.2)
    with styled_figure(_targets(paths), figsize=(width, 2.6), layout="constrained") as fig:
        ax = fig.subplots()
        xs = list(range(1, n + 1))
        bars = ax.bar(xs, [f / 1e9 for f in profile.flops], color=_WORK, width=0.6,
                      label="work (GFLOP)")  # fmt: skip
        ax.set_ylabel("work per block (GFLOP)", color=_WORK)
        ax.set_xticks([0, *xs], ["input", *profile.blocks], rotation=45, ha="right")
        ax.set_xlim(-0.6, n + 0.6)
        right = ax.twinx()
        sizes = [b / 8e6 for b in profile.activation_bits]
        (line,) = right.plot([0, *xs], sizes, color=_DATA, marker="o", markersize=3,
                             linewidth=1.0, label="output size (MB)")  # fmt: skip
        right.set_ylabel("output size (MB)", color=_DATA)
        right.set_ylim(0, max(sizes) * 1.08 or 1.0)
        right.spines["right"].set_visible(True)
        ax.set_ylim(0, max(profile.flops) / 1e9 * 1.08 or 1.0)
        ax.set_title(f"{profile.name}: {n} blocks")
        fig.legend([bars, line], [bars.get_label(), line.get_label()], loc="outside upper right",
                   ncols=2, frameon=False)  # fmt: skip


def _rows(network: Network) -> list[str]:
    """Nodes ordered by their column in the plan picture, then top to bottom."""
    pos = layered_positions(network)
    return sorted(pos, key=lambda v: (pos[v][0], -pos[v][1]))


def state_graph_size(network: Network, profile: Profile, cuts: Cuts | None = None
                     ) -> tuple[int, int]:  # fmt: skip
    """``(nodes, transitions)`` of the state graph: a transition per link and pair of cuts
    ``i <= j`` (``I ⊆ J`` for ideals of a layer graph), and one from each ``(t, j)`` to the
    terminal; ``cuts`` are the profile's blocks' (a chain) unless given."""
    if cuts is None or cuts.is_chain:
        k = profile.n_blocks + 1 if cuts is None else cuts.n_cuts
        return len(network.nodes), len(network.links) * (k * (k + 1) // 2) + k
    pairs = int(np.count_nonzero(cuts.subset))
    return len(network.nodes), len(network.links) * pairs + cuts.n_cuts


def check_drawable(
    network: Network,
    profile: Profile,
    cuts: CutKind | None = "chain",
    *,
    max_ideals: int | None = None,
) -> int:
    """The number of transitions of the state graph, if it is small enough to draw; ``cuts``
    and ``max_ideals`` as the planners take them (``None``: the planners' default).

    Raises
    ------
    InvalidArgument
        Naming ``plot_states``, when the instance has more than :data:`MAX_STATE_NODES` nodes or
        :data:`MAX_TRANSITIONS` transitions.
    """
    found = _cuts(profile, cuts, max_ideals)
    nodes = len(network.nodes)
    # more cuts than transitions allowed: each has at least its own transition to the terminal
    transitions = MAX_TRANSITIONS + 1 if found is None else state_graph_size(
        network, profile, found)[1]  # fmt: skip
    if nodes > MAX_STATE_NODES or transitions > MAX_TRANSITIONS:
        many = (f"more than {MAX_TRANSITIONS}" if found is None
                else f"{found.n_cuts} cuts has {transitions}")  # fmt: skip
        raise InvalidArgument(
            f"the state graph of {nodes} nodes and {many} transitions, too many to draw "
            f"legibly (at most {MAX_STATE_NODES} nodes and {MAX_TRANSITIONS} transitions); "
            "draw the plan with --plot instead",
            field="plot_states",
        )
    return transitions


def _cuts(profile: Profile, cuts: CutKind | None, max_ideals: int | None) -> Cuts | None:
    """The cuts the planners search, ``None`` where a layer graph has more ideals than could
    be drawn."""
    if cuts == "chain" or profile.graph is None:
        return cuts_of(profile, cuts)
    limit = MAX_TRANSITIONS if max_ideals is None else min(max_ideals, MAX_TRANSITIONS)
    if count_ideals(profile.graph, limit) is None:
        if cuts is None and cuts_of(profile, None, max_ideals=max_ideals).kind == "chain":
            return cuts_of(profile, "chain")  # the planners fall back on the blocks
        return None
    return cuts_of(profile, cuts, max_ideals=max_ideals)


def plot_state_graph(
    network: Network,
    profile: Profile,
    plan: Plan,
    paths: str | Path | Sequence[str | Path],
) -> None:
    """The state graph ``(v, i)`` of PSG: a row per node, a column per cut ``i = 0..N``, a grey
    line per transition ``((v, i), (z, j))`` (link ``(v, z)``, ``j >= i``: blocks ``i+1..j``
    run on ``v``) and from every ``(t, j)`` to the terminal; the plan's state path drawn thick,
    each step labelled with the blocks it runs. For a plan cut at ideals of a layer graph the
    columns are its ideals ``J`` (numbered by size: ``0`` holds no layer, the last every
    layer), a transition runs ``J \\ I`` for ``I ⊆ J``, and each step of the path is labelled
    with the names of the layers it runs.

    Raises
    ------
    InvalidArgument
        As :func:`check_drawable`, for an instance too large to draw legibly.

    Examples
    --------
    >>> import tempfile, pathlib, inferplan
    >>> net = inferplan.load_network("examples/network.json")
    >>> alexnet = inferplan.load_profile("alexnet")
    >>> plan = inferplan.provision(net, alexnet, throughput=30.0)
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "states.png"
    >>> plot_state_graph(net, alexnet, plan, out)
    >>> out.read_bytes()[:4] == b"\\x89PNG"
    True
    """
    transitions = check_drawable(network, profile, plan.cuts)
    cuts = cuts_of(profile, plan.cuts)
    graph = plan.cuts == "graph"
    pairs = [(int(i), int(j)) for i, j in zip(*np.nonzero(cuts.subset), strict=True)]
    rows = _rows(network)
    y = {v: float(len(rows) - 1 - k) for k, v in enumerate(rows)}
    n = cuts.last
    terminal = (n + 1.0, y[network.target])
    with styled_figure(_targets(paths), figsize=(max(3.4, 0.55 * (n + 3)), 0.5 * len(rows) + 1.4),
                       layout="constrained") as fig:  # fmt: skip
        ax = fig.subplots()
        for link in network.links:
            for i, j in pairs:
                ax.plot([i, j], [y[link.source], y[link.target]], color=_EDGE,
                        linewidth=0.3, alpha=0.35, zorder=1)  # fmt: skip
        for j in range(n + 1):
            ax.plot([j, terminal[0]], [y[network.target], terminal[1]], color=_EDGE,
                    linewidth=0.3, alpha=0.35, linestyle=":", zorder=1)  # fmt: skip
        for v in rows:
            ax.scatter(range(n + 1), [y[v]] * (n + 1), s=9, color="black", zorder=3)
        ax.scatter([terminal[0]], [terminal[1]], s=24, marker="s", color="black", zorder=3)
        # The plan's state path: (p_0, 0) -> (p_1, k_0) -> ... -> (p_L, k_{L-1}) -> terminal.
        states = [(0, plan.path[0])] + [
            (done, node) for node, done in zip(plan.path[1:], plan.cut_indices[:-1], strict=True)
        ]
        points = [(float(i), y[v]) for i, v in states] + [terminal]
        ends = [*(i for i, _ in states[1:]), n]
        arrow = {"arrowstyle": "-|>", "color": _PATH, "linewidth": 1.6}
        labels = []  # beside their steps, clear of the path and each other (place_clear)
        for (a, b), (i, v), j in zip(itertools.pairwise(points), states, ends, strict=True):
            ax.annotate("", xy=b, xytext=a, zorder=_PATH_Z, arrowprops=arrow)
            if graph:
                text = f"{v}: {listed(cuts.units_between(i, j), shown=2) or 'forward'}"
            else:
                text = {0: f"{v}: forward", 1: f"{v}: block {j}"}.get(j - i, f"{v}: {i + 1}..{j}")
            # on an opaque box above the grey transitions, which it hides where it sits
            label = ax.annotate(
                text,
                xy=((a[0] + b[0]) / 2, (a[1] + b[1]) / 2),
                xytext=(0, 0),
                textcoords="offset points",
                ha="center",
                va="center",
                fontsize=6,
                color=_PATH,
                zorder=_LABEL_Z,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.6},
            )
            labels.append((label, beside_arrow(b[0] - a[0], b[1] - a[1])))
        ax.set_yticks([y[v] for v in rows], rows)
        ax.set_xticks([*range(n + 1), terminal[0]], [*map(str, range(n + 1)), "end"])
        ax.set_xlim(-0.5, n + 1.5)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_xlabel("layers done, J (an ideal of the layer graph, numbered by size)" if graph
                      else "blocks done, i (the activation after block i has arrived at the "
                      "node)")  # fmt: skip
        ax.set_ylabel("node v")
        ax.set_title(f"state graph (v, {'J' if graph else 'i'}) of {profile.name}: "
                     f"{transitions} transitions, the plan's path in red")  # fmt: skip
        place_clear(fig, labels, above=_PATH_Z)
