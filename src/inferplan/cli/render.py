"""Turning results into terminal output: one JSON object, or rich tables.

Output piped to a file or a log is never wrapped (a line is as long as its content); on a
terminal it takes the terminal's full width. Links are written ``s -> a1`` and a zero quantity
``0 FLOP/s`` everywhere (:mod:`inferplan.units`).
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from inferplan.codesign.plan import Plan

__all__ = [
    "console",
    "infeasible_tables",
    "memory_table",
    "plan_lines",
    "plan_upgrades",
    "print_json",
    "stages_table",
    "table",
    "working",
    "written",
]


class _Console:
    """The rich console, made on first use: ``--help`` and ``--json`` never load rich."""

    @cached_property
    def rich(self) -> Console:
        from rich.console import Console

        if sys.stdout.isatty():
            return Console()  # the terminal's own width
        # a pipe or a log: no line is cut short (rich would wrap at 80 columns)
        return Console(width=UNWRAPPED, soft_wrap=True)

    def print(self, *objects: Any, **options: Any) -> None:
        self.rich.print(*objects, **options)


UNWRAPPED = 100_000
"""The width of output that is not a terminal: wider than any line of ours, so none wraps."""


console = _Console()

PROGRESS_AFTER_S = 1.0
"""A step that runs longer than this (wall time) says so on stderr."""


@contextmanager
def working(what: str) -> Iterator[None]:
    """Progress on stderr while a long step (``what``: ``solving the joint MILP``) runs, so
    that stdout stays the result (a table, or ``--json``'s one object). On a terminal a
    spinner with the time elapsed, gone when the step ends; elsewhere (a pipe, a log) the line
    ``what ...`` once the step has taken :data:`PROGRESS_AFTER_S`. A step that took that long
    ends with the line ``what: N s wall time``. Rich is loaded only for a terminal."""
    start = time.monotonic()
    if _terminal_stderr():
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True) as bar:  # fmt: skip
            bar.add_task(what, total=None)
            yield
    else:
        timer = threading.Timer(PROGRESS_AFTER_S, _say, (f"{what} ...",))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
    took = time.monotonic() - start
    if took >= PROGRESS_AFTER_S:
        _say(f"{what}: {took:.1f} s wall time")


def _terminal_stderr() -> bool:
    """Whether stderr is a terminal (or rich is told to treat it as one: ``FORCE_COLOR``,
    ``TTY_COMPATIBLE=1``)."""
    import os

    if os.environ.get("TTY_COMPATIBLE") == "1" or os.environ.get("FORCE_COLOR"):
        return True
    return sys.stderr.isatty()


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


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


def stages_table(
    title: str,
    path: Sequence[str],
    cut_indices: Sequence[int],
    marks: Mapping[str, str],
    added: Mapping[str, str] | None = None,
    *,
    mark_column: str = "sets interval",
    layers: Sequence[Sequence[str]] = (),
    sends: Sequence[Sequence[str]] = (),
    cuts: str = "chain",
) -> Table:
    """A deployment as its stages in order, nodes and the links between them (``s -> a1``),
    with the blocks each runs or carries (their numbers on a chain; cut at ideals of a layer
    graph, the ideal each node ends at: ``cut_indices`` as
    :attr:`~inferplan.codesign.plan.Plan.cut_indices`), the
    names of the layers each node runs and of the tensors each link sends (``layers``,
    ``sends``, when given), the capacity added (if ``added``, by node id or link id ``u->v``;
    ``0`` where none) and a mark per stage id (``marks``)."""
    from inferplan.units import link_name, listed

    rows, prev = [], 0
    numbered = cuts == "chain"
    for k, (node, done) in enumerate(zip(path, cut_indices, strict=True)):
        names = layers[k] if layers else ()
        if numbered:
            blocks = f"{prev + 1}..{done}" if done > prev else "-"
        else:
            blocks = f"ideal {done}" if names else "-"
        stages = [(node, node, blocks, listed(names))]
        if k + 1 < len(path):
            link = f"{node}->{path[k + 1]}"
            carried = listed(sends[k]) if sends else ""
            stages.append((link, link_name(node, path[k + 1]),
                           f"after {done}" if numbered else f"ideal {done}",
                           f"sends {carried}" if carried else ""))  # fmt: skip
        for stage, shown, runs, named in stages:
            zero = "0 bit/s" if "->" in stage else "0 FLOP/s"
            extra = [added.get(stage, zero)] if added is not None else []
            rows.append([shown, runs, *([named] if layers else []), *extra,
                         marks.get(stage, "")])  # fmt: skip
        prev = done
    columns = ["stage", "blocks" if numbered else "ideal (layers done)",
               *(["layers"] if layers else []),
               *(["added"] if added is not None else []), mark_column]  # fmt: skip
    out = table(title, columns, rows)
    if not numbered:
        out.caption = GRAPH_CUT
        out.caption_justify = "left"
    return out


GRAPH_CUT = (
    "ideal k: the k-th ideal of the layer graph (the set of layers done up to that point, "
    "closed under their inputs; numbered by the planner, smaller sets first), not a block "
    "count: --json gives them as ideals; the layers column names what each node runs"
)
"""What a cut of a plan cut at ideals of a layer graph is, under its deployment's table."""


def cut_list(deployment: Mapping[str, Any]) -> list[int]:
    """The planners' cut numbers of a deployment's JSON (``to_dict``): its ``ideals`` when
    cut at ideals of a layer graph, else its ``partition``."""
    cut: list[int] = deployment["ideals" if deployment.get("cuts") == "graph" else "partition"]
    return cut


def cut_words(partition: Sequence[int] | None, ideals: Sequence[int] | None) -> str:
    """A deployment's cuts in a few words: its partition's block counts (``partition 3,6``),
    or its ideals named as such (``ideals 3,10``)."""
    if partition is not None:
        return "partition " + ",".join(map(str, partition))
    return "ideals " + ",".join(map(str, ideals or ()))


def memory_table(memory: Sequence[Any]) -> Table:
    """Each path node's memory need, its memory after the upgrades and the memory added (a
    plan's :class:`~inferplan.codesign.memory.NodeMemory` rows)."""
    from inferplan.units import si

    rows = [[m.id, si(m.need, "B"), "unlimited" if m.memory is None else si(m.memory, "B"),
             si(m.added, "B")] for m in memory]  # fmt: skip
    return table("memory", ["node", "needs", "has (after upgrades)", "added"], rows)


def plan_upgrades(plan: Plan) -> dict[str, str]:
    """What ``plan`` buys, by node id or link ``u->v``, as a table cell says it."""
    from inferplan.units import si

    return {
        **{node: si(amount, "FLOP/s") for node, amount in plan.node_upgrades.items()},
        **{f"{u.source}->{u.target}": si(u.amount, "bit/s") for u in plan.link_upgrades},
    }


def plan_lines(plan: Plan) -> list[str]:
    """What ``plan`` is, in three lines: its method, status and cost; the interval and latency
    it achieves; its target."""
    from inferplan.units import cost, si

    def rate(interval: float) -> str:
        return f"interval {si(interval, 's')}, {1 / interval:.4g} inferences/s"

    bound = plan.target_latency
    within = f", latency at most {si(bound, 's')}" if bound is not None else ""
    return [f"[bold]{plan.method}[/] ({plan.status}): cost [bold]{cost(plan.cost)}[/]",
            f"achieved: {rate(plan.interval)}, latency {si(plan.latency or 0.0, 's')}",
            f"target:   {rate(plan.target_interval)}{within}"]  # fmt: skip


def _names(names: Sequence[str], shown: int = 4) -> str:
    """Layer names for a table cell: the first few and how many more."""
    if len(names) <= shown:
        return ", ".join(names)
    return ", ".join(names[:shown]) + f", ... ({len(names)} in all)"


def infeasible_tables(details: Mapping[str, Any]) -> list[Table]:
    """The deployment that reaches the best interval the capacity caps allow, its binding caps
    marked (``details`` of a co-design :class:`~inferplan.errors.Infeasible`), or one such
    table per service (``details["services"]`` of a joint problem); none when the error
    carries no such deployment."""
    from inferplan.units import si

    unit = {"node": "FLOP/s", "link": "bit/s"}
    found = [(None, details)] + [(s["name"], s) for s in details.get("services", ())]
    tables = []
    for name, each in found:
        best = each.get("at_caps")
        if not best:
            continue
        marks = {
            b["id"]: f"binds: at its cap of {si(b['capacity'], unit[b['kind']])}"
            for b in each.get("binding", ())
        }
        title = f"best within the caps: interval {si(each['best_interval'], 's')}"
        if name is not None:
            title = f"service {name!r} alone, {title}"
        tables.append(stages_table(title, best["path"], cut_list(best), marks,
                                   mark_column="cap", layers=best.get("layers", ()),
                                   sends=best.get("sends", ()),
                                   cuts=best.get("cuts", "chain")))  # fmt: skip
    return tables
