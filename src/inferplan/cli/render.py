"""Turning results into terminal output: one JSON object, or rich tables."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["console", "print_json", "table", "written"]


class _Console:
    """The rich console, made on first use: ``--help`` and ``--json`` never load rich."""

    @cached_property
    def rich(self) -> Console:
        from rich.console import Console

        return Console()

    def print(self, *objects: Any, **options: Any) -> None:
        self.rich.print(*objects, **options)


console = _Console()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def print_json(data: Mapping[str, Any]) -> None:
    """Print ``data`` as exactly one JSON object on stdout (non-finite numbers as ``null``)."""
    print(json.dumps(_finite(data), allow_nan=False))


def written(path: Path) -> None:
    """Say on stderr that a file was written (stdout stays one JSON object with ``--json``)."""
    print(f"written: {path}", file=sys.stderr)


def table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    """A rich table with right-aligned columns after the first."""
    from rich.table import Table

    out = Table(title=title, title_justify="left")
    for k, column in enumerate(columns):
        # the first column names the row: never cut it short, let the numbers wrap instead
        out.add_column(column, justify="left" if k == 0 else "right", no_wrap=k == 0)
    for row in rows:
        out.add_row(*row)
    return out
