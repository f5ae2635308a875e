"""The report of a flow plan (many pipelines at once): one self-contained HTML page.

The page holds the network drawn as inline SVG, each link as wide as the flow it carries
(labelled in inferences/s), each node with the blocks it holds, the bottleneck cut in orange;
the pipelines drawn one under another, each bar as thick as its rate, with the blocks each of
its nodes runs; the layout; each node's and link's load, capacity, utilisation and headroom;
and, for a run, the measured throughput of each pipeline beside the predicted one. Drawn by
hand, as the one-path report (:mod:`~inferplan.plots.report`), with nothing from elsewhere.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from inferplan.codesign.pipelines.result import FlowPlan
from inferplan.network.network import Network
from inferplan.plots.plan import layered_positions
from inferplan.plots.report import _BOUGHT, _IDLE, _PATH, _SLOW, _bar, _label, html_page
from inferplan.units import cost, link_name, si

__all__ = ["FlowMeasured", "flow_report_html", "write_flow_report"]

_UNIT = {"node": "FLOP/s", "link": "bit/s"}


@dataclass(frozen=True)
class FlowMeasured:
    """What a flow run measured: the total throughput, each pipeline's (in the plan's order)
    and a line to show with them."""

    throughput: float
    pipelines: Sequence[float]
    note: str | None = None


def _flows(plan: FlowPlan) -> dict[tuple[str, str], float]:
    rate: dict[tuple[str, str], float] = {}
    for p in plan.pipelines:
        for u, v in zip(p.path, p.path[1:], strict=False):
            rate[u, v] = rate.get((u, v), 0.0) + p.rate
    return rate


def _network_svg(network: Network, plan: FlowPlan) -> str:
    """The network: each link as wide as its flow, each node with its blocks."""
    pos = layered_positions(network)
    xs = [x for x, _ in pos.values()]
    ys = [y for _, y in pos.values()]
    span_x, span_y = max(xs) - min(xs) or 1.0, max(ys) - min(ys) or 1.0
    width = max(480, 190 * len({round(x, 6) for x in xs}))
    height = max(240, 120 * max(1, len({round(y, 6) for y in ys})) + 80)
    margin_x, margin_y, radius = 70, 60, 22.0

    def at(v: str) -> tuple[float, float]:
        x, y = pos[v]
        return (margin_x + (x - min(xs)) / span_x * (width - 2 * margin_x),
                margin_y + (max(ys) - y) / span_y * (height - 2 * margin_y))  # fmt: skip

    flows = _flows(plan)
    cut = set(plan.bottleneck)
    added = {x.id: x.added for x in plan.loads}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="the flow on the network">']
    for link in network.links:
        name = f"{link.source}->{link.target}"
        (x0, y0), (x1, y1) = at(link.source), at(link.target)
        length = max(((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5, 1e-9)
        dx, dy = (x1 - x0) / length * radius, (y1 - y0) / length * radius
        rate = flows.get((link.source, link.target), 0.0)
        colour = _SLOW if name in cut else _PATH if rate > 0 else _IDLE
        thick = 1.2 if rate <= 0 else 1.5 + 10.0 * rate / plan.throughput
        out.append(f'<line x1="{x0 + dx:.1f}" y1="{y0 + dy:.1f}" x2="{x1 - dx:.1f}" '
                   f'y2="{y1 - dy:.1f}" stroke="{colour}" stroke-width="{thick:.2f}" '
                   f'stroke-opacity="0.8"><title>{html.escape(link_name(name))}: '
                   f"{rate:.4g} inferences/s</title></line>")  # fmt: skip
        if rate > 0:
            out.append(_label((x0 + x1) / 2, (y0 + y1) / 2 - 6, f"{rate:.3g}/s", colour))
        if added.get(name, 0.0) > 0:
            out.append(_label((x0 + x1) / 2, (y0 + y1) / 2 + 12,
                              f"+{si(added[name], 'bit/s')}", _BOUGHT))  # fmt: skip
    for node in network.nodes:
        x, y = at(node.id)
        held = plan.layout.get(node.id)
        ring = _SLOW if node.id in cut else _PATH if held else _IDLE
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius}" '
                   f'fill="{_PATH if held else "white"}" stroke="{ring}" '
                   f'stroke-width="{4 if ring == _SLOW else 1.5}"><title>'
                   f"{html.escape(node.id)}</title></circle>")  # fmt: skip
        out.append(f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle" font-weight="bold" '
                   f'font-size="12" fill="{"white" if held else "#555"}">'
                   f"{html.escape(node.id)}</text>")  # fmt: skip
        below = [(f"blocks {held[0] + 1}–{held[1]}", _PATH)] if held else []
        if added.get(node.id, 0.0) > 0:
            below.append((f"+{si(added[node.id], 'FLOP/s')}", _BOUGHT))
        if node.id in cut:
            below.append(("bottleneck", _SLOW))
        for k, (text, colour) in enumerate(below):
            out.append(_label(x, y + radius + 14 + 14 * k, text, colour))
    out.append("</svg>")
    return "\n".join(out)


def _pipelines_svg(plan: FlowPlan) -> str:
    """The pipelines one under another, each bar as thick as its rate, each of its nodes a
    segment labelled with the blocks it runs there (or "relays")."""
    longest = max(len(p.path) for p in plan.pipelines)
    cell, left = 110.0, 150.0
    width = int(left + cell * longest + 20)
    most = max(p.rate for p in plan.pipelines)
    rows, y = [], 20.0
    for k, p in enumerate(plan.pipelines):
        thick = 4.0 + 26.0 * p.rate / most
        y += thick / 2 + 18
        rows.append(_label(left / 2, y + 4, f"{k + 1}: {p.rate:.4g}/s "
                           f"({p.rate / plan.throughput:.0%})", "#333"))  # fmt: skip
        done = 0
        for h, (v, b) in enumerate(zip(p.path, p.partition, strict=True)):
            x = left + cell * h
            runs = b > done
            rows.append(f'<rect x="{x:.1f}" y="{y - thick / 2:.1f}" width="{cell - 6:.1f}" '
                        f'height="{thick:.1f}" fill="{_PATH if runs else _IDLE}" '
                        f'fill-opacity="0.85"><title>{html.escape(v)}</title></rect>')  # fmt: skip
            what = f"{v}: {done + 1}–{b}" if runs else f"{v}: relays"
            rows.append(_label(x + (cell - 6) / 2, y - thick / 2 - 4, what, "#333"))
            done = b
        y += thick / 2 + 6
    height = int(y + 14)
    return "\n".join([f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
                      f'width="{width}" height="{height}" role="img" '
                      f'aria-label="the pipelines by rate">', *rows, "</svg>"])  # fmt: skip


def flow_report_html(network: Network, plan: FlowPlan, *, title: str | None = None,
                     measured: FlowMeasured | None = None) -> str:  # fmt: skip
    """The flow plan's report as one HTML page (see the module).

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance
    >>> from inferplan.codesign.pipelines.flow import flow_throughput
    >>> net = inferplan.load_network("examples/network.json")
    >>> plan = flow_throughput(compile_instance(net, inferplan.load_profile("vgg16"),
    ...                                         require_acyclic=False, cuts="chain"))
    >>> page = flow_report_html(net, plan)
    >>> page.startswith("<!DOCTYPE html>") and page.count("<svg") == 2
    True
    """
    name = title or f"{plan.method} plan"
    facts = [("method", f"{plan.method} ({plan.status}, gap {plan.gap:.2g})"),
             ("throughput", f"{plan.throughput:.6g} inferences/s (interval "
                            f"{si(plan.interval, 's')})"),
             ("cost", cost(plan.cost)),
             ("pipelines", str(len(plan.pipelines))),
             ("bottleneck cut", ", ".join(link_name(x) if "->" in x else x
                                          for x in plan.bottleneck) or "none")]  # fmt: skip
    if plan.target_throughput is not None:
        facts.insert(2, ("target", f"{plan.target_throughput:.6g} inferences/s"))
    if measured is not None:
        ratio = measured.throughput / plan.throughput
        facts.append(("measured", f"{measured.throughput:.6g} inferences/s (predicted "
                                  f"{plan.throughput:.6g}, ratio {ratio:.3f})"))  # fmt: skip
        if measured.note:
            facts.append(("run", measured.note))
    heads = ["", "path", "partition", "rate (inferences/s)", "share"]
    if measured is not None:
        heads.append("measured (inferences/s)")
    rows = []
    for k, p in enumerate(plan.pipelines):
        cells = [str(k + 1), " → ".join(p.path), " ".join(map(str, p.partition)),
                 f"{p.rate:.6g}", f"{p.rate / plan.throughput:.1%}"]  # fmt: skip
        if measured is not None:
            cells.append(f"{measured.pipelines[k]:.6g}")
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    pipelines = (f"<table><tr>{''.join(f'<th>{h}</th>' for h in heads)}</tr>"
                 + "".join(rows) + "</table>")  # fmt: skip
    layout = ("<table><tr><th>node</th><th>blocks</th></tr>"
              + "".join(f"<tr><td>{html.escape(v)}</td><td>{a + 1}–{b}</td></tr>"
                        for v, (a, b) in plan.layout.items()) + "</table>")  # fmt: skip
    loads = ["<table><tr><th>element</th><th>load</th><th>capacity</th><th>utilisation</th>"
             "<th>headroom</th><th>added</th><th></th></tr>"]
    for x in plan.loads:
        unit = _UNIT[x.kind]
        share = x.load / x.capacity if x.capacity > 0 else 0.0
        slow = x.id in plan.bottleneck
        label = link_name(x.id) if x.kind == "link" else x.id
        loads.append(f"<tr><td>{x.kind} {html.escape(label)}</td>"
                     f"<td>{si(x.load, unit)}</td><td>{si(x.capacity, unit)}</td>"
                     f"<td>{_bar(share, _SLOW if slow else _PATH)}</td>"
                     f"<td>{si(x.headroom, unit)}</td><td>{si(x.added, unit)}</td>"
                     f"<td>{'bottleneck' if slow else ''}</td></tr>")  # fmt: skip
    loads.append("</table>")
    return html_page(name, facts, [
        "<h2>The flow on the network</h2>",
        "<p>Each link as wide as the inferences/s it carries; the bottleneck cut in orange.</p>",
        f"<figure>{_network_svg(network, plan)}</figure>",
        "<h2>Pipelines</h2>",
        "<p>Each bar as thick as its pipeline's rate; each segment a node, with the blocks it "
        "runs for that pipeline (a node runs its one range for every pipeline through it).</p>",
        f"<figure>{_pipelines_svg(plan)}</figure>",
        f'<div class="wide">{pipelines}</div>',
        "<h2>Layout</h2>",
        layout,
        "<h2>Loads</h2>",
        "<p>What each node (FLOP/s) and link (bit/s) carries at the plan's rate, after the "
        "upgrades.</p>",
        f'<div class="wide">{"".join(loads)}</div>',
    ])  # fmt: skip


def write_flow_report(path: Path, network: Network, plan: FlowPlan, *, title: str | None = None,
                      measured: FlowMeasured | None = None) -> Path:  # fmt: skip
    """Write :func:`flow_report_html` to ``path``; return it."""
    path.write_text(flow_report_html(network, plan, title=title, measured=measured),
                    encoding="utf-8")  # fmt: skip
    return path
