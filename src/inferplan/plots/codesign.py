"""The co-design study's figure: cost ratios to PSG as box plots (the paper's Fig. 2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inferplan.codesign.methods import method_label
from inferplan.plots._mpl import styled_figure
from inferplan.profiles.zoo import display_name

__all__ = ["ratio_boxplots"]

_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#8172b3")


def ratio_boxplots(
    rows: Sequence[Mapping[str, Any]],
    paths: Sequence[str | Path],
    *,
    dnns: Sequence[str],
    alphas: Sequence[float],
    methods: Sequence[str] = ("pfp", "pwf"),
) -> None:
    """Box plots of the cost ratio to PSG (log scale) per ``alpha``, one panel per DNN, the
    methods side by side; saved to each of ``paths``.

    Boxes span the quartiles, whiskers 1.5 IQR, points beyond are drawn; the dashed line is
    the optimum (ratio 1).
    """
    width = 0.8 / len(methods)
    with styled_figure(paths, figsize=(3.4 * len(dnns), 2.6), layout="constrained") as fig:
        axes = fig.subplots(1, len(dnns), sharey=True, squeeze=False)[0]
        for ax, dnn in zip(axes, dnns, strict=True):
            for k, method in enumerate(methods):
                data = [
                    [
                        float(r["ratio"])
                        for r in rows
                        if r["dnn"] == dnn and r["method"] == method and r["alpha"] == a
                    ]
                    for a in alphas
                ]
                offset = (k - (len(methods) - 1) / 2) * width
                ax.boxplot(
                    data,
                    positions=[i + offset for i in range(len(alphas))],
                    widths=width * 0.85,
                    patch_artist=True,
                    boxprops={
                        "facecolor": _COLORS[k % len(_COLORS)],
                        "alpha": 0.85,
                        "linewidth": 0.6,
                    },
                    medianprops={"color": "black", "linewidth": 1.0},
                    whiskerprops={"linewidth": 0.6},
                    capprops={"linewidth": 0.6},
                    flierprops={
                        "marker": ".",
                        "markersize": 3,
                        "markerfacecolor": _COLORS[k % len(_COLORS)],
                        "markeredgewidth": 0,
                    },
                    label=method_label(method),
                )
            ax.axhline(1.0, color="0.4", linestyle="--", linewidth=0.6, zorder=0)
            ax.set_yscale("log")
            ax.set_xticks(range(len(alphas)), [f"{a:g}" for a in alphas])
            ax.set_xlabel(r"$\alpha$  (target $\beta = \alpha\, T^*$)")
            ax.set_title(display_name(dnn))
            ax.grid(axis="y", which="major", linewidth=0.3, alpha=0.5)
        axes[0].set_ylabel("cost ratio to PSG (log scale)")
        axes[0].legend(loc="upper right", frameon=False)
