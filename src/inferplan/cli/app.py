"""The ``inferplan`` typer app and the one way every command reports errors.

Each command module adds its commands to :data:`app`; :func:`friendly_errors` wraps every
command so that a mistake is one line on stderr, never a traceback:

* an :class:`~inferplan.errors.InferplanError` (bad input) or an ``OSError`` (an output path that
  cannot be written): ``error: ...``, exit code 2;
* :class:`~inferplan.errors.Infeasible` (the request is valid but no plan meets it): exit code
  3, and with ``--json`` one object ``{"status": "infeasible", "method": ..., "message": ...}``
  on stdout.

The library names its parameters (``tie_break``, ``low``); the error line names the command's
flag for that parameter (``--tie-break``, ``--from``), read off the command's own options.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer

from inferplan.cli.render import print_json
from inferplan.errors import Infeasible, InferplanError

__all__ = ["EXIT_INFEASIBLE", "EXIT_INVALID", "app", "friendly_errors"]

EXIT_INVALID = 2
"""Exit code for bad input: a file, a value or an option that cannot be used."""
EXIT_INFEASIBLE = 3
"""Exit code for a valid request that no plan can meet."""

app = typer.Typer(
    name="inferplan",
    help="Plan where deep-learning inference runs and what infrastructure it needs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])


def _flags(command: Callable[..., Any]) -> dict[str, str]:
    """Each parameter of ``command`` that is a command-line option, and its long flag."""
    flags: dict[str, str] = {}
    hints = typing.get_type_hints(command, include_extras=True)
    for name, hint in hints.items():
        for info in getattr(hint, "__metadata__", ()):
            # typer.Option("--flag", ...) keeps the first declaration as its "default"
            first = getattr(info, "default", None)
            decls = [first, *(getattr(info, "param_decls", None) or ())]
            long = [d for d in decls if isinstance(d, str) and d.startswith("--")]
            if long:
                flags[name] = long[0]
    return flags


def _where(exc: InferplanError, flags: dict[str, str]) -> str:
    """The error as one line, naming the flag instead of the library's parameter name."""
    flag = flags.get(exc.field or "")
    if exc.source is None and flag is not None:  # a field of a file keeps its own name
        return f"{flag}: {exc.message}"
    return str(exc)


def friendly_errors(command: F) -> F:
    """Turn errors of ``command`` into one line on stderr and an exit code (see the module)."""
    flags: dict[str, str] | None = None

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal flags
        try:
            return command(*args, **kwargs)
        except InferplanError as exc:
            flags = _flags(command) if flags is None else flags
            line = _where(exc, flags)
            if isinstance(exc, Infeasible):
                if kwargs.get("as_json"):
                    method = kwargs.get("method")
                    print_json({"status": "infeasible", "method": method, "message": line})
                print(f"error: {line}", file=sys.stderr)
                raise typer.Exit(EXIT_INFEASIBLE) from None
            print(f"error: {line}", file=sys.stderr)
            raise typer.Exit(EXIT_INVALID) from None
        except OSError as exc:  # an output path that cannot be written, a full disk, ...
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
            raise typer.Exit(EXIT_INVALID) from None

    return wrapper  # type: ignore[return-value]
