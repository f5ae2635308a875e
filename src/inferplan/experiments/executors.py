"""Where the points of a sweep run: in process, on local processes (joblib), or on Dask.

Every executor runs the same :func:`~inferplan.experiments.engine.execute_point` on the same
tasks and yields outcomes as they finish (in any order); the engine stores them and sorts
them back into point order, so results do not depend on the executor.
"""

from __future__ import annotations

import importlib
import socket
import sys
import warnings
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar

from inferplan.errors import InferplanError, InvalidArgument

__all__ = ["run_dask", "run_local"]

T = TypeVar("T")
R = TypeVar("R")


def run_local(
    function: Callable[[T], R], tasks: Sequence[T], *, jobs: int | None
) -> Generator[R, None, None]:
    """Run ``function`` on ``tasks`` in this process (``jobs == 1``) or on ``jobs`` worker
    processes with joblib (``None`` or ``-1``: one per core)."""
    if jobs == 1 or len(tasks) <= 1:
        yield from map(function, tasks)
        return
    from joblib import Parallel, delayed

    # Unordered so that each point is stored as soon as it finishes.
    parallel = Parallel(n_jobs=-1 if jobs is None else jobs, return_as="generator_unordered")
    with warnings.catch_warnings():
        # Points in flight when a run is interrupted are cancelled on purpose: they are simply
        # run again on resume.
        warnings.filterwarnings("ignore", message=".*still being processed by the workers")
        yield from parallel(delayed(function)(task) for task in tasks)


def run_dask(
    function: Callable[[T], R], tasks: Sequence[T], *, address: str, workers: int | None = None
) -> Generator[R, None, None]:
    """Run ``function`` on ``tasks`` on the Dask scheduler at ``address``.

    ``address`` ``"local"`` starts a :class:`distributed.LocalCluster` of ``workers`` processes
    (two by default) with one thread each, for the length of the run, and says on stderr where
    its dashboard is (on 127.0.0.1, a free port). Workers of a remote cluster need the same
    inferplan installed: tasks name their point function by module path.
    """
    try:
        # As a module object: distributed's functions are untyped.
        distributed: Any = importlib.import_module("distributed")
    except ImportError:
        raise InferplanError(
            "running on a Dask cluster needs dask.distributed: pip install 'inferplan[dask]'",
            field="--cluster",
        ) from None
    cluster: Any = None
    if address == "local":
        cluster = distributed.LocalCluster(
            n_workers=workers or 2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        )
        address = cluster.scheduler_address
        print(
            f"local Dask cluster: {workers or 2} workers, dashboard {cluster.dashboard_link}",
            file=sys.stderr,
        )
    else:
        _check_reachable(address)
    try:
        client = distributed.Client(address, timeout="10s")
    except OSError as exc:
        if cluster is not None:
            cluster.close()
        raise InvalidArgument(
            f"cannot reach a Dask scheduler at {address!r} ({exc})", field="--cluster"
        ) from None
    try:
        futures = client.map(function, list(tasks), pure=False)
        for future in distributed.as_completed(futures):
            yield future.result()
            future.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _check_reachable(address: str) -> None:
    # A refused connection fails at once here, where Dask would retry until its timeout.
    scheme, _, rest = address.rpartition("://")
    host, _, port = rest.rpartition(":")
    if scheme not in ("", "tcp", "tls") or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=5).close()
    except OSError as exc:
        raise InvalidArgument(
            f"cannot reach a Dask scheduler at {address!r} ({exc.strerror or exc})",
            field="--cluster",
        ) from None
