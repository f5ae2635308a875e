"""The sweep engine: run a point function over a set of points, store, resume, report progress.

A study is a *point function* plus a parameter space. The point function is named by its import
path (``"package.module:function"``) so that worker processes and Dask workers can import it;
it is called as ``function(params, seed, options)`` and returns one row (a dict of JSON
scalars) or a list of rows. The engine adds the point's id, seed and parameters in front.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import reprlib
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inferplan.errors import InferplanError, InvalidArgument
from inferplan.experiments.executors import check_address, run_dask, run_local
from inferplan.experiments.space import Point, canonical_json
from inferplan.experiments.store import PointRecord, ResultStore

__all__ = [
    "FailedPoints",
    "PointFunction",
    "Progress",
    "Reproduction",
    "Sweep",
    "SweepOutcome",
    "Task",
    "execute_point",
    "one_line_error",
    "resolve_function",
    "run_sweep",
]

Row = dict[str, Any]
PointFunction = Callable[[Mapping[str, Any], int, Mapping[str, Any]], Row | Sequence[Row]]
#: Called after every stored point with (points done, points in the sweep).
Progress = Callable[[int, int], None]


def resolve_function(path: str) -> PointFunction:
    """Import ``"package.module:function"`` (a trust boundary: this runs the module's code).

    Nothing is imported unless ``path`` has exactly that form: dotted Python identifiers, a
    colon, an identifier. The current directory is put first on the import path, as ``python
    -c`` does, so that a study next to the spec file can be named; it stays there, so that the
    function's own imports find their neighbours too.

    Raises
    ------
    InvalidArgument
        If the path is malformed, the module cannot be imported, has no such callable, or the
        callable cannot be called as ``function(params, seed, options)``.
    """
    module_name, sep, name = path.partition(":")
    if not (sep and name.isidentifier() and all(p.isidentifier() for p in module_name.split("."))):
        raise InvalidArgument(f"must look like 'package.module:function', got {path[:200]!r}")
    here = os.getcwd()
    if sys.path[:1] not in ([here], [""]):
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidArgument(f"cannot import module {module_name!r} ({exc})") from None
    except (Exception, SystemExit) as exc:  # importing runs the module's code
        raise InvalidArgument(
            f"importing module {module_name!r} failed: {one_line_error(exc)}"
        ) from None
    function = getattr(module, name, None)
    if not callable(function):
        raise InvalidArgument(f"module {module_name!r} has no function {name!r}")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # some built-ins have none: then calling tells
        return function  # type: ignore[no-any-return]
    try:
        signature.bind(None, 0, None)
    except TypeError:
        raise InvalidArgument(
            f"{path} takes {signature}, it cannot be called as function(params, seed, options)"
        ) from None
    return function  # type: ignore[no-any-return]


def one_line_error(exc: BaseException, limit: int = 500) -> str:
    """An exception as one line: an inferplan error's message, else ``Type: message``."""
    text = str(exc) if isinstance(exc, InferplanError) else f"{type(exc).__name__}: {exc}"
    text = " ".join(text.split()).removesuffix(":")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_item(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _rows(out: Any, function: str) -> tuple[Row, ...]:
    """The rows a point function returned, as plain JSON data (so that a point's rows are the
    same whether just computed or read back from disk)."""
    if isinstance(out, Mapping):
        rows = [out]
    elif isinstance(out, list | tuple) and all(isinstance(r, Mapping) for r in out):
        rows = list(out)
    else:
        raise InvalidArgument(
            f"{function} returned {reprlib.repr(out)}, not a row (a mapping) or a list of rows"
        )
    try:
        plain = json.loads(json.dumps([dict(r) for r in rows], default=_json_item))
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgument(f"{function} returned a row that is not JSON ({exc})") from None
    return tuple(plain)


@dataclass(frozen=True)
class Task:
    """What a worker needs to run one point: plain data, cheap to send."""

    function: str
    point: Point
    options: Mapping[str, Any]


def execute_point(task: Task) -> PointRecord:
    """Run one point (in whichever process or worker receives the task).

    Whatever the point function raises (or a result that is not rows) makes a record of a
    failed point, carrying the one-line error and the traceback: one point's failure costs no
    other point its work.
    """
    point = task.point
    try:
        function = resolve_function(task.function)
        rows = _rows(function(point.params, point.seed, task.options), task.function)
    except (Exception, SystemExit) as exc:
        return PointRecord(
            point.id,
            point.seed,
            point.params,
            (),
            error=one_line_error(exc),
            traceback="".join(traceback.format_exception(exc)),
        )
    return PointRecord(point.id, point.seed, point.params, rows)


@dataclass(frozen=True)
class Sweep:
    """A point function, the points to run it on, and options shared by every point.

    ``study`` and ``seed_from`` only describe the sweep (they go into ``sweep.json``); each
    point already carries its seed. ``metric`` and ``group_by`` say what its summary reports
    (:mod:`~inferplan.experiments.sweep_summary`; ``metric`` ``None``: every numeric column);
    ``replicates`` the parameters that only index repeats of one setting (a random network's
    ``topology``, a sampled point's ``sample``): the summary shows them as spread, never as an
    axis.
    """

    function: str
    points: tuple[Point, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    study: str = ""
    seed_from: tuple[str, ...] | None = None
    metric: str | None = None
    group_by: str | None = None
    replicates: tuple[str, ...] = ()

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
    ``failed`` are the points that raised (in point order), stored as failures and listed in
    ``failures_file``; the rows are those of the other points. A rerun retries only those.
    """

    rows: tuple[Row, ...]
    points: int
    resumed: int
    ran: int
    seconds: float
    failed: tuple[PointRecord, ...] = ()
    failures_file: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": self.points,
            "resumed": self.resumed,
            "ran": self.ran,
            "seconds": self.seconds,
            "rows": len(self.rows),
            "failed": [{"point": r.point, "error": r.error} for r in self.failed],
        }

    def raise_for_failures(self) -> None:
        """Raise :class:`FailedPoints` if any point failed."""
        if self.failed:
            raise FailedPoints(self)


class FailedPoints(InferplanError):
    """Points of a sweep failed; the others are stored, and a rerun retries only these.

    The message is one line: how many failed, the first one's parameters and error, the ids
    of a few more, and where all the errors are.
    """

    def __init__(self, outcome: SweepOutcome) -> None:
        self.failed = outcome.failed
        first = outcome.failed[0]
        params = canonical_json(first.params)
        others = [r.point for r in outcome.failed[1:6]]
        more = len(outcome.failed) - 1 - len(others)
        also = (
            f"; also {', '.join(others)}" + (f" and {more} more" if more else "") if others else ""
        )
        where = f"; all errors in {outcome.failures_file}" if outcome.failures_file else ""
        super().__init__(
            f"{len(outcome.failed)} of {outcome.points} points failed (rerun the same command "
            f"to retry only them{where}): point {first.point} {params[:200]}: "
            f"{first.error}{also}"
        )


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
    dashboard: bool = False,
    progress: Progress | None = None,
) -> SweepOutcome:
    """Run the points of ``sweep`` not yet stored in ``out``, storing each as it finishes.

    A point that raises is stored as a failure (its id, parameters and one-line error, also
    listed in ``out/failures.csv``) and the others go on; the outcome lists the failures (see
    :meth:`SweepOutcome.raise_for_failures`), and a rerun retries only them. One sweep at a
    time runs in ``out``: a lock file, ``out/sweep.lock``, names the process that holds it.

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
        of ``workers`` processes; overrides ``jobs``. Connecting to a scheduler trusts it
        and its workers (see ``docs/experiments.md``).
    dashboard
        Open the Dask dashboard of a local cluster (on 127.0.0.1; its address is printed on
        stderr). Off by default: a local cluster then listens on 127.0.0.1 only, on random
        ports, with no dashboard.
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
        raise InvalidArgument(f"must be a positive number of processes, got {jobs}", field="jobs")
    if cluster is not None:
        check_address(cluster)
    resolve_function(sweep.function)
    start = time.perf_counter()
    created = not Path(out).exists()
    try:
        return _run(sweep, out, jobs, cluster, workers, dashboard, progress, start)
    except BaseException:
        # a run that fails before storing its first point leaves no half-made directory
        if created and not ResultStore(out).finished():
            shutil.rmtree(out, ignore_errors=True)
        raise


def _run(
    sweep: Sweep,
    out: str | Path,
    jobs: int | None,
    cluster: str | None,
    workers: int | None,
    dashboard: bool,
    progress: Progress | None,
    start: float,
) -> SweepOutcome:
    store = ResultStore(out)
    with store.lock():
        store.check_manifest(sweep.manifest())
        stored = store.finished()
        wanted = {p.id for p in sweep.points}
        done = {pid: rec for pid, rec in stored.items() if pid in wanted}
        failed: dict[str, PointRecord] = {}
        todo = [Task(sweep.function, p, sweep.options) for p in sweep.points if p.id not in done]
        total, resumed = len(sweep.points), len(done)
        if progress is not None:
            progress(len(done), total)
        if todo:
            outcomes = (
                run_dask(
                    execute_point,
                    todo,
                    address=cluster,
                    workers=workers,
                    dashboard=dashboard,
                    scratch=store.directory,
                )
                if cluster is not None
                else run_local(execute_point, todo, jobs=jobs)
            )
            # closing(): an interrupted run shuts its pool or Dask client down at once.
            with store.writer() as shard, closing(outcomes):
                for record in outcomes:
                    shard.write(record)
                    (done if record.error is None else failed)[record.point] = record
                    if progress is not None:
                        progress(len(done) + len(failed), total)
        failures = tuple(failed[p.id] for p in sweep.points if p.id in failed)
        failures_file = store.write_failures(failures)
    rows = tuple(row for p in sweep.points if p.id in done for row in done[p.id].flat_rows())
    seconds = time.perf_counter() - start
    return SweepOutcome(rows, total, resumed, total - resumed, seconds, failures, failures_file)


def _echo(params: Mapping[str, Any], seed: int, options: Mapping[str, Any]) -> Row:
    """A point function that returns its options: the smallest study, for examples and tests."""
    return dict(options)
