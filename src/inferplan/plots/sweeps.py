"""The summary figure of a user sweep: per swept parameter (one panel each, per metric), each
group's median against the parameter's values, with the quartiles as error bars; the groups
side by side at each value."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inferplan.plots._mpl import styled_figure

__all__ = ["MAX_PANELS", "plot_sweep_summary"]

MAX_PANELS = 12
"""The most panels one summary figure draws (the first parameter-metric pairs)."""

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def plot_sweep_summary(
    summary: Sequence[Mapping[str, Any]],
    paths: str | Path | Sequence[str | Path],
    *,
    title: str = "",
) -> None:
    """Draw the rows of a sweep summary (``parameter, value, group, metric, median, q25,
    q75``, as :func:`inferplan.experiments.sweep_summary.summarise` makes them) and save the
    figure to ``paths`` (format by suffix). Each group has its own colour and marker, so its
    legend entry tells it apart in print too.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> rows = [{"parameter": "alpha", "value": a, "group": "pfp", "metric": "ratio",
    ...          "median": m, "q25": m - 0.1, "q75": m + 0.1} for a, m in [(0.5, 1.2), (0.9, 1.5)]]
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "summary.png"
    >>> plot_sweep_summary(rows, out)
    >>> out.read_bytes()[1:4]
    b'PNG'
    """
    targets = [paths] if isinstance(paths, str | Path) else list(paths)
    panels = list(dict.fromkeys((r["parameter"], r["metric"]) for r in summary))[:MAX_PANELS]
    groups = list(dict.fromkeys(str(r["group"]) for r in summary))
    columns = min(3, max(1, len(panels)))
    rows_of_panels = max(1, -(-len(panels) // columns))
    size = (3.2 * columns, 2.4 * rows_of_panels + (0.4 if len(groups) > 1 else 0))
    with styled_figure(targets, figsize=size, layout="constrained") as fig:
        axes = fig.subplots(rows_of_panels, columns, squeeze=False).ravel()
        for ax, (parameter, metric) in zip(axes, panels, strict=False):
            members = [r for r in summary if (r["parameter"], r["metric"]) == (parameter, metric)]
            values = list(dict.fromkeys(repr(r["value"]) for r in members))
            labels = {repr(r["value"]): str(r["value"]) for r in members}
            for k, group in enumerate(groups):
                mine = [r for r in members if str(r["group"]) == group]
                if not mine:
                    continue
                # groups side by side, so that equal medians stay visible
                dodge = (k - (len(groups) - 1) / 2) * 0.08
                xs = [values.index(repr(r["value"])) + dodge for r in mine]
                medians = [r["median"] for r in mine]
                below = [r["median"] - r["q25"] for r in mine]
                above = [r["q75"] - r["median"] for r in mine]
                ax.errorbar(xs, medians, yerr=[below, above], color=f"C{k % 10}",
                            marker=_MARKERS[k % len(_MARKERS)], markersize=4, capsize=2,
                            linewidth=1, label=group or None)  # fmt: skip
            ax.set_xticks(range(len(values)), [labels[v] for v in values],
                          rotation=45 if len(values) > 6 else 0)  # fmt: skip
            ax.set_xlabel(parameter)
            ax.set_ylabel(f"{metric} (median, quartiles)")
        for ax in axes[len(panels) :]:
            ax.set_axis_off()
        if len(groups) > 1 or groups != [""]:
            handles, names = axes[0].get_legend_handles_labels()
            if handles:
                fig.legend(handles, names, loc="outside lower center", ncols=min(len(names), 6))
        if title:
            fig.suptitle(title)
