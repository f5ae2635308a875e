"""What a user sweep shows besides its rows: per swept parameter, each value's metric as a
median and a spread (quartiles, extremes, count), split by a group column when the study has one
(the provisioning study's ``method``), written as ``summary.csv`` and drawn as ``summary.png``.

A swept parameter is one that takes more than one value across the sweep's points; each has a
kind: ``number`` (every value a number: a numeric axis), ``category`` (any other: one group of
bars per value). Replicates (a random network's ``topology``, a sampled point's ``sample``: the
sweep's ``replicates``) are never summarised by value: they are the spread of every other
parameter's values, and when nothing else is swept, the one summary row of kind ``replicates``
(value ``all``) holds the spread over them. The metric
is the study's (``ratio`` for provisioning, ``saving`` for services and co-inference), or a
spec's ``metric``; a study named by its function alone summarises every numeric column of its
rows that is not a parameter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from inferplan.experiments.engine import Sweep

__all__ = ["KINDS", "SUMMARY_COLUMNS", "SummaryRow", "summarise", "write_sweep_summary"]

KINDS = ("number", "category", "replicates")
"""What a summarised parameter is (see the module docstring)."""

SUMMARY_COLUMNS = ["parameter", "kind", "value", "group", "metric", "count", "median", "q25",
                   "q75", "min", "max"]  # fmt: skip
"""The columns of ``summary.csv``."""

_ENGINE = {"point", "seed"}  # the columns the engine adds in front of every row


@dataclass(frozen=True)
class SummaryRow:
    """The ``metric`` over the rows where ``parameter`` is ``value`` (and the group column is
    ``group``, ``""`` without one): ``count`` finite values, their median, quartiles and
    extremes. ``kind``: the parameter's, one of :data:`KINDS`."""

    parameter: str
    kind: str
    value: Any
    group: str
    metric: str
    count: int
    median: float
    q25: float
    q75: float
    min: float
    max: float

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in SUMMARY_COLUMNS}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def swept(rows: Sequence[Mapping[str, Any]], parameters: Sequence[str]) -> list[str]:
    """The ``parameters`` that take more than one value across ``rows``, in order."""
    return [p for p in parameters if len({repr(r.get(p)) for r in rows}) > 1]


def metrics_of(rows: Sequence[Mapping[str, Any]], parameters: Sequence[str]) -> list[str]:
    """Every column of ``rows`` that holds numbers and is no parameter (nor the engine's)."""
    columns = dict.fromkeys(k for r in rows for k in r)
    return [c for c in columns if c not in _ENGINE and c not in parameters
            and any(_number(r.get(c)) is not None for r in rows)]  # fmt: skip


def kind_of(values: Sequence[Any]) -> str:
    """``"number"`` when every one of ``values`` is a finite number (not a bool), else
    ``"category"``."""
    return "number" if all(_number(v) is not None for v in values) else "category"


def _order(values: list[Any]) -> list[Any]:
    if kind_of(values) == "number":
        return sorted(values)
    return sorted(values, key=repr)


def summarise(
    rows: Sequence[Mapping[str, Any]],
    parameters: Sequence[str],
    metrics: Sequence[str],
    group_by: str | None = None,
    replicates: Sequence[str] = (),
) -> list[SummaryRow]:
    """For each swept parameter of ``parameters`` (but ``replicates``), each of its values (in
    order) and each group, the median and spread of each of ``metrics`` over the rows
    (non-numbers and non-finite values left out, a value with none left out too); with only
    replicates swept, the spread over them as one row per group and metric (kind
    ``replicates``, value ``all``).

    Examples
    --------
    >>> rows = [{"alpha": a, "method": m, "ratio": r} for a, m, r in
    ...         [(0.5, "pfp", 1.0), (0.5, "pfp", 3.0), (0.9, "pfp", 2.0), (0.9, "pwf", 4.0)]]
    >>> [(s.value, s.group, s.median) for s in summarise(rows, ["alpha"], ["ratio"], "method")]
    [(0.5, 'pfp', 2.0), (0.9, 'pfp', 2.0), (0.9, 'pwf', 4.0)]
    >>> reps = [{"topology": t, "alpha": a, "ratio": t + a} for t in (0, 1, 2) for a in (0.5, 0.9)]
    >>> [(s.parameter, s.kind, s.value, s.count)
    ...  for s in summarise(reps, ["topology", "alpha"], ["ratio"], replicates=["topology"])]
    [('alpha', 'number', 0.5, 3), ('alpha', 'number', 0.9, 3)]
    """
    varied = swept(rows, parameters)
    axes = [p for p in varied if p not in replicates]
    if not axes and varied:  # only replicates: the spread over them
        pooled = [{**r, "\0": "all"} for r in rows]
        return [replace(s, parameter=", ".join(varied), kind="replicates")
                for s in _summarise(pooled, ["\0"], metrics, group_by)]  # fmt: skip
    return _summarise(rows, axes, metrics, group_by)


def _summarise(
    rows: Sequence[Mapping[str, Any]], axes: Sequence[str], metrics: Sequence[str],
    group_by: str | None,
) -> list[SummaryRow]:  # fmt: skip
    out = []
    for parameter in axes:
        values = _order(list({repr(r.get(parameter)): r.get(parameter) for r in rows}.values()))
        kind = kind_of(values)
        groups = _order(list(dict.fromkeys(str(r.get(group_by, "")) for r in rows))) if group_by \
            else [""]  # fmt: skip
        for value in values:
            for group in groups:
                members = [r for r in rows if r.get(parameter) == value
                           and (not group_by or str(r.get(group_by, "")) == group)]  # fmt: skip
                for metric in metrics:
                    numbers = [x for r in members if (x := _number(r.get(metric))) is not None]
                    if not numbers:
                        continue
                    q25, median, q75 = np.quantile(numbers, [0.25, 0.5, 0.75]).tolist()
                    spread = (median, q25, q75, min(numbers), max(numbers))
                    out.append(SummaryRow(parameter, kind, value, group, metric, len(numbers),
                                          *spread))  # fmt: skip
    return out


def write_sweep_summary(
    sweep: Sweep,
    rows: Sequence[Mapping[str, Any]],
    out: Path,
    notes: list[str],
    *,
    title: str = "",
) -> list[Path]:
    """Write ``out/summary.csv`` and draw ``out/summary.png`` (when matplotlib is installed,
    else a note in ``notes``) for the rows of ``sweep``, and what its study's ``report`` writes
    (:class:`~inferplan.experiments.studies.Study`); the files written. A sweep with no
    swept parameter or no metric writes no summary and says so in ``notes``."""
    from inferplan.experiments.studies import STUDIES

    study = STUDIES.get(sweep.study)
    own = study.report(rows, out, notes) if study is not None and study.report and rows else []
    return _write_summary(sweep, rows, out, notes, title) + own


def _write_summary(
    sweep: Sweep, rows: Sequence[Mapping[str, Any]], out: Path, notes: list[str], title: str
) -> list[Path]:
    from inferplan.experiments.outputs import can_draw
    from inferplan.experiments.store import write_csv

    parameters = list(dict.fromkeys(k for p in sweep.points for k in p.params))
    metrics = [sweep.metric] if sweep.metric else metrics_of(rows, parameters)
    table = summarise(rows, parameters, metrics, sweep.group_by, sweep.replicates)
    if not table:
        if rows:  # (a sweep whose every point failed has nothing to summarise, nor to say)
            notes.append("no summary: no parameter takes more than one value, or no metric "
                         "has a number")  # fmt: skip
        return []
    written = [out / "summary.csv"]
    write_csv([r.to_dict() for r in table], written[0], SUMMARY_COLUMNS)
    if can_draw(notes):
        from inferplan.plots.sweeps import plot_sweep_summary

        plot_sweep_summary([r.to_dict() for r in table], out / "summary.png", title=title)
        written.append(out / "summary.png")
    return written
