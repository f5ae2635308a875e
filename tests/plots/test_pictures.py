"""The two pictures: a profile's work and output size, and the state graph of a small instance,
checked as pictures (labels, ticks, the path drawn, legends off the data)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import inferplan
from inferplan.errors import InvalidArgument
from inferplan.plots import pictures
from tests.cli import app, runner

NETWORK = Path(__file__).parents[2] / "examples" / "network.json"


def _drawn(draw, *args):
    """Draw into a kept figure and return it laid out (the house style saves and drops it)."""
    kept: list[Figure] = []
    original = Figure.savefig

    def keep(self, *a, **k):
        kept.append(self)
        return original(self, *a, **k)

    Figure.savefig = keep
    try:
        draw(*args)
    finally:
        Figure.savefig = original
    canvas = FigureCanvasAgg(kept[0])
    canvas.draw()
    return kept[0], canvas.get_renderer()


def test_profile_picture_has_both_axes_every_block_and_a_legend_off_the_data(tmp_path):
    profile = inferplan.load_profile("alexnet")
    fig, renderer = _drawn(pictures.plot_profile, profile, tmp_path / "p.png")
    left, right = fig.axes
    assert left.get_ylabel() == "work per block (GFLOP)"
    assert right.get_ylabel() == "output size (MB)"
    assert [t.get_text() for t in left.get_xticklabels()] == ["input", *profile.blocks]
    heights = [bar.get_height() for bar in left.patches]
    assert heights == pytest.approx([f / 1e9 for f in profile.flops])
    (line,) = right.get_lines()
    assert list(line.get_ydata()) == pytest.approx([b / 8e6 for b in profile.activation_bits])
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    assert not box.overlaps(left.get_window_extent(renderer))


def test_state_graph_draws_every_transition_and_the_plan_path(tmp_path):
    net = inferplan.load_network(NETWORK)
    profile = inferplan.load_profile("alexnet")
    plan = inferplan.provision(net, profile, throughput=30.0)
    fig, _ = _drawn(pictures.plot_state_graph, net, profile, plan, tmp_path / "s.png")
    (ax,) = fig.axes
    n = profile.n_blocks
    cuts = n + 1
    grey = [line for line in ax.get_lines() if line.get_linewidth() < 1]
    assert len(grey) == len(net.links) * cuts * (cuts + 1) // 2 + cuts
    arrows = [a for a in ax.texts if a.arrow_patch is not None]
    assert len(arrows) == len(plan.path)  # one step per node of the path, the last to the end
    labels = [t.get_text() for t in ax.texts if t.get_text()]
    assert labels[-1] == f"{plan.path[-1]}: {plan.partition[-2] + 1}..{n}"
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks[0] == net.source and ticks[-1] == net.target
    assert ax.get_xlabel().startswith("blocks done, i")


def test_state_graph_of_a_large_instance_is_refused_in_one_line(tmp_path):
    net = inferplan.load_network(NETWORK)
    with pytest.raises(InvalidArgument, match="too many to draw legibly"):
        pictures.check_drawable(net, inferplan.load_profile("vgg16"))
    out = tmp_path / "states.png"
    result = runner.invoke(app, ["provision", str(NETWORK), "vgg16", "--throughput", "30",
                                 "--plot-states", str(out)])  # fmt: skip
    assert result.exit_code == 2 and not out.exists()
    assert result.stderr.startswith("error: --plot-states: the state graph of 5 nodes")
    assert result.stderr.count("\n") == 1


def test_the_commands_write_both_pictures(tmp_path):
    states, work = tmp_path / "states.svg", tmp_path / "alexnet.pdf"
    result = runner.invoke(app, ["provision", str(NETWORK), "alexnet", "--throughput", "30",
                                 "--plot-states", str(states)])  # fmt: skip
    assert result.exit_code == 0 and states.read_text().startswith("<?xml")
    result = runner.invoke(app, ["profile", "alexnet", "--plot", str(work)])
    assert result.exit_code == 0 and work.read_bytes()[:4] == b"%PDF"


def _ideals(graph):
    """Every down-closed set of the graph's layers, by brute force over all subsets."""
    reads = {v: {u for u, w in graph.edges if w == v and u != "input"} for v in graph.layers}
    found = []
    for size in range(len(graph.layers) + 1):
        for chosen in itertools.combinations(graph.layers, size):
            if all(reads[v] <= set(chosen) for v in chosen):
                found.append(frozenset(chosen))
    return found


def test_state_graph_of_a_plan_cut_at_ideals_has_a_column_per_ideal(tmp_path):
    net = inferplan.load_network(NETWORK)
    profile = inferplan.load_profile(str(NETWORK.parent / "two-branch.yaml"))
    plan = inferplan.provision(net, profile, throughput=20)
    assert plan.cuts == "graph"
    fig, _ = _drawn(pictures.plot_state_graph, net, profile, plan, tmp_path / "s.png")
    (ax,) = fig.axes
    ideals = _ideals(profile.graph)
    pairs = sum(1 for a in ideals for b in ideals if a <= b)
    grey = [line for line in ax.get_lines() if line.get_linewidth() < 1]
    assert len(grey) == len(net.links) * pairs + len(ideals)
    assert len(ax.get_xticklabels()) == len(ideals) + 1  # and the end
    labels = [t.get_text() for t in ax.texts if t.get_text()]
    runs = [(v, names) for v, names in zip(plan.path, plan.layers, strict=True)]
    want = [f"{v}: {', '.join(names) if len(names) <= 2 else ', '.join(names[:2]) + ', ...'}"
            if names else f"{v}: forward" for v, names in runs]  # fmt: skip
    assert [t.split(" (")[0] for t in labels] == want
    assert ax.get_xlabel().startswith("layers done, J")


def test_state_graph_of_too_many_ideals_is_refused_before_they_are_all_enumerated():
    net = inferplan.load_network(NETWORK)
    layers = [f"b{k}l{j}" for k in range(4) for j in range(6)]  # 4 branches of 6: 7**4 ideals
    graph = {"layers": [{"id": v, "flops": 1e9, "output_bits": 1e6} for v in layers],
             "edges": [["input", f"b{k}l0"] for k in range(4)]
             + [[f"b{k}l{j}", f"b{k}l{j + 1}"] for k in range(4) for j in range(5)]}  # fmt: skip
    from inferplan.profiles.io import profile_from_dict

    wide = profile_from_dict({"name": "wide", "input_bits": 1e6, "graph": graph})
    with pytest.raises(InvalidArgument, match="more than 600 transitions, too many"):
        pictures.check_drawable(net, wide, "graph")
