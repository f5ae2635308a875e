"""The sweep engine: run a point function over a set of points, store, resume, report progress.

A study is a *point function* plus a parameter space. The point function is named by its import
path (``"package.module:function"``) so that worker processes and Dask workers can import it;
it is called as ``function(params, seed, options)`` and returns one row (a dict of JSON
scalars) or a list of rows. The engine adds the point's id, seed and parameters in front.
"""

from __future__ import annotations

import importlib
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferplan.errors import InvalidArgument
from inferplan.experiments.executors import run_dask, run_local
from inferplan.experiments.space import Point
from inferplan.experiments.store import PointRecord, ResultStore

__all__ = [
    "PointFunction",
    "Progress",
    "Reproduction",
    "Sweep",
    "SweepOutcome",
    "Task",
    "execute_point",
    "resolve_function",
    "run_sweep",
]

Row = dict[str, Any]
PointFunction = Callable[[Mapping[str, Any], int, Mapping[str, Any]], Row | Sequence[Row]]
#: Called after every stored point with (points done, points in the sweep).
Progress = Callable[[int, int], None]


def resolve_function(path: str) -> PointFunction:
    """Import ``"package.module:function"``.

    Raises
    ------
    InvalidArgument
        If the path is malformed, the module cannot be imported or has no such callable.
    """
    module_name, sep, name = path.partition(":")
    if not (sep and module_name and name):
        raise InvalidArgument(f"must look like 'package.module:function', got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidArgument(f"cannot import module {module_name!r} ({exc})") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise InvalidArgument(f"module {module_name!r} has no function {name!r}")
    return function  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Task:
    """What a worker needs to run one point: plain data, cheap to send."""

    function: str
    point: Point
    options: Mapping[str, Any]


def execute_point(task: Task) -> PointRecord:
    """Run one point (in whichever process or worker receives the task)."""
    function = resolve_function(task.function)
    out = function(task.point.params, task.point.seed, task.options)
    rows = [out] if isinstance(out, Mapping) else list(out)
    return PointRecord(
        task.point.id, task.point.seed, task.point.params, tuple(dict(r) for r in rows)
    )


@dataclass(frozen=True)
class Sweep:
    """A point function, the points to run it on, and options shared by every point.

    ``study`` and ``seed_from`` only describe the sweep (they go into ``sweep.json``); each
    point already carries its seed.
    """

    function: str
    points: tuple[Point, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    study: str = ""
    seed_from: tuple[str, ...] | None = None

    def manifest(self) -> dict[str, Any]:
        """What identifies the sweep on disk: resuming needs the same manifest.

        The points are left out so that a sweep can be extended (e.g. more topologies) and
        reuse the points it already has: a point's id and seed depend only on its parameters.
        """
        return {
            "format": 1,
            "study": self.study,
            "function": self.function,
            "seed": self.seed,
            "seed_from": list(self.seed_from) if self.seed_from is not None else None,
            "options": dict(self.options),
        }


@dataclass(frozen=True)
class SweepOutcome:
    """The result of :func:`run_sweep`.

    ``rows`` are in point order (then in the order the point function returned them), so they
    are the same whichever executor ran the points and however often the sweep was resumed.
    """

    rows: tuple[Row, ...]
    points: int
    resumed: int
    ran: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": self.points,
            "resumed": self.resumed,
            "ran": self.ran,
            "seconds": self.seconds,
            "rows": len(self.rows),
        }


@dataclass(frozen=True)
class Reproduction:
    """What a paper reproduction wrote and computed: the sweep's outcome, its summary rows,
    the files written to ``out`` and notes for the user."""

    out: Path
    outcome: SweepOutcome
    summary: tuple[dict[str, Any], ...]
    files: tuple[Path, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "sweep": self.outcome.to_dict(),
            "summary": list(self.summary),
            "files": [str(f) for f in self.files],
            "notes": list(self.notes),
        }


def run_sweep(
    sweep: Sweep,
    out: str | Path,
    *,
    jobs: int | None = 1,
    cluster: str | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
) -> SweepOutcome:
    """Run the points of ``sweep`` not yet stored in ``out``, storing each as it finishes.

    Parameters
    ----------
    sweep
        What to run.
    out
        The sweep directory (created if needed). A directory that holds results of the same
        sweep is resumed: stored points are skipped, never run or stored twice.
    jobs
        Local worker processes (joblib); 1 runs in this process, ``None`` one per core.
    cluster
        A Dask scheduler address (``tcp://host:8786``), or ``"local"`` for a local Dask cluster
        of ``workers`` processes; overrides ``jobs``.
    progress
        Called as ``progress(done, total)`` once before running and after each stored point.
        An exception it raises (e.g. ``KeyboardInterrupt``) stops the sweep; what was stored
        stays stored.

    Examples
    --------
    >>> import tempfile
    >>> from inferplan.experiments.space import make_points
    >>> points = make_points([{"x": 1}, {"x": 2}], sweep_seed=0)
    >>> sweep = Sweep("inferplan.experiments.engine:_echo", points)
    >>> [row["x"] for row in run_sweep(sweep, tempfile.mkdtemp()).rows]
    [1, 2]
    """
    if jobs is not None and jobs != -1 and jobs < 1:
        raise InvalidArgument(f"must be a positive number of processes, got {jobs}", field="--jobs")
    resolve_function(sweep.function)
    start = time.perf_counter()
    created = not Path(out).exists()
    try:
        return _run(sweep, ResultStore(out), jobs, cluster, workers, progress, start)
    except BaseException:
        # a run that fails before storing its first point leaves no half-made directory
        if created and not ResultStore(out).finished():
            shutil.rmtree(out, ignore_errors=True)
        raise


def _run(
    sweep: Sweep,
    store: ResultStore,
    jobs: int | None,
    cluster: str | None,
    workers: int | None,
    progress: Progress | None,
    start: float,
) -> SweepOutcome:
    store.check_manifest(sweep.manifest())
    stored = store.finished()
    wanted = {p.id for p in sweep.points}
    done = {pid: rec for pid, rec in stored.items() if pid in wanted}
    todo = [Task(sweep.function, p, sweep.options) for p in sweep.points if p.id not in done]
    total, resumed = len(sweep.points), len(done)
    if progress is not None:
        progress(len(done), total)
    if todo:
        outcomes = (
            run_dask(execute_point, todo, address=cluster, workers=workers)
            if cluster is not None
            else run_local(execute_point, todo, jobs=jobs)
        )
        # closing(): an interrupted run shuts its pool or Dask client down at once.
        with store.writer() as shard, closing(outcomes):
            for record in outcomes:
                shard.write(record)
                done[record.point] = record
                if progress is not None:
                    progress(len(done), total)
    rows = tuple(row for p in sweep.points for row in done[p.id].flat_rows())
    return SweepOutcome(rows, total, resumed, total - resumed, time.perf_counter() - start)


def _echo(params: Mapping[str, Any], seed: int, options: Mapping[str, Any]) -> Row:
    """A point function that returns its options: the smallest study, for examples and tests."""
    return dict(options)
