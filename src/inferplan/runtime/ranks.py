"""The processes a launcher starts (the ranks of :mod:`~inferplan.runtime.pipeline`, the edge of
:mod:`~inferplan.runtime.testbed.pair`): how each dies with its launcher and how the launcher
stops them."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import Protocol


def die_with_parent() -> None:
    """In a launched rank: be killed if the launcher dies, and ignore the terminal's Ctrl-C
    (the launcher stops every rank itself)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Rank(Protocol):
    """A launched rank's process, as the launcher watches it (``subprocess.Popen`` is one)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def stop_ranks(procs: Sequence[Rank], grace_s: float = 2.0) -> None:
    """Stop every rank still running: SIGTERM to its process group, SIGKILL after a grace."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
