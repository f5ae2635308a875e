"""The summary figure of a user sweep: per swept parameter (one panel each, per metric), each
group's median with its quartiles, drawn as the parameter's kind asks
(:data:`~inferplan.experiments.sweep_summary.KINDS`): a number on a numeric axis (a line through
the medians, the quartiles as a band; a logarithmic axis when its values span two decades), a
category as a group of bars per value (the quartiles as error bars, no line joining values
that have no order), replicates as the spread of one bar per group. The groups side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inferplan.plots._mpl import styled_figure

__all__ = ["MAX_PANELS", "plot_sweep_summary"]

MAX_PANELS = 12
"""The most panels one summary figure draws (the first parameter-metric pairs)."""

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_HATCHES = ("", "//", "..", "xx", "\\\\", "++", "--", "oo")
_LOG_SPAN = 100.0  # a positive numeric axis whose values span this factor is logarithmic


def plot_sweep_summary(
    summary: Sequence[Mapping[str, Any]],
    paths: str | Path | Sequence[str | Path],
    *,
    title: str = "",
) -> None:
    """Draw the rows of a sweep summary (``parameter, kind, value, group, metric, median, q25,
    q75``, as :func:`inferplan.experiments.sweep_summary.summarise` makes them) and save the
    figure to ``paths`` (format by suffix). Each group has its own colour and marker (hatch,
    for bars), so its legend entry tells it apart in print too.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> rows = [{"parameter": "alpha", "kind": "number", "value": a, "group": "pfp",
    ...          "metric": "ratio",
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
    size = (3.2 * columns, 2.6 * rows_of_panels + (0.4 if len(groups) > 1 else 0))
    with styled_figure(targets, figsize=size, layout="constrained") as fig:
        axes = fig.subplots(rows_of_panels, columns, squeeze=False).ravel()
        for ax, (parameter, metric) in zip(axes, panels, strict=False):
            members = [r for r in summary if (r["parameter"], r["metric"]) == (parameter, metric)]
            kind = members[0]["kind"]
            if kind == "number":
                _numbers(ax, members, groups)
                ax.set_xlabel(parameter)
            else:
                _categories(ax, members, groups)
                ax.set_xlabel(f"over the replicates ({parameter})" if kind == "replicates"
                              else parameter)  # fmt: skip
            ax.set_ylabel(f"{metric} (median, quartiles)")
        for ax in axes[len(panels) :]:
            ax.set_axis_off()
        if len(groups) > 1 or groups != [""]:
            handles, names = axes[0].get_legend_handles_labels()
            if handles:
                fig.legend(handles, names, loc="outside lower center", ncols=min(len(names), 6))
        if title:
            fig.suptitle(title)


def _numbers(ax: Any, members: Sequence[Mapping[str, Any]], groups: Sequence[str]) -> None:
    """Each group's medians through the parameter's values on a numeric axis, the quartiles
    as a band."""
    values = sorted({float(r["value"]) for r in members})
    if values[0] > 0 and values[-1] >= _LOG_SPAN * values[0]:
        ax.set_xscale("log")
    for k, group in enumerate(groups):
        mine = sorted((r for r in members if str(r["group"]) == group),
                      key=lambda r: float(r["value"]))  # fmt: skip
        if not mine:
            continue
        xs = [float(r["value"]) for r in mine]
        colour = f"C{k % 10}"
        ax.fill_between(xs, [r["q25"] for r in mine], [r["q75"] for r in mine], color=colour,
                        alpha=0.2, linewidth=0)  # fmt: skip
        ax.plot(xs, [r["median"] for r in mine], color=colour, linewidth=1,
                marker=_MARKERS[k % len(_MARKERS)], markersize=4, label=group or None)  # fmt: skip


def _categories(ax: Any, members: Sequence[Mapping[str, Any]], groups: Sequence[str]) -> None:
    """A group of bars per value (each group's median, the quartiles as error bars)."""
    values = list(dict.fromkeys(repr(r["value"]) for r in members))
    labels = {repr(r["value"]): str(r["value"]) for r in members}
    width = 0.8 / max(1, len(groups))
    for k, group in enumerate(groups):
        mine = [r for r in members if str(r["group"]) == group]
        if not mine:
            continue
        xs = [values.index(repr(r["value"])) + (k - (len(groups) - 1) / 2) * width for r in mine]
        medians = [r["median"] for r in mine]
        spread = [[r["median"] - r["q25"] for r in mine], [r["q75"] - r["median"] for r in mine]]
        ax.bar(xs, medians, width=width * 0.9, yerr=spread, capsize=2, color=f"C{k % 10}",
               hatch=_HATCHES[k % len(_HATCHES)], edgecolor="black", linewidth=0.5,
               error_kw={"linewidth": 1}, label=group or None)  # fmt: skip
    ax.set_xticks(range(len(values)), [labels[v] for v in values],
                  rotation=45 if len(values) > 6 else 0)  # fmt: skip
