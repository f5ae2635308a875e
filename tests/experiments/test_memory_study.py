"""What memory is worth: the study's summary, its table and its figure."""

from __future__ import annotations

import pytest

from inferplan.errors import InvalidArgument
from inferplan.experiments.coinference.memory import memory_report, memory_summary
from inferplan.experiments.coinference.point import coinference_point

POINTS = [
    # A slow fading MLP on a slow device: memory keeps the layer the i.i.d. rule would hold.
    {"profile": "mlp-1024x8", "channel": "gauss-markov", "speed_mps": 0.5,
     "carrier_hz": 2.4e9, "device_cpu_hz": 1e9},
    # The same at 30 m/s on 28 GHz: successive SNRs are nearly independent, memory is worth 0.
    {"profile": "mlp-1024x8", "channel": "gauss-markov", "speed_mps": 30.0,
     "carrier_hz": 2.8e10, "device_cpu_hz": 1e9},
]  # fmt: skip


def _rows():
    rows = []
    for params in POINTS:
        for row in coinference_point(params, 0, {"methods": ["optimal", "memoryless"]}):
            rows.append({**params, **row})
    return rows


def test_the_summary_says_what_its_numbers_say():
    slow, fast = _by_speed(memory_summary(_rows()))
    assert slow["saving"] > 0.05 and slow["placement_changes"]
    assert slow["cost_memory"] < slow["cost_iid"]
    assert slow["placement_memory"] != slow["placement_iid"]
    assert fast["saving"] == pytest.approx(0.0, abs=1e-3) and not fast["placement_changes"]
    report = memory_report([slow, fast])
    assert "(M* 0/1)" in report
    assert "lowers the expected cost in 1 of 2 systems and changes the placement in 1" in report


def _by_speed(summary):
    return sorted(summary, key=lambda r: r["speed_mps"])


def test_a_missing_planner_is_named():
    rows = [r for r in _rows() if r.get("strategy") != "memoryless"]
    with pytest.raises(InvalidArgument, match="lacks the memoryless strategy"):
        memory_summary(rows)


def test_the_figure_labels_its_axes_and_its_legend_covers_no_panel(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from inferplan.plots import coinference as plots

    drawn: list[Figure] = []
    original = Figure.savefig

    def keep(self, *args, **kwargs):
        drawn.append(self)
        return original(self, *args, **kwargs)

    summary = memory_summary(_rows())
    Figure.savefig = keep
    try:
        plots.memory_worth_plot(summary, [tmp_path / "memory.png"], names={"mlp-1024x8": "MLP"})
    finally:
        Figure.savefig = original
    assert (tmp_path / "memory.png").stat().st_size > 0
    fig = drawn[0]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    axes = fig.axes
    assert axes[0].get_xlabel() == "speed (m/s)" and "saving of memory (%)" in axes[0].get_ylabel()
    assert axes[0].get_xscale() == "log"
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts == ["2.4 GHz", "28 GHz"]
    box = legend.get_window_extent(renderer)
    for ax in axes:
        assert not box.overlaps(ax.get_window_extent(renderer)), "the legend covers a panel"
