"""Figures checked as pictures: no text box crosses a drawn line or arrow or another text box
(from the artists' extents once drawn), and every legend entry looks different from the
others."""

from __future__ import annotations

import itertools

import matplotlib
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch
from matplotlib.text import Text

import inferplan
from inferplan.codesign import compile_instance, cost_frontier, latency_frontier, throughput_optimal
from inferplan.codesign.services.joint import Service, provision_services
from inferplan.plots import plot_frontier, plot_plan, plot_services
from inferplan.plots.latency import plot_latency_study
from inferplan.plots.services import plot_services_study
from inferplan.plots.sweeps import plot_sweep_summary

matplotlib.use("Agg")


@pytest.fixture
def drawn(monkeypatch):
    """The figures saved while the test runs, drawn."""
    figures: list[Figure] = []
    save = Figure.savefig

    def keep(self, *args, **kwargs):
        figures.append(self)
        return save(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return figures


def _segments(fig):
    """Every straight piece of every line and arrow, in pixels, with whether it is faint
    background (translucent) and its artist's z-order."""
    out = []
    for ax in fig.axes:
        for artist in [*ax.lines, *ax.patches, *ax.texts]:
            if isinstance(artist, Line2D):
                pieces = [artist.get_transform().transform(artist.get_xydata())]
            elif isinstance(artist, FancyArrowPatch):
                pieces = artist.get_path().to_polygons(closed_only=False)
            elif getattr(artist, "arrow_patch", None) is not None:
                pieces = artist.arrow_patch.get_path().to_polygons(closed_only=False)
            else:
                continue
            for points in pieces:
                alpha = artist.get_alpha()
                out += [(alpha is not None and alpha < 1, artist.get_zorder(), a, b)
                        for a, b in itertools.pairwise(np.asarray(points, dtype=float))
                        if np.isfinite(a).all() and np.isfinite(b).all()]  # fmt: skip
    return out


def _crosses(box, a, b) -> bool:
    steps = int(max(abs(b - a))) + 2
    for t in np.linspace(0, 1, steps):
        x, y = a + t * (b - a)
        if box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1:
            return True
    return False


def _hides(text: Text) -> float:
    """The z-order below which ``text`` hides what it sits on (its box opaque), or -inf."""
    patch = text.get_bbox_patch()
    if patch is None or not patch.get_fill() or to_rgba(patch.get_facecolor())[3] < 1:
        return -np.inf
    return text.get_zorder()


def problems(fig: Figure) -> list[str]:
    """What a reader would trip over: text boxes (legends as one box) crossing a line or each
    other. A text on an opaque box may hide the faint (translucent) background lines drawn
    below it, never a solid line."""
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    legends = [a for a in fig.findobj(Legend)]
    inside = {id(t) for legend in legends for t in legend.findobj(Text)}
    ticks = {id(t) for ax in fig.axes for t in [*ax.get_xticklabels(), *ax.get_yticklabels()]}
    boxes = [(f"text {t.get_text()!r}", t.get_window_extent(renderer), _hides(t))
             for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
             and id(t) not in inside and id(t) not in ticks]  # fmt: skip
    boxes += [(f"legend {[t.get_text() for t in lg.get_texts()]}", lg.get_window_extent(renderer),
               -np.inf) for lg in legends]  # fmt: skip
    found = []
    segments = _segments(fig)
    for name, box, hidden in boxes:
        if any(_crosses(box, a, b) for faint, z, a, b in segments if not faint or z >= hidden):
            found.append(f"{name} crosses a line")
    for (n1, b1, _), (n2, b2, _) in itertools.combinations(boxes, 2):
        if b1.overlaps(b2):
            found.append(f"{n1} overlaps {n2}")
    return found


def _look(handle) -> tuple:
    lines = getattr(handle, "lines", None)
    if lines:  # an errorbar's legend entry: its line
        handle = lines[0]
    if isinstance(handle, Line2D):
        return (to_rgba(handle.get_color()), handle.get_linestyle(), handle.get_marker())
    colours = [handle.get_edgecolor(), handle.get_facecolor()]  # a collection (scatter, ...)
    return tuple(tuple(map(tuple, np.atleast_2d(c))) for c in colours)


def indistinct_legend_entries(fig: Figure) -> list[str]:
    found = []
    for legend in fig.findobj(Legend):
        looks = [_look(h) for h in legend.legend_handles]
        names = [t.get_text() for t in legend.get_texts()]
        for (n1, l1), (n2, l2) in itertools.combinations(zip(names, looks, strict=True), 2):
            if l1 == l2:
                found.append(f"{n1!r} looks like {n2!r}")
    return found


def test_an_opaque_label_hides_faint_lines_below_it_not_solid_ones_nor_those_above():
    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([0, 1], [0.5, 0.5], color="0.6", alpha=0.35, zorder=1)
    ax.text(0.5, 0.5, "above", zorder=3, bbox={"facecolor": "white", "edgecolor": "none"})
    assert problems(fig) == []
    ax.plot([0.5, 0.5], [0, 1], color="0.6", alpha=0.35, zorder=4)
    assert problems(fig) == ["text 'above' crosses a line"]
    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([0, 1], [0.5, 0.5], color="C0", zorder=1)  # solid: a path, not background
    ax.text(0.5, 0.5, "on it", zorder=3, bbox={"facecolor": "white", "edgecolor": "none"})
    assert problems(fig) == ["text 'on it' crosses a line"]


def test_the_checks_see_a_label_on_a_line_and_two_entries_alike():
    fig = Figure()
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="C0", label="a")
    ax.plot([0, 1], [1, 0], color="C0", label="b")
    ax.text(0.5, 0.5, "on the line")
    ax.text(0.5, 0.52, "on the other text")
    ax.legend()
    found = problems(fig)
    assert "text 'on the line' crosses a line" in found
    assert "text 'on the line' overlaps text 'on the other text'" in found
    assert indistinct_legend_entries(fig) == ["'a' looks like 'b'"]


def test_the_frontier_keeps_its_legend_off_the_curve_with_one_entry_per_kind(drawn, tmp_path):
    inst = compile_instance(inferplan.load_network("examples/network.json"), inferplan.vgg16())
    front = cost_frontier(inst, points=41)
    kinds = {bool(c.to_dict()["path_changes"]) for c in front.changes}
    assert kinds == {True, False}  # both kinds of change are drawn here
    plot_frontier(front, tmp_path / "f.png", title="vgg16")
    (fig,) = drawn
    assert problems(fig) == [] and indistinct_legend_entries(fig) == []
    entries = [t.get_text() for lg in fig.findobj(Legend) for t in lg.get_texts()]
    assert entries == ["least cost (psg)", "partition changes", "path changes"]


def test_the_latency_frontier_shades_what_no_plan_reaches_clear_of_its_legend(drawn, tmp_path):
    data = inferplan.tiered(seed=2).to_dict()
    for link in data["links"]:
        link["delay_s"] = 0.004  # no plan below the four links' 16 ms
    inst = compile_instance(inferplan.network_from_dict(data), inferplan.vgg16())
    beta = 0.5 * throughput_optimal(inst).interval
    front = latency_frontier(inst, beta, latency_range=(0.01, 0.16), points=11)
    plot_frontier(front, tmp_path / "f.png", title="vgg16")
    (fig,) = drawn
    assert problems(fig) == [] and indistinct_legend_entries(fig) == []
    entries = [t.get_text() for lg in fig.findobj(Legend) for t in lg.get_texts()]
    assert sorted(entries) == ["infeasible", "least cost (psg)", "partition changes",
                               "path changes"]  # fmt: skip
    assert fig.axes[0].get_yscale() == "log"  # the cost rises steeply near 16 ms
    (ax,) = fig.axes
    (shade,) = ax.patches
    left, right = shade.get_x(), shade.get_x() + shade.get_width()
    edge = next(c for c in front.changes if not c.low.path)
    assert left == pytest.approx(10.0) and right == pytest.approx(edge.low.target_latency * 1e3)
    assert ax.get_xlabel().startswith("latency bound (ms)")


@pytest.mark.parametrize(("network", "throughput"), [
    ("examples/network.json", 30.0), (3, 8.0), (5, 20.0),
])  # fmt: skip
def test_plan_pictures_label_every_stage_clear_of_lines(drawn, tmp_path, network, throughput):
    net = (
        inferplan.load_network(network)
        if isinstance(network, str)
        else inferplan.tiered(seed=network)
    )
    vgg = inferplan.vgg16()
    plan = inferplan.provision(net, vgg, throughput=throughput)
    plot_plan(net, plan, tmp_path / "p.png", block_names=vgg.blocks)
    (fig,) = drawn
    assert problems(fig) == []
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sum("bottleneck" in t for t in texts) == 1  # the bottleneck, and only it, named
    first, last = plan.partition[-2] + 1, plan.partition[-1]
    if last > first:  # the last node's blocks, by number and by name
        assert f"blocks {first}–{last}\n{vgg.blocks[first - 1]} … {vgg.blocks[last - 1]}" in texts
    for up in plan.link_upgrades:
        assert any(t.startswith(f"+{inferplan.units.si(up.amount, 'bit/s')}") for t in texts)


def test_the_services_figures_keep_their_legends_off_bands_and_points(drawn, tmp_path):
    rows = [{"alpha": a, "services": n, "saving": 0.1 * n + a, "joint_status": "optimal",
             "fast_status": "heuristic", "fast_gap": 0.02 * n, "fast_cost": 1.0 + 0.01 * n,
             "joint_cost": 1.0}
            for a in (0.3, 0.6) for n in (2, 3, 4) for _ in range(3)]  # fmt: skip
    plot_services_study(rows, tmp_path / "s.png")
    net = inferplan.tiered(seed=1)
    plan = provision_services(net, [Service("a", inferplan.vgg16(), "s", "t", 0.2),
                                    Service("b", inferplan.alexnet(), "s", "t", 0.05)])  # fmt: skip
    plot_services(net, plan, tmp_path / "p.png")
    for fig in drawn:
        assert indistinct_legend_entries(fig) == []
        assert [p for p in problems(fig) if p.startswith("legend")] == []


def test_a_sweep_summary_figure_tells_its_groups_apart(drawn, tmp_path):
    rows = [{"parameter": "alpha", "kind": "number", "value": a, "group": g, "metric": "ratio",
             "median": m, "q25": m - 0.1, "q75": m + 0.1}
            for a in (0.3, 0.6) for g, m in (("pfp", 2.0), ("pwf", 2.0), ("psg", 1.0))]  # fmt: skip
    plot_sweep_summary(rows, tmp_path / "s.png")
    (fig,) = drawn
    assert indistinct_legend_entries(fig) == []
    assert [p for p in problems(fig) if p.startswith("legend")] == []


def test_the_latency_study_keeps_its_labels_and_legend_clear(drawn, tmp_path):
    from inferplan.experiments.latency import latency_point

    rows = [{**latency_point({"topology": t, "dnn": dnn, "alpha": alpha, "share": share}, t, {}),
             "topology": t, "dnn": dnn, "alpha": alpha, "share": share}
            for t in range(3) for dnn in ("vgg16", "resnet50") for alpha in (0.3, 0.6)
            for share in (0.5, 0.75)]  # fmt: skip
    plot_latency_study(rows, tmp_path / "latency.png")
    (fig,) = drawn
    assert problems(fig) == [] and indistinct_legend_entries(fig) == []
    entries = [t.get_text() for lg in fig.findobj(Legend) for t in lg.get_texts()]
    assert sorted(entries) == ["resnet50, alpha 0.3", "resnet50, alpha 0.6", "vgg16, alpha 0.3",
                               "vgg16, alpha 0.6"]  # fmt: skip


# --- sweep summaries: each parameter drawn as its kind -------------------------------------


def _sweep_figure(drawn, tmp_path, spec: str):
    """The summary figure ``inferplan sweep`` draws for ``spec`` (of the test point function
    ``draw``, whose metric is ``value``), each panel by its x label."""
    from tests.cli import app, runner

    path = tmp_path / "spec.yaml"
    path.write_text("study: tests.experiments.points:draw\nmetric: value\n" + spec)
    result = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out"), "-q",
                                 "-j", "1"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (fig,) = drawn
    FigureCanvasAgg(fig).draw()
    return {ax.get_xlabel(): ax for ax in fig.axes if ax.get_visible() and ax.axison}


def _trends(ax) -> list[Line2D]:
    """The lines that join two or more values of the axis."""
    return [
        line
        for line in ax.lines
        if line.get_linestyle() not in ("None", "", " ") and len(line.get_xdata()) > 1
    ]


def _number(text: str) -> bool:
    text = text.replace("−", "-").replace("$\\mathdefault{", "").replace("}$", "")
    text = text.replace("10^{", "1e").replace("}", "")
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_a_sweep_summary_draws_categories_as_bars_numbers_on_a_numeric_axis(drawn, tmp_path):
    panels = _sweep_figure(
        drawn,
        tmp_path,
        "replicates: [rep]\ngrid:\n  x: [1, 2, 8]\n"
        "  mode: [fast, slow, exact]\n  rep: {range: [0, 4]}\n",
    )
    assert set(panels) == {"x", "mode"}  # the replicate index is no axis
    categories = panels["mode"]
    assert [t.get_text() for t in categories.get_xticklabels()] == ["exact", "fast", "slow"]
    assert _trends(categories) == []  # no line over values that have no order
    assert len(categories.patches) == 3  # a bar per category
    numbers = panels["x"]
    assert numbers.get_xscale() == "linear"
    (line,) = _trends(numbers)
    assert list(line.get_xdata()) == [1.0, 2.0, 8.0]  # at the values, not at their indices
    # each value's spread is over the 3 modes x 4 replicates x 2 rows of the draw
    labels = [t.get_text() for t in numbers.get_xticklabels() if t.get_text()]
    assert labels and all(_number(t) for t in labels)


def test_a_sampled_sweeps_floats_are_on_a_numeric_axis_with_readable_ticks(drawn, tmp_path):
    panels = _sweep_figure(
        drawn,
        tmp_path,
        "sample:\n  size: 12\n  parameters:\n    x: {log_uniform: [1.0e9, 3.0e12]}\n",
    )
    assert set(panels) == {"x"}  # `sample`, the point's index, is a replicate
    ax = panels["x"]
    assert ax.get_xscale() == "log"  # the draws span three decades
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all(_number(t) and len(t) <= 24 for t in labels)
    (line,) = _trends(ax)
    xs = list(line.get_xdata())
    assert xs == sorted(xs) and len(xs) == 12 and min(xs) >= 1e9


def test_a_sweep_of_replicates_alone_shows_their_spread_not_a_trend(drawn, tmp_path):
    panels = _sweep_figure(
        drawn, tmp_path, "replicates: [rep]\ngrid:\n  x: [2]\n  rep: {range: [0, 6]}\n"
    )
    ((label, ax),) = panels.items()
    assert "rep" in label and "replicates" in label and label != "rep"
    assert _trends(ax) == [] and len(ax.patches) == 1  # one bar: the spread over them
    assert [t.get_text() for t in ax.get_xticklabels()] == ["all"]


# --- the services plot and --plot-states: labels clear of lines ---------------------------


def test_the_services_plot_keeps_its_purchase_labels_off_the_arrows(drawn, tmp_path):
    from inferplan.codesign.services.file import load_services

    net = inferplan.load_network("examples/network.json")
    plan = provision_services(net, load_services("examples/services.yaml"))
    assert plan.link_upgrades and plan.node_upgrades  # labels on links and nodes
    plot_services(net, plan, tmp_path / "p.png")
    for seed in (1, 3):
        net = inferplan.tiered(seed=seed)
        services = [Service("a", inferplan.vgg16(), "s", "t", 0.1),
                    Service("b", inferplan.alexnet(), "s", "t", 0.02)]  # fmt: skip
        plan = provision_services(net, services)
        plot_services(net, plan, tmp_path / f"p{seed}.png")
    assert len(drawn) == 3
    for fig in drawn:
        assert problems(fig) == []


@pytest.mark.parametrize(("profile", "throughput"), [("alexnet", 30.0), ("alexnet", 80.0),
                                                     ("mlp-64x4", 50.0)])  # fmt: skip
def test_the_state_graph_keeps_its_step_labels_off_the_path(drawn, tmp_path, profile,
                                                            throughput):  # fmt: skip
    from inferplan.plots.pictures import plot_state_graph

    net = inferplan.load_network("examples/network.json")
    prof = inferplan.load_profile(profile)
    plan = inferplan.provision(net, prof, throughput=throughput)
    plot_state_graph(net, prof, plan, tmp_path / "s.png")
    (fig,) = drawn
    assert problems(fig) == []
    (ax,) = fig.axes
    steps = [t for t in ax.texts if t.get_text()]
    assert len(steps) == len(plan.path)  # a label per step of the path, none dropped
