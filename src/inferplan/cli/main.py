"""The ``inferplan`` command: the typer app of :mod:`inferplan.cli.app` with every command
module registered."""

from __future__ import annotations

from inferplan.cli.app import app

__all__ = ["main", "register"]


def register() -> None:
    """Import every command module; each adds its commands to ``app`` on import."""
    from inferplan.cli import (  # noqa: F401
        codesign,
        coinference,
        edge,
        experiments,
        frontier,
        profiles,
        run,
        serving,
        split,
        validate,
    )


def main() -> None:
    """Entry point of the ``inferplan`` script."""
    register()
    app()
