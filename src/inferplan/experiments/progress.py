"""A rich progress bar for sweeps: points done, rate and time left."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from inferplan.experiments.engine import Progress as ProgressCallback

__all__ = ["progress_bar"]


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.speed
        return Text(f"{speed:.3g} points/s" if speed else "- points/s", style="progress.data.speed")


@contextmanager
def progress_bar(
    description: str, *, console: Console | None = None, enabled: bool = True
) -> Iterator[ProgressCallback]:
    """A callback for :func:`~inferplan.experiments.engine.run_sweep` drawing a progress bar.

    Drawn on stderr (stdout stays for results); points resumed from disk count as done but
    not in the rate, so the time left reflects this run's pace.
    """
    console = console or Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TextColumn("elapsed"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        # The caller prints a summary line at the end; the bar itself leaves nothing behind,
        # and is not drawn at all into logs and pipes.
        transient=True,
        disable=not (enabled and console.is_terminal),
    )
    task_id = None

    def update(done: int, total: int) -> None:
        nonlocal task_id
        if task_id is None:
            # Resumed points are the starting offset, not progress of this run.
            task_id = bar.add_task(description, total=total, completed=done)
        else:
            bar.update(task_id, completed=done)

    with bar:
        yield update
