"""The ``inferplan`` typer app and the one way every command reports errors.

Each command module adds its commands to :data:`app`; :func:`friendly_errors` wraps every
command so that a mistake is one line on stderr, never a traceback:

* an :class:`~inferplan.errors.InferplanError` (bad input) or an ``OSError`` (an output path that
  cannot be written): ``error: ...``, exit code 2;
* :class:`~inferplan.errors.Infeasible` (the request is valid but no plan meets it): exit code
  3, and with ``--json`` one object ``{"status": "infeasible", "method": ..., "message": ...}``
  on stdout, with the error's ``details`` (a co-design target: ``best_interval``, ``binding``,
  ``at_caps``; several services: those of each service alone, under ``services``); without
  it, the deployment the caps allow as a table on stdout (one per service).

A usage error (unknown option, missing argument, bad choice or type) is one line too, exit code
2 (:class:`OneLineErrors`, the top-level group). The library names its parameters
(``tie_break``, ``low``); the error line names the command's flag for that parameter
(``--tie-break``, ``--from``), read off the command's own options. Line breaks inside a message
are shown as ``\n``: an error is one line, whatever a file's keys or names hold.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Callable, Sequence
from functools import wraps
from typing import Annotated, Any, TypeVar

import typer
from typer._click import _textwrap
from typer._click.exceptions import NoArgsIsHelpError
from typer.core import TyperGroup

from inferplan.cli.render import console, infeasible_tables, print_json
from inferplan.errors import Infeasible, InferplanError

__all__ = [
    "EXIT_INFEASIBLE",
    "EXIT_INVALID",
    "OneLineErrors",
    "app",
    "friendly_errors",
    "one_line",
    "usage_error_line",
]

EXIT_INVALID = 2
"""Exit code for bad input: a file, a value or an option that cannot be used."""
EXIT_INFEASIBLE = 3
"""Exit code for a valid request that no plan can meet."""

# Help is click's plain layout: flags without a type (``--json``, not ``--json <bool>``), each
# choice list whole on its option's line, no line wider than the terminal (80 columns at most),
# and command summaries short enough to show whole (``rich_markup_mode=None`` on every app).


class _SpaceWrapper(_textwrap.TextWrapper):
    """Wraps help text at spaces only: the hyphenated words of our help texts are names
    (``psg-reference``, ``--tie-break``) that must not be split across lines."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "break_on_hyphens": False})


_textwrap.TextWrapper = _SpaceWrapper  # type: ignore[misc]  # read by click's wrap_text


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
            sys.exit(EXIT_INVALID)
        except typer.Abort:
            print("error: aborted", file=sys.stderr)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    name="inferplan",
    help="Plan where deep-learning inference runs and what infrastructure it needs.",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    cls=OneLineErrors,
)


def _print_version(value: bool) -> None:
    if value:
        from inferplan import __version__

        print(f"inferplan {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Plan where deep-learning inference runs and what infrastructure it needs."""


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
        return one_line(f"{flag}: {exc.message}")
    return one_line(str(exc))


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
                    print_json({"status": "infeasible", "method": method, "message": line,
                                **exc.details})  # fmt: skip
                else:
                    for caps in infeasible_tables(exc.details):
                        console.print(caps)
                print(f"error: {line}", file=sys.stderr)
                raise typer.Exit(EXIT_INFEASIBLE) from None
            print(f"error: {line}", file=sys.stderr)
            raise typer.Exit(EXIT_INVALID) from None
        except OSError as exc:  # an output path that cannot be written, a full disk, ...
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"error: {one_line(f'{where}{exc.strerror or exc}')}", file=sys.stderr)
            raise typer.Exit(EXIT_INVALID) from None

    return wrapper  # type: ignore[return-value]
