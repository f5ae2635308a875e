"""``inferplan sweep`` and ``inferplan reproduce``: studies on the sweep engine."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.render import console, print_json

if TYPE_CHECKING:
    from inferplan.experiments.engine import Reproduction

OutOpt = Annotated[Path, typer.Option("--out", help="Output directory (resumed if it exists).")]
JobsOpt = Annotated[
    int | None,
    typer.Option("--jobs", "-j", help="Local worker processes (default: one per core)."),
]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        help="Dask scheduler address (tcp://host:8786), or 'local' for a local Dask cluster "
        "(on 127.0.0.1). A scheduler is trusted: it and its workers exchange pickled code and "
        "data with this process.",
    ),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option("--workers", help="Workers of a --cluster local (default 2).", min=1),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]

T = TypeVar("T")


def _interruptible(out: Path, run: Callable[[], T]) -> T:
    try:
        return run()
    except KeyboardInterrupt:
        print(
            f"interrupted: finished points are stored in {out}; rerun the same command to resume",
            file=sys.stderr,
        )
        raise typer.Exit(130) from None


@app.command("sweep")
@friendly_errors
def sweep_command(
    spec: Annotated[Path, typer.Argument(help="Sweep spec file (YAML or JSON).")],
    out: OutOpt,
    jobs: JobsOpt = None,
    cluster: ClusterOpt = None,
    workers: WorkersOpt = None,
    dashboard: Annotated[
        bool,
        typer.Option(
            "--dashboard", help="Open the Dask dashboard of a --cluster local (on 127.0.0.1)."
        ),
    ] = False,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a study over a grid or sample of parameters.

    Rerun the same command to resume. A point that fails is stored as failed and the others go
    on; the command then exits with code 2 naming the failed points, and a rerun retries only
    them. A spec's `study: package.module:function` imports that module and runs that function,
    with the current directory first on the import path (as `python -c` would): run only specs
    you trust.
    """
    started = time.monotonic()  # the command's wall time, the tables and figures included
    from inferplan.experiments.engine import FailedPoints, run_sweep
    from inferplan.experiments.executors import WorkerDied
    from inferplan.experiments.progress import progress_bar
    from inferplan.experiments.spec import load_spec
    from inferplan.experiments.store import write_csv, write_parquet
    from inferplan.experiments.sweep_summary import write_sweep_summary

    sweep = load_spec(spec)
    with progress_bar(f"sweep {spec.name}", enabled=not (quiet or as_json)) as progress:
        try:
            outcome = _interruptible(
                out,
                lambda: run_sweep(
                    sweep,
                    out,
                    jobs=jobs,
                    cluster=cluster,
                    workers=workers,
                    dashboard=dashboard,
                    progress=progress,
                ),
            )
        except WorkerDied as exc:
            raise exc.located(str(spec)) from None
    write_csv(outcome.rows, out / "results.csv")
    parquet = write_parquet(outcome.rows, out / "results.parquet")
    notes = [] if parquet is None else [f"results.parquet not written: {parquet}"]
    summary = write_sweep_summary(sweep, outcome.rows, out, notes, title=spec.name)
    wall = time.monotonic() - started
    if as_json:
        print_json({**outcome.to_dict(), "wall_seconds": wall, "out": str(out),
                    "summary": [str(p) for p in summary]})  # fmt: skip
    else:
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        console.print(
            f"{outcome.points} points ({outcome.ran} run, {outcome.resumed} resumed"
            + (f", {len(outcome.failed)} failed" if outcome.failed else "")
            + f") in {wall:.1f} s of wall time ({outcome.seconds:.1f} s running the points): "
            + f"{len(outcome.rows)} rows in {out / 'results.csv'}"
            + (" and results.parquet" if parquet is None else "")
            + (f"; summary in {', '.join(p.name for p in summary)}" if summary else "")
        )
    try:
        outcome.raise_for_failures()
    except FailedPoints as exc:
        raise exc.located(str(spec)) from None


reproduce_app = typer.Typer(
    help="Reproduce the papers' studies.", rich_markup_mode=None, no_args_is_help=True
)
app.add_typer(reproduce_app, name="reproduce")


def _print_reproduction(result: Reproduction, as_json: bool) -> None:
    if as_json:
        print_json(result.to_dict())
        return
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    outcome = result.outcome
    console.print(
        f"{outcome.points} points ({outcome.ran} run, {outcome.resumed} resumed) in "
        f"{outcome.seconds:.1f} s; wrote {', '.join(f.name for f in result.files)} to "
        f"{result.out}"
    )


@reproduce_app.command("codesign")
@friendly_errors
def reproduce_codesign_command(
    out: OutOpt,
    seed: Annotated[int, typer.Option("--seed", help="Sweep seed.", min=0)] = 0,
    topologies: Annotated[
        int, typer.Option("--topologies", help="Random tiered networks per draw.", min=1)
    ] = 50,
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats",
            help="Independent draws of the networks; the report gives each paper number's "
            "spread across draws.",
            min=1,
        ),
    ] = 1,
    jobs: JobsOpt = None,
    cluster: ClusterOpt = None,
    workers: WorkersOpt = None,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """The co-design paper's Section IV study.

    PSG, PFP and PWF on tiered networks.
    """
    from inferplan.experiments.codesign import reproduce_codesign
    from inferplan.experiments.progress import progress_bar

    with progress_bar("co-design study", enabled=not (quiet or as_json)) as progress:
        result = _interruptible(
            out,
            lambda: reproduce_codesign(
                out,
                seed=seed,
                topologies=topologies,
                repeats=repeats,
                jobs=jobs,
                cluster=cluster,
                workers=workers,
                progress=progress,
            ),
        )
    _print_reproduction(result, as_json)


@reproduce_app.command("coinference")
@friendly_errors
def reproduce_coinference_command(
    out: OutOpt,
    seed: Annotated[int, typer.Option("--seed", help="Sweep seed (Monte-Carlo check).", min=0)] = 0,
    simulate: Annotated[
        int,
        typer.Option(
            "--simulate", help="Inferences simulated per point to check the costs (0: none).", min=0
        ),
    ] = 20_000,
    jobs: JobsOpt = None,
    cluster: ClusterOpt = None,
    workers: WorkersOpt = None,
    quiet: QuietOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """The co-inference paper's study.

    1-sla optimality, Z(M) curves, joint placement vs baselines.
    """
    from inferplan.experiments.coinference import coinference_sweep, reproduce_coinference
    from inferplan.experiments.progress import progress_bar

    coinference_sweep(seed=seed, simulate=simulate)  # checks the options before any work
    with progress_bar("co-inference study", enabled=not (quiet or as_json)) as progress:
        result = _interruptible(
            out,
            lambda: reproduce_coinference(
                out,
                seed=seed,
                simulate=simulate,
                jobs=jobs,
                cluster=cluster,
                workers=workers,
                progress=progress,
            ),
        )
    _print_reproduction(result, as_json)
