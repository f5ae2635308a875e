"""The plan report: one self-contained HTML page (checked in headless Chromium), the plan as
DOT (checked by GraphViz), and the numbers they show, checked from the definitions."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

import inferplan
from inferplan.codesign.breakdown import plan_breakdown
from inferplan.plots.report import Measured, plan_dot, plan_report_html
from tests.browser import screenshot
from tests.cli import app, runner

ROOT = Path(__file__).parents[2]
NETWORK = ROOT / "examples" / "network.json"


class _Tables(HTMLParser):
    """Every table row's cells as text, and every tag and attribute seen."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _parsed(page: str) -> _Tables:
    tables = _Tables()
    tables.feed(page)
    return tables


def _plan(throughput: float = 30.0):
    net, vgg = inferplan.load_network(NETWORK), inferplan.vgg16()
    return net, vgg, inferplan.provision(net, vgg, throughput=throughput)


def _stage_times(net, profile, plan) -> dict[str, float]:
    """Each stage's time per inference after the upgrades, from the definitions."""
    nodes = {n.id: n.capacity + plan.node_upgrades.get(n.id, 0.0) for n in net.nodes}
    bought = {(u.source, u.target): u.amount for u in plan.link_upgrades}
    links = {(e.source, e.target): e.capacity + bought.get((e.source, e.target), 0.0)
             for e in net.links}  # fmt: skip
    times, prev = {}, 0
    for k, v in enumerate(plan.path):
        done = plan.partition[k]
        times[v] = sum(profile.flops[prev:done]) / nodes[v]
        if k + 1 < len(plan.path):
            times[f"{v} -> {plan.path[k + 1]}"] = (
                profile.activation_bits[done] / links[v, plan.path[k + 1]]
            )
        prev = done
    return times


@pytest.mark.parametrize("throughput", [30.0, 8.0])
def test_the_stage_table_shows_each_stages_utilisation_and_headroom(throughput):
    net, vgg, plan = _plan(throughput)
    page = plan_report_html(net, plan_breakdown(net, vgg, plan))
    times = _stage_times(net, vgg, plan)
    interval = max(times.values())
    rows: dict[str, list[str]] = {}
    for r in _parsed(page).rows:  # the stage table's rows, before the memory table's
        if r and r[0].removesuffix(" bottleneck") in times:
            rows.setdefault(r[0].removesuffix(" bottleneck"), r)
    assert list(rows) == list(times)  # every stage, in path order
    for stage, seconds in times.items():
        row = rows[stage]
        assert f"{seconds / interval:.0%}" in row[6]
        assert inferplan.units.si(interval - seconds, "s") == row[7]
        # the bottleneck mark sits on the plan's bottleneck and nowhere else
        named = inferplan.units.link_name(plan.bottleneck.id)
        is_bottleneck = stage == (named if plan.bottleneck.kind == "link" else plan.bottleneck.id)
        assert row[0].endswith(" bottleneck") == is_bottleneck


def test_the_cost_breakdown_adds_up_to_the_plans_cost():
    net, vgg, plan = _plan()
    parts = plan_breakdown(net, vgg, plan)
    assert sum(u.cost for u in parts.upgrades) == pytest.approx(plan.cost, rel=1e-12)
    linear = {n.id: n.price for n in net.nodes}
    for up in parts.upgrades:
        if up.kind == "node":
            assert up.cost == pytest.approx(linear[up.id] * plan.node_upgrades[up.id])
    rows = _parsed(plan_report_html(net, parts)).rows
    assert ["total", "", f"{plan.cost:.6g}", ""] in rows


def test_the_page_is_self_contained_and_names_what_runs_where():
    net, vgg, plan = _plan()
    page = plan_report_html(net, plan_breakdown(net, vgg, plan), title="x")
    tags = _parsed(page).tags
    assert not [t for t, _ in tags if t in ("script", "link", "img", "iframe")]
    urls = [v for _, a in tags for k, v in a.items() if k in ("src", "href") and v]
    assert urls == []
    assert "<svg" in page and "blocks 1–16" in page and "conv1_1 … fc8" in page


def test_measured_times_stand_beside_the_predicted_ones():
    net, vgg, plan = _plan()
    measured = Measured(interval=0.04, stages={"t": 0.05, "s->a1": 0.02},
                        latency_median=0.3, latency_p95=0.4, note="a run")  # fmt: skip
    rows = _parsed(plan_report_html(net, plan_breakdown(net, vgg, plan), measured=measured)).rows
    by_stage: dict[str, list[str]] = {}
    for r in rows:  # the stage table's rows, before the memory table's
        if r:
            by_stage.setdefault(r[0].removesuffix(" bottleneck"), r)
    predicted_t = _stage_times(net, vgg, plan)["t"]
    assert by_stage["t"][8] == "50 ms" and by_stage["t"][9] == f"{0.05 / predicted_t:.2f}"
    assert by_stage["s -> a1"][8] == "20 ms" and by_stage["a1"][8] == ""


def test_the_dot_file_is_the_network_with_the_path_drawn_bold():
    net, vgg, plan = _plan()
    dot = plan_dot(net, plan_breakdown(net, vgg, plan))
    edges = re.findall(r'^  "([^"]+)" -> "([^"]+)" \[(.*)\];$', dot, re.MULTILINE)
    assert {(u, v) for u, v, _ in edges} == {(e.source, e.target) for e in net.links}
    on_path = set(zip(plan.path[:-1], plan.path[1:], strict=True))
    assert {(u, v) for u, v, attrs in edges if "penwidth=3" in attrs} == on_path
    if shutil.which("dot") is None:
        pytest.skip("no GraphViz dot on this machine: the DOT was checked, not laid out")
    laid = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert laid.returncode == 0 and not laid.stderr, laid.stderr
    assert all(f"<title>{v}</title>" in laid.stdout for v in plan.path)


def test_provision_writes_the_report_and_the_dot(tmp_path):
    page, dot = tmp_path / "plan.html", tmp_path / "plan.dot"
    result = runner.invoke(app, ["provision", str(NETWORK), "vgg16", "--throughput", "30",
                                 "--report", str(page), "--dot", str(dot), "--json"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [f"written: {page}", f"written: {dot}"]
    assert page.read_text().startswith("<!DOCTYPE html>") and dot.read_text().startswith("digraph")
    services = runner.invoke(app, ["provision", str(NETWORK), "--services",
                                   str(ROOT / "examples" / "services.yaml"), "--report",
                                   str(page)])  # fmt: skip
    assert services.exit_code == 2 and "--report is for one profile" in services.stderr


def test_a_browser_renders_the_report_with_no_console_errors(tmp_path):
    from PIL import Image

    net, vgg, plan = _plan()
    page = tmp_path / "plan.html"
    page.write_text(plan_report_html(net, plan_breakdown(net, vgg, plan)))
    png = tmp_path / "plan.png"
    assert screenshot(page, png) == []
    pixels = Image.open(png).convert("RGB")
    colours = pixels.getcolors(maxcolors=1 << 20) or []
    inked = sum(n for n, rgb in colours if rgb != (255, 255, 255))
    assert inked > 0.02 * pixels.width * pixels.height  # not blank
    # the path's blue and the bottleneck's orange are drawn
    drawn = {rgb for _, rgb in colours}
    assert (0x1F, 0x77, 0xB4) in drawn and (0xE6, 0x7E, 0x22) in drawn


def test_the_browser_check_sees_a_console_error_and_a_blank_page(tmp_path):
    from PIL import Image

    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><script>missing();</script></body></html>")
    png = tmp_path / "broken.png"
    logged = screenshot(broken, png)
    assert len(logged) == 1 and "missing is not defined" in logged[0]
    colours = Image.open(png).convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert {rgb for _, rgb in colours} == {(255, 255, 255)}


def test_a_plan_cut_at_ideals_names_the_layers_each_node_runs():
    net = inferplan.load_network(NETWORK)
    graph = inferplan.load_profile(str(ROOT / "examples" / "two-branch.yaml"))
    plan = inferplan.provision(net, graph, throughput=20)
    assert plan.cuts == "graph"
    parts = plan_breakdown(net, graph, plan)
    page = plan_report_html(net, parts)
    times = [row.seconds for row in parts.stages]
    assert max(times) == pytest.approx(plan.interval, rel=1e-12)  # counted by ideals
    for node, layers in zip(plan.path, plan.layers, strict=True):
        row = next(r for r in _parsed(page).rows if r and r[0].removesuffix(" bottleneck") == node)
        if layers:
            word = "layer" if len(layers) == 1 else "layers"
            assert row[1].startswith(f"{len(layers)} {word} ({', '.join(layers[:3])}")
        else:
            assert row[1] == "forwards"


def test_a_plan_cut_at_ideals_names_what_each_link_sends_in_the_page_and_the_dot():
    net = inferplan.load_network(NETWORK)
    graph = inferplan.load_profile(str(ROOT / "examples" / "two-branch.yaml"))
    plan = inferplan.provision(net, graph, throughput=20)
    parts = plan_breakdown(net, graph, plan)
    page, dot = plan_report_html(net, parts), plan_dot(net, parts)
    rows = _parsed(page).rows
    assert rows[0][1] == "layers"  # the column's heading
    links = list(zip(plan.path, plan.path[1:], strict=False))
    assert any(len(sent) > 1 for sent in plan.sends)  # a cut inside the branches
    for (u, v), sent in zip(links, plan.sends, strict=True):
        row = next(r for r in rows if r and r[0].removesuffix(" bottleneck") == f"{u} -> {v}")
        assert row[1] == f"sends ({', '.join(sent)})"
        edge = next(line for line in dot.splitlines() if line.startswith(f'  "{u}" -> "{v}"'))
        assert f'label="sends {", ".join(sent)}' in edge
    for node, layers in zip(plan.path, plan.layers, strict=True):
        line = next(x for x in dot.splitlines() if x.startswith(f'  "{node}" [label='))
        assert ("\\n" + ", ".join(layers[:3]) if layers else "\\nforwards") in line
        assert "blocks" not in line
