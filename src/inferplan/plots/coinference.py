"""The co-inference study's figures: 1-sla optimality, Z(M) curves and the parameter sweeps.

Each function takes the summary rows the study writes (``curves.csv`` or ``sweeps.csv``, as
dicts) and saves one figure to each of ``paths``; ``names`` maps a DNN key to its label.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inferplan.coinference.strategies import STRATEGIES
from inferplan.plots._mpl import styled_figure

__all__ = [
    "memory_worth_plot",
    "optimality_plot",
    "sweep_costs_plot",
    "sweep_savings_plot",
    "z_curves_plot",
]

_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
COST_UNIT = r"$\beta_t$ s + $\beta_e$ J"

#: Sweep axes: label and whether the axis is logarithmic (the SNR is drawn in dB).
_AXES = {
    "inferences_per_update": ("K (inferences per model update)", True),
    "mean_snr": ("mean SNR (dB)", False),
    "bandwidth_hz": ("uplink bandwidth W (MHz)", True),
    "energy_weight": (r"energy weight $\beta_e$", False),
}
#: Line styles of the strategies drawn, in the registry's order (the joint optimum first).
_STYLES = ("-", "--", ":", ":", "-.", ":", "--")


def _strategies() -> list[tuple[str, str, int, str]]:
    """(column of sweeps.csv, legend label, colour index, line style) of each strategy drawn:
    every strategy of the registry but those that reproduce another's decision."""
    drawn = [s for s in STRATEGIES.values() if s.same_as is None]
    return [(f"cost_{s.key}", s.label, k, _STYLES[k % len(_STYLES)]) for k, s in enumerate(drawn)]


def _dnns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r["dnn"]) for r in rows))


def _x(parameter: str, value: float) -> float:
    if parameter == "mean_snr":
        return 10 * math.log10(value)
    if parameter == "bandwidth_hz":
        return value / 1e6
    return value


def optimality_plot(
    curves: Sequence[Mapping[str, Any]],
    paths: Sequence[str | Path],
    *,
    names: Mapping[str, str] | None = None,
) -> None:
    """P(1-sla splits where the optimal rule does) against the layers placed, one line per DNN."""
    names = names or {}
    with styled_figure(paths, figsize=(3.4, 2.4), layout="constrained") as fig:
        ax = fig.subplots()
        for k, dnn in enumerate(_dnns(curves)):
            mine = [c for c in curves if c["dnn"] == dnn]
            ax.plot(
                [int(c["M"]) for c in mine],
                [float(c["p_1sla_optimal"]) for c in mine],
                marker=_MARKERS[k % len(_MARKERS)],
                markersize=3.5,
                linewidth=1.0,
                color=_COLORS[k % len(_COLORS)],
                label=names.get(dnn, dnn),
            )
        ax.set_ylim(0, 1.03)
        ax.set_xlabel("layers placed on the device, M")
        ax.set_ylabel("P(1-sla split = optimal split)")
        ax.grid(linewidth=0.3, alpha=0.5)
        ax.legend(loc="lower left", frameon=False)


def z_curves_plot(
    curves: Sequence[Mapping[str, Any]],
    paths: Sequence[str | Path],
    *,
    names: Mapping[str, str] | None = None,
) -> None:
    """Z(M) under optimal stopping and under 1-sla, one panel per DNN, each minimum marked.

    The y axis is logarithmic when a panel's costs span more than a factor of 10.
    """
    names = names or {}
    dnns = _dnns(curves)
    with styled_figure(paths, figsize=(2.5 * len(dnns), 2.4), layout="constrained") as fig:
        axes = fig.subplots(1, len(dnns), squeeze=False)[0]
        for ax, dnn in zip(axes, dnns, strict=True):
            mine = [c for c in curves if c["dnn"] == dnn]
            ms = [int(c["M"]) for c in mine]
            for column, label, color, style in (
                ("z_optimal", "optimal stopping", _COLORS[0], "-"),
                ("z_1sla", "1-sla", _COLORS[1], "--"),
            ):
                z = [float(c[column]) for c in mine]
                ax.plot(ms, z, linestyle=style, color=color, linewidth=1.0, label=label)
                best = min(range(len(z)), key=z.__getitem__)
                ax.plot([ms[best]], [z[best]], marker="*", markersize=7, color=color, zorder=3)
            values = [float(c[k]) for c in mine for k in ("z_optimal", "z_1sla")]
            if max(values) > 10 * min(values):
                ax.set_yscale("log")
            ax.set_title(names.get(dnn, dnn))
            ax.set_xlabel("layers placed, M")
            ax.grid(linewidth=0.3, alpha=0.5)
        axes[0].set_ylabel(f"expected cost Z(M) per inference\n({COST_UNIT})")
        axes[0].legend(loc="best", frameon=False, title="splitting (★ = min)", title_fontsize=7)


def _sweep_grid(
    rows: Sequence[Mapping[str, Any]],
    paths: Sequence[str | Path],
    names: Mapping[str, str],
    *,
    savings: bool,
) -> None:
    from matplotlib.ticker import LogLocator, NullFormatter

    dnns = _dnns(rows)
    parameters = list(dict.fromkeys(str(r["parameter"]) for r in rows))
    size = (1.9 * len(parameters) + 0.6, 1.7 * len(dnns) + 0.7)
    with styled_figure(paths, figsize=size, layout="constrained") as fig:
        # Shared axes: one cost scale per DNN, one x scale per parameter, and far fewer tick
        # labels to lay out.
        axes = fig.subplots(
            len(dnns),
            len(parameters),
            squeeze=False,
            sharex="col",
            sharey=True if savings else "row",
        )
        for i, dnn in enumerate(dnns):
            for j, parameter in enumerate(parameters):
                ax = axes[i][j]
                mine = [r for r in rows if r["dnn"] == dnn and r["parameter"] == parameter]
                xs = [_x(parameter, float(r["value"])) for r in mine]
                for column, label, color, style in _strategies():
                    if savings and column == "cost_optimal":
                        continue
                    if any(r.get(column) is None for r in mine):
                        continue
                    cost = [float(r[column]) for r in mine]
                    ys = [
                        100 * (1 - float(r["cost_optimal"]) / c) if savings else c
                        for r, c in zip(mine, cost, strict=True)
                    ]
                    ax.plot(
                        xs,
                        ys,
                        linestyle=style,
                        color=_COLORS[color % len(_COLORS)],
                        linewidth=1.5 if column == "cost_optimal" else 0.9,
                        marker=".",
                        markersize=3,
                        label=label,
                    )
                label, log_x = _AXES.get(parameter, (parameter, False))
                if log_x:
                    ax.set_xscale("log")
                    ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
                    ax.xaxis.set_minor_formatter(NullFormatter())
                if not savings:
                    ax.set_yscale("log")
                    # Minor ticks only at 2 and 5 times a decade: each tick is an artist to
                    # lay out, and full log minor ticks on 12 panels dominate the drawing time.
                    ax.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
                    ax.yaxis.set_minor_formatter(NullFormatter())
                else:
                    ax.set_ylim(-3, 103)
                ax.grid(linewidth=0.3, alpha=0.5)
                if i == len(dnns) - 1:
                    ax.set_xlabel(label)
                if j == 0:
                    unit = (
                        "saving of joint plan (%)" if savings else f"Z per inference\n({COST_UNIT})"
                    )
                    ax.set_ylabel(f"{names.get(dnn, dnn)}\n{unit}")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside upper center", ncol=4, frameon=False)


def sweep_costs_plot(
    sweeps: Sequence[Mapping[str, Any]],
    paths: Sequence[str | Path],
    *,
    names: Mapping[str, str] | None = None,
) -> None:
    """Expected cost of the joint plan and of every baseline (log scale) against each swept
    parameter: one row of panels per DNN, one column per parameter."""
    _sweep_grid(sweeps, paths, names or {}, savings=False)


def sweep_savings_plot(
    sweeps: Sequence[Mapping[str, Any]],
    paths: Sequence[str | Path],
    *,
    names: Mapping[str, str] | None = None,
) -> None:
    """Saving of the joint plan over each baseline, ``1 - Z_joint / Z_baseline`` in percent,
    against each swept parameter (panels as :func:`sweep_costs_plot`)."""
    _sweep_grid(sweeps, paths, names or {}, savings=True)


def memory_worth_plot(
    summary: Sequence[Mapping[str, Any]],
    paths: Sequence[str | Path],
    *,
    names: Mapping[str, str] | None = None,
) -> None:
    """What memory is worth: the saving of the optimum with memory over the i.i.d. rule against
    the device's speed, one panel per DNN (rows) and device CPU (columns), one line per carrier;
    a filled marker where memory also changes the placement ``M*``.

    ``summary`` is :func:`~inferplan.experiments.coinference.memory.memory_summary`'s rows. The
    legend sits above the panels, where it covers no data.
    """
    names = names or {}
    dnns = list(dict.fromkeys(str(r["profile"]) for r in summary))
    cpus = sorted({float(r["device_cpu_hz"]) for r in summary})
    carriers = sorted({float(r["carrier_hz"]) for r in summary})
    size = (1.7 * len(cpus) + 0.4, 1.5 * len(dnns) + 0.6)
    with styled_figure(paths, figsize=size, layout="constrained") as fig:
        axes = fig.subplots(len(dnns), len(cpus), squeeze=False, sharex=True, sharey=True)
        for i, dnn in enumerate(dnns):
            for j, cpu in enumerate(cpus):
                ax = axes[i][j]
                for k, carrier in enumerate(carriers):
                    mine = sorted(
                        (r for r in summary if str(r["profile"]) == dnn
                         and float(r["device_cpu_hz"]) == cpu
                         and float(r["carrier_hz"]) == carrier),
                        key=lambda r: float(r["speed_mps"]),
                    )  # fmt: skip
                    speeds = [float(r["speed_mps"]) for r in mine]
                    saving = [100 * float(r["saving"]) for r in mine]
                    color = _COLORS[k % len(_COLORS)]
                    ax.plot(speeds, saving, color=color, linewidth=1.0,
                            label=f"{carrier / 1e9:g} GHz")  # fmt: skip
                    changed = [(v, s) for v, s, r in zip(speeds, saving, mine, strict=True)
                               if r["placement_changes"]]  # fmt: skip
                    ax.plot(speeds, saving, linestyle="none", marker=_MARKERS[k % len(_MARKERS)],
                            markersize=3, markerfacecolor="white", color=color)  # fmt: skip
                    if changed:
                        marker = _MARKERS[k % len(_MARKERS)]
                        ax.plot(*zip(*changed, strict=True), linestyle="none", marker=marker,
                                markersize=3, color=color)  # fmt: skip
                ax.set_xscale("log")
                ax.grid(linewidth=0.3, alpha=0.5)
                if i == 0:
                    ax.set_title(f"device CPU {cpu / 1e9:g} GHz")
                if i == len(dnns) - 1:
                    ax.set_xlabel("speed (m/s)")
                if j == 0:
                    ax.set_ylabel(f"{names.get(dnn, dnn)}\nsaving of memory (%)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        title = "carrier (filled: M* changes)"
        fig.legend(handles, labels, loc="outside upper center", ncols=len(carriers),
                   frameon=False, title=title, title_fontsize=7)  # fmt: skip
