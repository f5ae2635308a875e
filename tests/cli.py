"""Driving the ``inferplan`` command in-process, shared by the CLI tests."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from inferplan.cli.main import app, register

__all__ = ["app", "fifo", "invoke_json", "runner"]

register()
runner = CliRunner()


def invoke_json(args: list[str]) -> Any:
    """Run ``inferplan ARGS``, require exit code 0, and parse the one JSON object it prints."""
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def fifo(path: Path, *, unblock_after_s: float = 20.0) -> Path:
    """Make a FIFO at ``path``: reading it would wait for a writer for ever. A thread opens
    it for writing after ``unblock_after_s`` seconds and closes it at once, so that a reader
    that does block ends (on an empty read) and its test fails instead of hanging."""

    def unblock() -> None:
        time.sleep(unblock_after_s)
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)

    os.mkfifo(path)
    threading.Thread(target=unblock, daemon=True).start()
    return path
