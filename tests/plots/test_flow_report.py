"""The flow plan report: the pipelines drawn by rate, the layout, loads and the cut."""

from __future__ import annotations

import json
import re

from inferplan import Link, Network, Node, Profile
from inferplan.codesign import compile_instance
from inferplan.codesign.pipelines.flow import flow_throughput
from inferplan.network.io import save_network
from inferplan.plots.flow_report import FlowMeasured, flow_report_html
from tests.cli import app, runner


def _net() -> Network:
    """``a`` twice as fast as ``b``, side by side: two pipelines, 2:1."""
    nodes = (Node("s", 1e-3), Node("a", 4.0), Node("b", 2.0), Node("t", 1e-3))
    pairs = (("s", "a"), ("s", "b"), ("a", "t"), ("b", "t"))
    return Network(nodes=nodes, links=tuple(Link(u, v, 1e3) for u, v in pairs),
                   source="s", target="t")  # fmt: skip


PROFILE = Profile("p", flops=(1.0, 1.0), activation_bits=(1.0, 1.0, 1.0))


def _plan():  # type: ignore[no-untyped-def]
    return flow_throughput(compile_instance(_net(), PROFILE, require_acyclic=False))


def test_links_are_as_wide_as_their_flow():
    plan = _plan()
    page = flow_report_html(_net(), plan)
    lines = re.findall(r'<line [^>]*stroke-width="([\d.]+)"[^>]*><title>([^<]+)</title>', page)
    by_link = {title.split(":")[0]: float(w) for w, title in lines}
    assert len(by_link) == 4
    # the flow through a is twice that through b (its capacity), so its lines are wider
    sa = next(w for k, w in by_link.items() if k.startswith("s") and "a" in k)
    sb = next(w for k, w in by_link.items() if k.startswith("s") and "b" in k)
    assert sa > sb > 1.2


def test_pipelines_are_bars_as_thick_as_their_rate():
    plan = _plan()
    page = flow_report_html(_net(), plan)
    second = page.split("<svg")[2]
    heights = [float(h) for h in re.findall(r'<rect [^>]*height="([\d.]+)"', second)]
    rates = [p.rate for p in plan.pipelines for _ in p.path]
    assert len(heights) == len(rates)
    order = sorted(range(len(rates)), key=rates.__getitem__)
    assert [heights[k] for k in order] == sorted(heights)


def test_the_page_shows_layout_loads_cut_and_what_a_run_measured():
    plan = _plan()
    measured = FlowMeasured(2.9, [p.rate * 0.95 for p in plan.pipelines], "a note")
    page = flow_report_html(_net(), plan, measured=measured)
    for v, (a, b) in plan.layout.items():
        assert f"<td>{v}</td><td>{a + 1}–{b}</td>" in page
    assert "bottleneck" in page and "measured (inferences/s)" in page and "a note" in page
    assert page.count("<tr><td>node ") + page.count("<tr><td>link ") == len(plan.loads)
    assert "measured (inferences/s)" not in flow_report_html(_net(), plan)


def test_the_cli_writes_the_report_for_flows_only(tmp_path):
    net = tmp_path / "net.json"
    save_network(_net(), net)
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps(PROFILE.to_dict()))
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["throughput", str(net), str(prof), "--pipelines", "any",
                                 "--report", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!DOCTYPE html>")
    refused = runner.invoke(app, ["throughput", str(net), str(prof), "--report", str(out)])
    assert refused.exit_code == 2 and "--report" in refused.stderr
