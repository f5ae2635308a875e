"""The plan report: one self-contained HTML page a person can read, and the plan as GraphViz
DOT.

The page holds the network drawn as inline SVG (the path highlighted, upgrades in red, the
bottleneck marked, on each path node the blocks it runs by number and name, or the layers it
runs and on each path link the tensors it sends for a plan cut at ideals), the stage table
(load, capacity, time per inference, utilisation and headroom of every stage), the cost
breakdown, why the plan is what it is when given its explanation (the runners-up, the
binding constraints, the marginal costs: :mod:`inferplan.codesign.explain`) and, for a run,
the measured times beside the predicted ones. No script, no style
sheet or font from elsewhere: the file opens the same anywhere, offline. Drawn by hand (no
matplotlib), so the report needs no extra.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from inferplan.codesign.breakdown import PlanBreakdown, StageRow, UpgradeCost
from inferplan.network.network import Network
from inferplan.plots.plan import layered_positions
from inferplan.units import COST_UNIT, cost, latency_sum, link_name, listed, si

if TYPE_CHECKING:
    from inferplan.codesign.explain import Explanation

__all__ = ["Measured", "html_page", "plan_dot", "plan_report_html", "write_plan_report"]

_PATH, _IDLE, _BOUGHT, _SLOW = "#1f77b4", "#9a9a9a", "#c0392b", "#e67e22"
_UNIT = {"node": ("FLOP", "FLOP/s"), "link": ("bit", "bit/s")}


@dataclass(frozen=True)
class Measured:
    """What a run measured: the steady-state ``interval``, each stage's time per inference by
    stage id (a node id, or ``u->v`` for a link), the latency's median and 95th percentile
    beside the ``latency_predicted`` (the plan's, in the run's seconds), whether inferences
    queued (``queueing``, one sentence) and a line to show with them (e.g. whether the
    outputs matched)."""

    interval: float
    stages: Mapping[str, float] = field(default_factory=dict)
    latency_median: float | None = None
    latency_p95: float | None = None
    latency_predicted: float | None = None
    queueing: str | None = None
    note: str | None = None


def _blocks(row: StageRow, parts: PlanBreakdown) -> tuple[str, str]:
    """A stage's blocks by number and by name: ``("1–6", "conv1_1 … pool3")`` (a plan cut at
    ideals of a layer graph: how many layers, and their names; a link: the tensors it
    sends)."""
    names = parts.block_names
    graph = parts.plan.cuts == "graph"
    if row.kind == "link":
        return ("sends", listed(row.units, shown=3)) if graph else (f"after {row.after}", "")
    if row.blocks is None:
        return "forwards", ""
    if graph:  # cut at ideals: the layers it runs, by name
        word = "layer" if len(row.units) == 1 else "layers"
        return f"{len(row.units)} {word}", listed(row.units, shown=3)
    first, last = row.blocks
    if first == last:
        return f"{first}", names[first - 1]
    return f"{first}–{last}", f"{names[first - 1]} … {names[last - 1]}"


def _svg(network: Network, parts: PlanBreakdown) -> str:
    """The network as inline SVG: path thick and blue, upgrades red on their node or link,
    the bottleneck stage outlined orange, each path node's blocks under it."""
    pos = layered_positions(network)
    xs = [x for x, _ in pos.values()]
    ys = [y for _, y in pos.values()]
    span_x, span_y = max(xs) - min(xs) or 1.0, max(ys) - min(ys) or 1.0
    columns = len({round(x, 6) for x in xs})
    rows = max(1, len({round(y, 6) for y in ys}))
    width = max(480, 190 * columns)
    height = max(240, 120 * rows + 80)
    margin_x, margin_y = 70, 60

    def at(v: str) -> tuple[float, float]:
        x, y = pos[v]
        return (margin_x + (x - min(xs)) / span_x * (width - 2 * margin_x),
                margin_y + (max(ys) - y) / span_y * (height - 2 * margin_y))  # fmt: skip

    stage = {row.id: row for row in parts.stages}
    plan = parts.plan
    on_path = {f"{u}->{v}" for u, v in zip(plan.path[:-1], plan.path[1:], strict=True)}
    radius = 22.0
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="the plan on the network">',
        "<defs>",
        *(f'<marker id="arrow-{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="11" '
          f'markerHeight="11" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
          f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
          for name, colour in (("idle", _IDLE), ("path", _PATH), ("slow", _SLOW))),
        "</defs>",
    ]  # fmt: skip
    segments = []
    for link in network.links:
        (x0, y0), (x1, y1) = at(link.source), at(link.target)
        segments.append((x0, y0, x1, y1))
    for link in network.links:
        name = f"{link.source}->{link.target}"
        (x0, y0), (x1, y1) = at(link.source), at(link.target)
        length = max(((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5, 1e-9)
        dx, dy = (x1 - x0) / length * radius, (y1 - y0) / length * radius
        row = stage.get(name)
        kind = "slow" if row and row.bottleneck else "path" if name in on_path else "idle"
        colour = {"slow": _SLOW, "path": _PATH, "idle": _IDLE}[kind]
        out.append(
            f'<line x1="{x0 + dx:.1f}" y1="{y0 + dy:.1f}" x2="{x1 - dx:.1f}" y2="{y1 - dy:.1f}" '
            f'stroke="{colour}" stroke-width="{3.5 if kind != "idle" else 1.2}" '
            f'marker-end="url(#arrow-{kind})"><title>{html.escape(link_name(name))}</title></line>'
        )
        labels = []
        if row is not None and plan.cuts == "graph":  # what crosses the cut, by name
            labels.append((f"sends {_blocks(row, parts)[1]}", "#333"))
        if row is not None and row.added > 0:
            labels.append((f"+{si(row.added, 'bit/s')}", _BOUGHT))
        if row is not None and row.bottleneck:
            labels.append(("bottleneck", _SLOW))
        # beside the line, not on it: stacked along its normal, each far enough off that
        # its box (half its width across a steep line, half its height across a flat one)
        # clears the line and the label before it
        nx, ny = (y1 - y0) / length, -(x1 - x0) / length  # a unit normal, pointing up
        if ny > 0:
            nx, ny = -nx, -ny
        # the side (and how far along the line) where no other line strikes the stack
        for side, along in itertools.product((1.0, -1.0), (0.5, 0.35, 0.65, 0.25, 0.75)):
            placed, off = [], 4.0
            for text, colour in labels:
                half_w = _LABEL_CHAR * len(text) / 2
                extent = abs(nx) * half_w + abs(ny) * _LABEL_HALF_HEIGHT
                off += extent
                cx = x0 + (x1 - x0) * along + side * nx * off
                cy = y0 + (y1 - y0) * along + side * ny * off
                placed.append((cx, cy, half_w, text, colour))
                off += extent + 2.0
            if not any(_struck(cx, cy, hw, segments) for cx, cy, hw, *_ in placed):
                break
        for cx, cy, _, text, colour in placed:
            out.append(_label(cx, cy + _BASELINE, text, colour))
    for node in network.nodes:
        x, y = at(node.id)
        row = stage.get(node.id)
        chosen = row is not None
        ring = _SLOW if row is not None and row.bottleneck else _PATH if chosen else _IDLE
        out.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius}" fill="{_PATH if chosen else "white"}" '
            f'stroke="{ring}" stroke-width="{4 if ring == _SLOW else 1.5}">'
            f"<title>{html.escape(node.id)}</title></circle>"
        )
        out.append(
            f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle" font-weight="bold" '
            f'font-size="12" fill="{"white" if chosen else "#555"}">{html.escape(node.id)}</text>'
        )
        if row is None:
            continue
        numbers, names = _blocks(row, parts)
        word = "" if row.blocks is None or parts.plan.cuts == "graph" else \
            "blocks " if "–" in numbers else "block "  # fmt: skip
        below = [(f"{word}{numbers}", _PATH)]
        if names:
            below.append((names, "#333"))
        if row.added > 0:
            below.append((f"+{si(row.added, 'FLOP/s')}", _BOUGHT))
        if row.bottleneck:
            below.append(("bottleneck", _SLOW))
        for k, (text, colour) in enumerate(below):
            out.append(_label(x, y + radius + 14 + 14 * k, text, colour))
    out += _legend(height)
    out.append("</svg>")
    return "\n".join(out).replace(f'viewBox="0 0 {width} {height}" width="{width}" '
                                   f'height="{height}"', f'viewBox="0 0 {width} '
                                   f'{height + _LEGEND_H}" width="{width}" '
                                   f'height="{height + _LEGEND_H}"', 1)  # fmt: skip


_LEGEND_H = 30  # px below the drawing for its legend


def _legend(top: float) -> list[str]:
    """The drawing's legend, in a band of its own under it: what each colour means."""
    keys = [(_PATH, "line", "the plan's path"), (_SLOW, "line", "bottleneck stage"),
            (_BOUGHT, "text", "+capacity bought"), (_IDLE, "line", "not used")]  # fmt: skip
    out, x, y = ['<g class="legend" aria-label="legend">'], 12.0, top + _LEGEND_H / 2
    for colour, shape, words in keys:
        if shape == "line":
            out.append(f'<rect x="{x:.1f}" y="{y - 2:.1f}" width="22" height="4" '
                       f'fill="{colour}"/>')  # fmt: skip
        else:
            out.append(f'<text x="{x:.1f}" y="{y + 4:.1f}" font-size="11" fill="{colour}">+</text>')
        out.append(f'<text x="{x + 28:.1f}" y="{y + 4:.1f}" font-size="11" fill="#333">'
                   f"{html.escape(words)}</text>")  # fmt: skip
        x += 28 + _LABEL_CHAR * len(words) + 18
    out.append("</g>")
    return out


_LABEL_CHAR = 6.6  # px a character of an 11 px label takes at most (sans-serif, bold digits)
_LABEL_HALF_HEIGHT = 7.0  # px: half an 11 px label's box, ascenders to descenders
_BASELINE = 4.0  # px from a label's middle down to its baseline


def _struck(
    cx: float, cy: float, half_w: float, segments: list[tuple[float, float, float, float]]
) -> bool:
    """Whether any segment passes through the box of a label centred at ``(cx, cy)``."""
    left, right = cx - half_w - 1.0, cx + half_w + 1.0
    top, bottom = cy - _LABEL_HALF_HEIGHT - 1.0, cy + _LABEL_HALF_HEIGHT + 1.0
    for x0, y0, x1, y1 in segments:
        steps = max(2, int(math.hypot(x1 - x0, y1 - y0)))
        for k in range(steps + 1):
            px, py = x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps
            if left <= px <= right and top <= py <= bottom:
                return True
    return False


def _label(x: float, y: float, text: str, colour: str) -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="middle" font-size="11" '
            f'fill="{colour}" paint-order="stroke" stroke="white" stroke-width="3">'
            f"{html.escape(text)}</text>")  # fmt: skip


def _bar(share: float, colour: str) -> str:
    width = max(0.0, min(1.0, share)) * 100
    return (f'<span class="bar"><span style="width:{width:.1f}%;background:{colour}"></span>'
            f"</span> {share:.0%}")  # fmt: skip


def _stage_table(parts: PlanBreakdown, measured: Measured | None) -> str:
    held = "layers" if parts.plan.cuts == "graph" else "blocks"
    head = ["stage", held, "load per inference", "capacity", "added", "time per inference",
            "utilisation", "headroom"]  # fmt: skip
    if measured is not None:
        head += ["measured", "measured / predicted"]
    head.append("link delay")
    lines = ["<table><thead><tr>", *(f"<th>{h}</th>" for h in head), "</tr></thead><tbody>"]
    for row in parts.stages:
        load, rate = _UNIT[row.kind]
        numbers, names = _blocks(row, parts)
        cells = [
            html.escape(link_name(row.id) if row.kind == "link" else row.id)
            + (' <span class="mark">bottleneck</span>' if row.bottleneck else ""),
            html.escape(numbers + (f" ({names})" if names else "")),
            si(row.load, load),
            si(row.capacity, rate),
            f'<span class="bought">+{si(row.added, rate)}</span>' if row.added > 0
            else f"0 {rate}",
            si(row.seconds, "s"),
            _bar(row.utilisation, _SLOW if row.bottleneck else _PATH),
            si(row.headroom, "s"),
        ]  # fmt: skip
        if measured is not None:
            real = measured.stages.get(row.id)
            ratio = "" if real is None or row.seconds <= 0 else f"{real / row.seconds:.2f}"
            cells += ["" if real is None else si(real, "s"), ratio]
        cells.append(si(row.delay, "s") if row.kind == "link" else "")
        klass = ' class="slow"' if row.bottleneck else ""
        lines.append(f"<tr{klass}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _bought_for(up: UpgradeCost) -> str:
    """Which bound an upgrade serves, with the amounts when it serves both."""
    unit = _UNIT[up.kind][1]
    if up.for_interval > 0 and up.for_latency > 0:
        return (
            f"interval (+{si(up.for_interval, unit)}) + latency bound (+{si(up.for_latency, unit)})"
        )
    return "the latency bound" if up.for_latency > 0 else "the target interval"


def _memory_table(parts: PlanBreakdown) -> str:
    """Each path node's memory: what its stage needs, what it has after the upgrades, what
    the plan adds."""
    lines = ["<table><thead><tr><th>node</th><th>needs</th><th>has (after upgrades)</th>"
             "<th>added</th></tr></thead><tbody>"]  # fmt: skip
    for m in parts.plan.memory:
        has = "unlimited" if m.memory is None else si(m.memory, "B")
        added = f'<span class="bought">+{si(m.added, "B")}</span>' if m.added > 0 else "0 B"
        lines.append(f"<tr><td>{html.escape(m.id)}</td><td>{si(m.need, 'B')}</td>"
                     f"<td>{has}</td><td>{added}</td></tr>")  # fmt: skip
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _cost_table(parts: PlanBreakdown) -> str:
    if not parts.upgrades:
        return "<p>The plan buys nothing: the network meets the target as it is.</p>"
    lines = [f"<table><thead><tr><th>element</th><th>added</th><th>cost ({COST_UNIT})</th>"
             "<th>share</th><th>bought for</th></tr></thead><tbody>"]  # fmt: skip
    for up in parts.upgrades:
        name = link_name(up.id) if up.kind == "link" else up.id
        lines.append(
            f"<tr><td>{up.kind} {html.escape(name)}</td><td>+{si(up.amount, _UNIT[up.kind][1])}"
            f"</td><td>{up.cost:.6g}</td><td>{_bar(up.share, _BOUGHT)}</td>"
            f"<td>{_bought_for(up)}</td></tr>"
        )
    lines.append(f"<tr><th>total</th><td></td><th>{parts.plan.cost:.6g}</th><td></td></tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 84em; color: #222;
       padding: 0 1em; }
.wide { overflow-x: auto; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { padding: 0.3em 0.7em; border-bottom: 1px solid #ddd; text-align: right;
         white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
tr.slow td { background: #fdf0e4; }
.mark { color: #e67e22; font-weight: bold; font-size: 0.85em; }
.bought { color: #c0392b; }
.bar { display: inline-block; width: 6em; height: 0.7em; background: #eee;
       vertical-align: middle; }
.bar span { display: block; height: 100%; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dt { color: #666; } dd { margin: 0; }
figure { margin: 0; overflow-x: auto; }
"""


def plan_report_html(
    network: Network,
    parts: PlanBreakdown,
    *,
    title: str | None = None,
    measured: Measured | None = None,
    explanation: Explanation | None = None,
) -> str:
    """The plan report as one HTML page (see the module); ``explanation`` adds its section.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign.breakdown import plan_breakdown
    >>> net, vgg = inferplan.tiered(seed=1), inferplan.vgg16()
    >>> page = plan_report_html(net, plan_breakdown(net, vgg, inferplan.provision(
    ...     net, vgg, throughput=30)))
    >>> page.startswith("<!DOCTYPE html>") and "<svg" in page and "bottleneck" in page
    True
    """
    plan = parts.plan
    name = title or f"{plan.method} plan"
    facts = [
        ("method", f"{plan.method} ({plan.status})"),
        ("cost", cost(plan.cost)),
        ("interval", f"{si(plan.interval, 's')} ({1 / plan.interval:.4g} inferences/s)"
         if plan.interval > 0 else "0 s"),
        ("target", f"{si(plan.target_interval, 's')} ({1 / plan.target_interval:.4g} "
         "inferences/s)"),
        ("path", " -> ".join(plan.path)),
        ("bottleneck", (f"{plan.bottleneck.kind} " + (link_name(plan.bottleneck.id)
                        if plan.bottleneck.kind == "link" else plan.bottleneck.id))
         if plan.bottleneck else "none"),
    ]  # fmt: skip
    if plan.latency is not None:
        split = parts.latency_parts()
        facts.append(("latency", latency_sum(split.total, split.compute, split.transfer,
                                             split.propagation, plan.target_latency)
                      + " (one inference through the idle pipeline)"))  # fmt: skip
    if plan.target_latency is not None:
        facts.append(("latency bound", si(plan.target_latency, "s")))
    if measured is not None:
        facts.append(("measured interval", f"{si(measured.interval, 's')} (predicted "
                      f"{si(plan.interval, 's')}, ratio {measured.interval / plan.interval:.2f})"
                      if plan.interval > 0 else si(measured.interval, "s")))  # fmt: skip
        if measured.latency_median is not None:
            p95 = "" if measured.latency_p95 is None else f", p95 {si(measured.latency_p95, 's')}"
            planned = ("" if measured.latency_predicted is None else
                       f" (predicted {si(measured.latency_predicted, 's')})")  # fmt: skip
            facts.append(("measured latency",
                          f"median {si(measured.latency_median, 's')}{p95}{planned}"))  # fmt: skip
        if measured.queueing:
            facts.append(("queueing", measured.queueing))
        if measured.note:
            facts.append(("run", measured.note))
    return html_page(name, facts, [
        "<h2>The plan on the network</h2>",
        f"<figure>{_svg(network, parts)}</figure>",
        "<h2>Stages</h2>",
        "<p>Each stage's time per inference after the upgrades; utilisation is that time over "
        "the interval, headroom the time it waits per inference.</p>",
        f'<div class="wide">{_stage_table(parts, measured)}</div>',
        "<h2>Memory</h2>",
        _memory_table(parts),
        "<h2>Cost</h2>",
        _cost_table(parts),
        *_why(explanation),
    ])  # fmt: skip


def html_page(name: str, facts: Sequence[tuple[str, str]], body: Sequence[str]) -> str:
    """A self-contained report page: its title ``name``, the ``facts`` as a list of terms and
    values, then the ``body``'s HTML."""
    summary = "".join(f"<dt>{k}</dt><dd>{html.escape(v)}</dd>" for k, v in facts)
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(name)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(name)}</h1>",
        f"<dl>{summary}</dl>",
        *body,
        "</body></html>",
        "",
    ])  # fmt: skip


def _why(explanation: Explanation | None) -> list[str]:
    """The section saying why the plan (none without an explanation)."""
    if explanation is None:
        return []
    items = "".join(f"<li>{html.escape(line)}</li>" for line in explanation.lines())
    return ["<h2>Why this plan</h2>", f"<ul>{items}</ul>",
            f"<p>Margins: {html.escape(explanation.how)}.</p>"]  # fmt: skip


def plan_dot(network: Network, parts: PlanBreakdown) -> str:
    """The plan as a GraphViz DOT digraph: the network, the path bold and blue with each path
    node's blocks, upgrades in red and the bottleneck orange.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign.breakdown import plan_breakdown
    >>> net, vgg = inferplan.tiered(seed=1), inferplan.vgg16()
    >>> dot = plan_dot(net, plan_breakdown(net, vgg, inferplan.provision(net, vgg, throughput=30)))
    >>> dot.splitlines()[0]
    'digraph plan {'
    """
    stage = {row.id: row for row in parts.stages}

    def quoted(text: str) -> str:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'

    lines = ["digraph plan {", "  rankdir=LR;", '  node [shape=circle, fontname="Helvetica"];']
    plan = parts.plan
    caption = [f"cost {cost(plan.cost)}, interval {si(plan.interval, 's')}"]
    if plan.latency is not None:
        split = parts.latency_parts()
        caption.append(
            "latency "
            + latency_sum(
                split.total, split.compute, split.transfer, split.propagation, plan.target_latency
            )
        )
    lines.append(f"  labelloc=t; label={quoted(chr(10).join(caption))};")
    for node in network.nodes:
        row = stage.get(node.id)
        label = node.id
        attrs = []
        if row is not None:
            numbers, names = _blocks(row, parts)
            if parts.plan.cuts == "graph":
                label += f"\n{names or numbers}"
            else:
                label += f"\n{'blocks ' if row.blocks else ''}{numbers}"
            if row.added > 0:
                label += f"\n+{si(row.added, 'FLOP/s')}"
            colour = _SLOW if row.bottleneck else _PATH
            width = 3 if row.bottleneck else 1
            attrs += ["style=filled", f"fillcolor={quoted(_PATH)}", "fontcolor=white",
                      f"color={quoted(colour)}", f"penwidth={width}"]  # fmt: skip
        else:
            attrs.append(f"color={quoted(_IDLE)}")
        attrs.insert(0, f"label={quoted(label)}")
        lines.append(f"  {quoted(node.id)} [{', '.join(attrs)}];")
    for link in network.links:
        row = stage.get(f"{link.source}->{link.target}")
        attrs = []
        if row is not None:
            colour = _SLOW if row.bottleneck else _PATH
            attrs += [f"color={quoted(colour)}", "penwidth=3"]
            words = [f"+{si(row.added, 'bit/s')}"] if row.added > 0 else []
            words += [f"delay {si(row.delay, 's')}"] if row.delay > 0 else []
            words += ["bottleneck"] if row.bottleneck else []
            if parts.plan.cuts == "graph":  # what crosses the cut at an ideal, by name
                words.insert(0, f"sends {_blocks(row, parts)[1]}")
            if words:
                attrs.append(f"label={quoted(' '.join(words))}")
                tone = _SLOW if row.bottleneck else _BOUGHT if row.added > 0 else _PATH
                attrs.append(f"fontcolor={quoted(tone)}")
        else:
            attrs.append(f"color={quoted(_IDLE)}")
        lines.append(f"  {quoted(link.source)} -> {quoted(link.target)} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_plan_report(
    network: Network,
    parts: PlanBreakdown,
    *,
    html_path: str | Path | None = None,
    dot_path: str | Path | None = None,
    title: str | None = None,
    measured: Measured | None = None,
    explanation: Explanation | None = None,
) -> list[Path]:
    """Write the HTML report (with ``explanation``'s section when given) and/or the DOT file;
    the paths written."""
    written = []
    if html_path is not None:
        path = Path(html_path)
        page = plan_report_html(network, parts, title=title, measured=measured,
                                explanation=explanation)  # fmt: skip
        path.write_text(page, encoding="utf-8")
        written.append(path)
    if dot_path is not None:
        path = Path(dot_path)
        path.write_text(plan_dot(network, parts), encoding="utf-8")
        written.append(path)
    return written
