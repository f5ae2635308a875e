"""Where the points of a sweep run: in process, on local processes (joblib), or on Dask.

Every executor runs the same :func:`~inferplan.experiments.engine.execute_point` on the same
tasks and yields outcomes as they finish (in any order); the engine stores them and sorts
them back into point order, so results do not depend on the executor.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from inferplan.errors import InferplanError, InvalidArgument

__all__ = ["WorkerDied", "check_address", "exit_with_parent", "run_dask", "run_local"]

T = TypeVar("T")
R = TypeVar("R")


class WorkerDied(InferplanError):
    """A worker process died while running a point (killed, out of memory, a crash in compiled
    code). The points finished before are stored; rerunning resumes."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"a worker process died while running a point ({' '.join(detail.split())[:300]}); "
            "the points finished before are stored: rerun the same command to resume"
        )


def run_local(
    function: Callable[[T], R], tasks: Sequence[T], *, jobs: int | None
) -> Generator[R, None, None]:
    """Run ``function`` on ``tasks`` in this process (``jobs == 1``) or on ``jobs`` worker
    processes with joblib (``None`` or ``-1``: one per core).

    Worker processes exit within a second of this process's death (even a ``kill -9``): each
    watches that its parent is still there.
    """
    if jobs == 1 or len(tasks) <= 1:
        yield from map(function, tasks)
        return
    from joblib import Parallel, delayed
    from joblib.externals.loky.process_executor import BrokenProcessPool

    # Unordered so that each point is stored as soon as it finishes.
    parallel = Parallel(n_jobs=-1 if jobs is None else jobs, return_as="generator_unordered")
    here = os.getpid()
    with warnings.catch_warnings():
        # Points in flight when a run is interrupted are cancelled on purpose: they are simply
        # run again on resume.
        warnings.filterwarnings("ignore", message=".*still being processed by the workers")
        try:
            yield from parallel(delayed(_in_worker)(function, task, here) for task in tasks)
        except BrokenProcessPool as exc:
            # A worker died (killed, out of memory, a crash in compiled code): which point it
            # ran is unknown, so the run stops; everything finished is stored.
            raise WorkerDied(str(exc).splitlines()[0]) from None


def _in_worker(function: Callable[[T], R], task: T, parent: int) -> R:
    exit_with_parent(parent)
    return function(task)


_watching: set[int] = set()


def exit_with_parent(parent: int, *, every: float = 0.2) -> None:
    """In a worker process started by process ``parent``: exit as soon as ``parent`` is gone.

    A daemon thread checks every ``every`` seconds that this process's parent is still
    ``parent`` (a process whose parent dies is adopted by another; one adopted already, e.g.
    while it was starting, exits at once). Started once per process; nothing happens in
    ``parent`` itself.
    """
    if os.getpid() == parent or parent in _watching:
        return
    _watching.add(parent)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)  # the sweep's process is gone: nobody will collect this worker's results

    threading.Thread(target=watch, name="inferplan-exit-with-parent", daemon=True).start()


#: The address of a scheduler in this process (a ``LocalCluster(processes=False)``).
_INPROC = re.compile(r"inproc://[^/\s]+/\d+/\d+")


def check_address(address: str) -> None:
    """Check that ``address`` is ``"local"`` or a Dask scheduler address,
    ``[tcp://|tls://]host:port`` (or ``inproc://...`` of a scheduler in this process).

    Raises
    ------
    InvalidArgument
        Naming ``cluster``, if it is neither.
    """
    if address == "local" or _INPROC.fullmatch(address):
        return
    scheme, sep, rest = address.rpartition("://")
    host, _, port = rest.rpartition(":")
    if host.startswith("["):  # an IPv6 address: [::1]:8786
        host_ok = host.endswith("]") and len(host) > 2
    else:
        host_ok = bool(host) and all(c.isalnum() or c in "-._" for c in host)
    port_ok = port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536
    if not (host_ok and port_ok and (scheme in ("tcp", "tls") or not sep)):
        raise InvalidArgument(
            "must be 'local' or a Dask scheduler address tcp://HOST:PORT (or tls://HOST:PORT), "
            f"got {address[:200]!r}",
            field="cluster",
        )


def run_dask(
    function: Callable[[T], R],
    tasks: Sequence[T],
    *,
    address: str,
    workers: int | None = None,
    dashboard: bool = False,
    scratch: Path | None = None,
) -> Generator[R, None, None]:
    """Run ``function`` on ``tasks`` on the Dask scheduler at ``address``.

    ``address`` ``"local"`` starts a :class:`distributed.LocalCluster` of ``workers`` processes
    (two by default) with one thread each, for the length of the run. Its scheduler, workers
    and nannies listen on 127.0.0.1 only, on random ports; the scheduler's dashboard is opened
    (on 127.0.0.1:8787, or another port if that one is taken; its address printed on stderr)
    only if ``dashboard``. Its workers' scratch space, ``dask-scratch-space``, lives in
    ``scratch`` (the sweep's directory; the system's temporary folder if ``None``) and is
    removed with the cluster. Workers of a remote cluster need the same inferplan installed:
    tasks name their point function by module path.
    """
    check_address(address)
    try:
        # As a module object: distributed's functions are untyped.
        distributed: Any = importlib.import_module("distributed")
    except ImportError:
        raise InferplanError(
            "running on a Dask cluster needs dask.distributed: pip install 'inferplan[dask]'",
            field="cluster",
        ) from None
    with contextlib.ExitStack() as stack:
        if address == "local":
            address = stack.enter_context(_local_cluster(distributed, workers, dashboard, scratch))
        elif not address.startswith("inproc://"):
            _check_reachable(address)
        try:
            client = distributed.Client(address, timeout="10s")
        except (OSError, ValueError) as exc:  # ValueError: an inproc address of another process
            raise InvalidArgument(
                f"cannot reach a Dask scheduler at {address!r} ({' '.join(str(exc).split())})",
                field="cluster",
            ) from None
        stack.callback(client.close)
        futures = client.map(function, list(tasks), pure=False)
        for future in distributed.as_completed(futures):
            try:
                result = future.result()
            except distributed.KilledWorker as exc:
                raise WorkerDied(str(exc).splitlines()[0]) from None
            yield result
            future.release()


@contextlib.contextmanager
def _local_cluster(
    distributed: Any, workers: int | None, dashboard: bool, scratch: Path | None
) -> Generator[str, None, None]:
    """A local cluster on 127.0.0.1 for the block (see :func:`run_dask`), its scheduler's
    address; its scratch space in ``scratch`` (removed with it) when given."""
    with contextlib.ExitStack() as stack:
        if scratch is not None:
            # the scheduler and the nannies read the setting too, not only the workers
            dask = importlib.import_module("dask")
            stack.enter_context(dask.config.set({"temporary-directory": str(scratch)}))
            stack.callback(shutil.rmtree, scratch / "dask-scratch-space", ignore_errors=True)
        cluster = distributed.LocalCluster(
            n_workers=workers or 2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            scheduler_port=0,
            # The scheduler always serves HTTP (health, metrics); the dashboard is its own
            # switch.
            dashboard_address="127.0.0.1:8787" if dashboard else "127.0.0.1:0",
            scheduler_kwargs={"dashboard": dashboard},
            worker_dashboard_address=None,
            local_directory=None if scratch is None else str(scratch),
        )
        stack.callback(cluster.close)
        if dashboard:
            link = cluster.dashboard_link
            print(f"local Dask cluster: {workers or 2} workers, dashboard: {link}", file=sys.stderr)
        yield str(cluster.scheduler_address)


def _check_reachable(address: str) -> None:
    # A refused connection fails at once here, where Dask would retry until its timeout.
    _, _, rest = address.rpartition("://")
    host, _, port = rest.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise InvalidArgument(
            f"cannot reach a Dask scheduler at {address!r} ({exc.strerror or exc})",
            field="cluster",
        ) from None
