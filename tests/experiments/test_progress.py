"""The sweep progress bar: shown from the start, its steps, one line at 80 columns."""

from __future__ import annotations

import io

from rich.console import Console

from inferplan.experiments.progress import STEPS, SweepBar


def _lines(bar: SweepBar, console: Console) -> list[str]:
    table = bar.bar.make_tasks_table(bar.bar.tasks)
    return ["".join(s.text for s in line) for line in console.render_lines(table)]


def _console(width: int = 80) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=True)


def test_the_bar_names_each_step():
    bar = SweepBar("co-design study", _console())
    assert bar.step == "starting" and len(bar.bar.tasks) == 1  # before the engine reports
    bar.update(0, 4)
    assert bar.step == "starting"  # workers start, nothing stored yet
    bar.update(1, 4)
    assert bar.step == "co-design study"
    bar.update(3, 4)
    assert bar.step == "co-design study"
    bar.update(4, 4)
    assert bar.step == "writing results"  # tables, figures, report


def test_a_resumed_run_starts_from_its_stored_points():
    bar = SweepBar("sweep", _console())
    bar.update(7, 10)
    assert bar.step == STEPS[0] and bar.bar.tasks[0].completed == 7
    bar.update(8, 10)
    assert bar.step == "sweep"
    every = SweepBar("sweep", _console())
    every.update(10, 10)
    assert every.step == STEPS[1]


def test_one_line_in_an_80_column_terminal():
    console = _console(80)
    bar = SweepBar("sweep a-spec-file-with-a-long-name.yaml", console)
    assert len(_lines(bar, console)) == 1
    for done, total in ((0, 400), (1, 400), (399, 400), (400, 400), (123456, 999999)):
        bar.update(done, total)
        lines = _lines(bar, console)
        assert len(lines) == 1 and len(lines[0]) <= 80, lines
