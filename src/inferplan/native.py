"""Native solvers' own writes kept off the process's standard output.

HiGHS prints some debugging lines from C++ straight to descriptor 1 (such as
``HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();``) whatever its
``output_flag`` and ``log_to_console`` say, so every HiGHS solve of the library runs inside
:func:`native_stdout_muted`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

__all__ = ["native_stdout_muted"]

_lock = threading.Lock()
_depth = 0  # solves inside the muted window: the first mutes, the last restores
_saved: int | None = None  # descriptor 1 as it was


def _flush() -> None:
    with contextlib.suppress(Exception):  # a closed or replaced sys.stdout: nothing to flush
        sys.stdout.flush()


@contextlib.contextmanager
def native_stdout_muted() -> Iterator[None]:
    """File descriptor 1 on the null device while the block runs (``sys.stdout`` flushed
    before and after), so that a native solver's own writes there do not reach the
    program's output (a command's ``--json``, a notebook's cell). Nested and concurrent
    uses share one window: the first mutes, the last restores. Anything else written to
    descriptor 1 meanwhile, from another thread say, is muted too."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _flush()
            try:
                saved: int | None = os.dup(1)
            except OSError:  # no descriptor 1 to mute
                saved = None
            if saved is not None:
                null = os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(null, 1)
                finally:
                    os.close(null)
            _saved = saved
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                _flush()
                os.dup2(_saved, 1)
                os.close(_saved)
                _saved = None
