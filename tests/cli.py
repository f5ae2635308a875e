"""Driving the ``inferplan`` command in-process, shared by the CLI tests."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from inferplan.cli.main import app, register

__all__ = ["app", "invoke_json", "runner"]

register()
runner = CliRunner()


def invoke_json(args: list[str]) -> Any:
    """Run ``inferplan ARGS``, require exit code 0, and parse the one JSON object it prints."""
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)
