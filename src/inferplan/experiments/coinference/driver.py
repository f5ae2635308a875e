"""The co-inference reproduction: run (or resume) the sweep, write tables, figures and the
report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from inferplan.experiments.coinference.report import (
    coinference_report,
)
from inferplan.experiments.coinference.summary import (
    COINFERENCE_DNNS,
    COINFERENCE_SWEEPS,
    CURVE_COLUMNS,
    SAVINGS_COLUMNS,
    SWEEP_COLUMNS,
    coinference_sweep,
    curve_summary,
    dnn_name,
    dnns_of,
    savings_summary,
    sweep_summary,
)
from inferplan.experiments.engine import Progress, Reproduction, run_sweep
from inferplan.experiments.outputs import (
    can_draw,
    describe_executor,
    write_parquet_if_possible,
)
from inferplan.experiments.store import write_csv

__all__ = [
    "reproduce_coinference",
]


def reproduce_coinference(
    out: str | Path,
    *,
    seed: int = 0,
    dnns: Sequence[str] = COINFERENCE_DNNS,
    sweeps: Mapping[str, Sequence[float | int]] = COINFERENCE_SWEEPS,
    simulate: int = 20_000,
    jobs: int | None = 1,
    cluster: str | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Reproduction:
    """Run (or resume) the study into ``out`` and write ``results.csv`` (and ``.parquet``),
    ``curves.csv``, ``savings.csv``, ``sweeps.csv``, the figures ``optimality``,
    ``z_curves``, ``sweep_costs`` and ``sweep_savings`` (PNG and PDF) and ``report.md``.

    ``jobs``, ``cluster``, ``workers`` and ``progress`` are those of
    :func:`~inferplan.experiments.engine.run_sweep`.
    """
    out = Path(out)
    sweep = coinference_sweep(seed=seed, dnns=dnns, sweeps=sweeps, simulate=simulate)
    outcome = run_sweep(sweep, out, jobs=jobs, cluster=cluster, workers=workers, progress=progress)
    outcome.raise_for_failures()
    rows = list(outcome.rows)
    curves, savings, sweep_rows = curve_summary(rows), savings_summary(rows), sweep_summary(rows)
    files = [out / name for name in ("results.csv", "curves.csv", "savings.csv", "sweeps.csv")]
    write_csv(rows, files[0])
    write_csv(curves, files[1], columns=CURVE_COLUMNS)
    write_csv(savings, files[2], columns=SAVINGS_COLUMNS)
    write_csv(sweep_rows, files[3], columns=SWEEP_COLUMNS)
    notes: list[str] = []
    write_parquet_if_possible(rows, out, files, notes)
    if can_draw(notes):
        from inferplan.plots import coinference as plots

        names = {d: dnn_name(d) for d in dnns_of(rows)}
        for stem, draw, data in (
            ("optimality", plots.optimality_plot, curves),
            ("z_curves", plots.z_curves_plot, curves),
            ("sweep_costs", plots.sweep_costs_plot, sweep_rows),
            ("sweep_savings", plots.sweep_savings_plot, sweep_rows),
        ):
            paths = [out / f"{stem}.png", out / f"{stem}.pdf"]
            draw(data, paths, names=names)
            files += paths
    report = coinference_report(
        rows, seed=seed, outcome=outcome, executor=describe_executor(jobs, cluster)
    )
    (out / "report.md").write_text(report, encoding="utf-8")
    files.append(out / "report.md")
    return Reproduction(out, outcome, tuple(savings), tuple(files), tuple(notes))
