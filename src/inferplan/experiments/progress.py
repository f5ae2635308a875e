"""A rich progress bar for sweeps and studies: the step, points done, rate and time left.

The bar shows from the first moment, one line in an 80-column terminal, and names the steps
around the points: ``starting`` until the first point of this run is stored (reading the
store, starting workers), then the study's name while points run, then ``writing results``
once every point is stored (tables, figures and report are made after the sweep).
"""

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
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column
from rich.text import Text

from inferplan.experiments.engine import Progress as ProgressCallback

__all__ = ["STEPS", "SweepBar", "progress_bar"]

STEPS = ("starting", "writing results")
"""The steps shown before the first point of a run and after the last."""

DESCRIPTION_WIDTH = 20
"""Characters of the step or study name; longer names end in an ellipsis."""


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.speed
        rate = "-" if not speed else f"{speed:.3g}" if speed < 1000 else f"{speed:.0f}"
        return Text(f"{rate} pt/s", style="progress.data.speed")


class SweepBar:
    """The bar of one sweep or study, driven by :meth:`update` (the engine's ``progress``)."""

    def __init__(self, description: str, console: Console, *, enabled: bool = True) -> None:
        self.description = description
        self.bar = Progress(
            TextColumn("{task.description}", table_column=Column(
                width=DESCRIPTION_WIDTH, no_wrap=True, overflow="ellipsis")),
            BarColumn(bar_width=10),
            MofNCompleteColumn(table_column=Column(no_wrap=True)),
            _RateColumn(table_column=Column(no_wrap=True)),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=console,
            # The caller prints a summary line at the end; the bar itself leaves nothing
            # behind, and is not drawn at all into logs and pipes.
            transient=True,
            disable=not (enabled and console.is_terminal),
        )  # fmt: skip
        # Shown at once, before the engine reports anything: no total yet (a pulsing bar).
        self.task: TaskID = self.bar.add_task(STEPS[0], total=None)
        self.first: int | None = None

    def update(self, done: int, total: int) -> None:
        """The engine's ``progress(done, total)``."""
        if self.first is None:
            # Resumed points are the starting offset, not progress of this run.
            self.first = done
            self.bar.reset(self.task, total=total, completed=done, description=STEPS[0])
        step = STEPS[1] if done >= total else STEPS[0] if done == self.first else self.description
        self.bar.update(self.task, completed=done, description=step)

    @property
    def step(self) -> str:
        """The step or name the bar shows now."""
        return str(self.bar.tasks[0].description)


@contextmanager
def progress_bar(
    description: str, *, console: Console | None = None, enabled: bool = True
) -> Iterator[ProgressCallback]:
    """A callback for :func:`~inferplan.experiments.engine.run_sweep` drawing a progress bar
    (see the module).

    Drawn on stderr (stdout stays for results); points resumed from disk count as done but
    not in the rate, so the time left reflects this run's pace.
    """
    bar = SweepBar(description, console or Console(stderr=True), enabled=enabled)
    with bar.bar:
        yield bar.update
