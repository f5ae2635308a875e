"""The ``inferplan`` command: one typer app, one module per command group."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer

from inferplan.errors import InferplanError

__all__ = ["app", "friendly_errors", "main"]

app = typer.Typer(
    name="inferplan",
    help="Plan where deep-learning inference runs and what infrastructure it needs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(command: F) -> F:
    """Turn an :class:`InferplanError`, or an ``OSError`` such as an unwritable output path,
    into one line on stderr and exit code 2."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except InferplanError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
        except OSError as exc:  # an output path that cannot be written, a full disk, ...
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def _register() -> None:
    # Each command module adds its commands to ``app`` on import.
    from inferplan.cli import (  # noqa: F401
        codesign,
        coinference,
        edge,
        experiments,
        frontier,
        profiles,
        run,
    )


def main() -> None:
    """Entry point of the ``inferplan`` script."""
    _register()
    app()
