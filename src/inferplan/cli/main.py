"""The ``inferplan`` command: one typer app, one module per command group."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from functools import wraps
from typing import Any, TypeVar

import typer
from typer._click.exceptions import NoArgsIsHelpError
from typer.core import TyperGroup

from inferplan.errors import InferplanError

__all__ = ["OneLineErrors", "app", "friendly_errors", "main", "one_line", "usage_error_line"]


def one_line(text: str) -> str:
    """``text`` with its line breaks shown as ``\\n``: an error is one line, whatever a file's
    keys or names hold."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def usage_error_line(exc: typer.TyperException) -> str:
    """The one line that replaces typer's usage box: ``error: COMMAND: what (see ... --help)``."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return f"error: {message}"
    return f"error: {ctx.command_path}: {message} (see '{ctx.command_path} --help')"


class OneLineErrors(TyperGroup):
    """The top-level command group: a usage error (unknown option, missing argument, bad
    choice or type) is one line on stderr and exit code 2, like every other error."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        def run() -> Any:
            return super(OneLineErrors, self).main(
                args, prog_name, complete_var, False, windows_expand_args, **extra
            )

        if not standalone_mode:
            return run()
        try:
            code = run()
        except NoArgsIsHelpError as exc:  # a bare command group prints its help, as before
            exc.show()
            sys.exit(exc.exit_code)
        except typer.TyperException as exc:
            print(usage_error_line(exc), file=sys.stderr)
            sys.exit(2)
        except typer.Abort:
            print("error: aborted", file=sys.stderr)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    name="inferplan",
    help="Plan where deep-learning inference runs and what infrastructure it needs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OneLineErrors,
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
            print(f"error: {one_line(str(exc))}", file=sys.stderr)
            raise typer.Exit(2) from None
        except OSError as exc:  # an output path that cannot be written, a full disk, ...
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"error: {one_line(f'{where}{exc.strerror or exc}')}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def _register() -> None:
    # Each command module adds its commands to ``app`` on import.
    from inferplan.cli import (  # noqa: F401
        codesign,
        coinference,
        experiments,
        frontier,
        profiles,
    )


def main() -> None:
    """Entry point of the ``inferplan`` script."""
    _register()
    app()
