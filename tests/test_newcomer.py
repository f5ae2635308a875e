"""What a newcomer trips on: messages that name the cause, files `validate` knows, units."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferplan.units import si
from tests.cli import app, invoke_json, runner

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _network(tmp_path: Path, edit: object) -> Path:
    data = json.loads((EXAMPLES / "network.json").read_text())
    edit(data)  # type: ignore[operator]
    path = tmp_path / "net.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("method", ["psg", "milp"])
def test_a_latency_below_the_propagation_delays_blames_them_not_caps(
    tmp_path: Path, method: str
) -> None:
    def delays(data: dict) -> None:  # type: ignore[type-arg]
        for k, link in enumerate(data["links"]):
            link["delay_s"] = 0.1 + 0.05 * k

    path = _network(tmp_path, delays)
    data = json.loads(path.read_text())
    graph = nx.DiGraph()
    graph.add_weighted_edges_from((e["source"], e["target"], e["delay_s"]) for e in data["links"])
    floor = nx.shortest_path_length(graph, "s", "t", weight="weight")
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "30",
                                 "--latency", str(floor / 2), "--method", method])  # fmt: skip
    assert result.exit_code == 3, result.stderr
    assert "capacity caps" not in result.stderr
    assert "propagation delays" in result.stderr and f"{floor:.6g} s" in result.stderr
    # with the bound above the floor, a plan exists: the floor is the cause, not a cap
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "30",
                                 "--latency", str(floor * 1.5), "--method", method])  # fmt: skip
    assert result.exit_code == 0, result.stderr


def test_a_latency_a_cap_forbids_still_blames_the_caps(tmp_path: Path) -> None:
    def capped(data: dict) -> None:  # type: ignore[type-arg]
        for element in data["nodes"] + data["links"]:
            element["cost"] = {"kind": "linear", "price": element.pop("price"), "max": 1.0}

    path = _network(tmp_path, capped)
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "0.5",
                                 "--latency", "1e-6"])  # fmt: skip
    assert result.exit_code == 3, result.stderr
    assert "capacity caps" in result.stderr and "propagation" not in result.stderr


@pytest.mark.parametrize(
    ("where", "typo", "meant"),
    [(("nodes", 1), "capcity", "capacity"), ((), "sorce", "source"),
     (("links", 0), "pirce", "price")],
)  # fmt: skip
def test_a_typo_is_named_with_the_nearest_field(
    tmp_path: Path, where: tuple[object, ...], typo: str, meant: str
) -> None:
    def misspell(data: dict) -> None:  # type: ignore[type-arg]
        here = data
        for part in where:
            here = here[part]
        here[typo] = here.pop(meant)

    path = _network(tmp_path, misspell)
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "30"])
    assert result.exit_code == 2
    assert f"{typo}: unknown field (did you mean '{meant}'?)" in result.stderr
    assert "missing field" not in result.stderr


def test_a_typo_in_a_services_file_is_named(tmp_path: Path) -> None:
    text = (EXAMPLES / "services.yaml").read_text().replace("throughput: 10", "throughpt: 10")
    (tmp_path / "s.yaml").write_text(text)
    result = runner.invoke(app, ["provision", str(EXAMPLES / "network.json"), "--services",
                                 str(tmp_path / "s.yaml")])  # fmt: skip
    assert result.exit_code == 2
    assert "throughpt: unknown field (did you mean 'throughput'?)" in result.stderr


def test_a_far_off_unknown_field_gets_no_suggestion(tmp_path: Path) -> None:
    path = _network(tmp_path, lambda d: d["nodes"][0].update(zzzz=1))
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "30"])
    assert result.exit_code == 2
    assert "zzzz: unknown field" in result.stderr and "did you mean" not in result.stderr


def test_validate_knows_the_channel_coinfer_fit_writes(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(str(1.0 + (k * 7919) % 13) for k in range(200)))
    out = tmp_path / "channel.yaml"
    fit = runner.invoke(app, ["coinfer-fit", str(trace), "--states", "3", "--out", str(out)])
    assert fit.exit_code == 0, fit.stderr
    result = runner.invoke(app, ["validate", str(out)])
    assert result.exit_code == 0, result.stderr
    assert "channel" in result.stdout and "markov" in result.stdout
    out.write_text(out.read_text().replace("markov", "markow"))
    result = runner.invoke(app, ["validate", str(out)])
    assert result.exit_code == 2 and "unknown channel kind 'markow'" in result.stderr


def test_validate_knows_python_model_files_without_running_them(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(EXAMPLES / "mymodels.py")])
    assert result.exit_code == 0, result.stderr
    assert "make_net, UNet" in result.stdout and "not imported" in result.stdout
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit(9)\nx = (\n")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2 and "not Python (line 2)" in result.stderr


def test_validate_profiles_an_onnx_model() -> None:
    pytest.importorskip("onnx")
    result = runner.invoke(app, ["validate", str(EXAMPLES / "model.onnx")])
    assert result.exit_code == 0, result.stderr
    assert "ONNX model" in result.stdout and "blocks" in result.stdout
    assert "UTF-8" not in result.stderr


@given(st.floats(1e-12, 1e15), st.sampled_from(["bit/s", "FLOP/s", "B", "bit"]))
def test_counted_units_never_get_a_prefix_below_one(value: float, unit: str) -> None:
    shown = si(value, unit)
    number, prefixed = shown.split(" ")
    assert prefixed[0] not in "mµn"
    scale = {"T": 1e12, "G": 1e9, "M": 1e6, "k": 1e3}.get(prefixed[0], 1.0)
    assert float(number) * scale == pytest.approx(value, rel=1e-3)


def test_seconds_keep_their_prefixes_below_one() -> None:
    assert si(0.0206, "s") == "20.6 ms"


def test_costs_are_printed_with_their_unit() -> None:
    result = runner.invoke(app, ["provision", str(EXAMPLES / "network.json"), "vgg16",
                                 "--throughput", "30"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.endswith("price units"), first


ROOT = EXAMPLES.parent


def test_the_readme_runs_no_model_of_the_test_suite() -> None:
    # `tests.runtime.models` imports only from the clone's root: a user's shell is elsewhere
    commands = [line for line in (ROOT / "README.md").read_text().splitlines()
                if line.startswith("$ inferplan")]  # fmt: skip
    assert commands
    assert not [line for line in commands if "tests." in line]


def test_docs_say_what_docs_figures_holds() -> None:
    figures = sorted((ROOT / "docs" / "figures").glob("*.png"))
    text = (ROOT / "docs" / "services.md").read_text()
    if figures:
        assert "the docs hold no figures" not in text


def test_no_stray_option_line_in_the_codesign_docs() -> None:
    lines = (ROOT / "docs" / "codesign.md").read_text().splitlines()
    assert not [line for line in lines if line.strip().startswith("--seed")]


def _delayed(tmp_path: Path) -> Path:
    def delays(data: dict) -> None:  # type: ignore[type-arg]
        for k, link in enumerate(data["links"]):
            link["delay_s"] = 0.005 * (k + 1)

    return _network(tmp_path, delays)


def test_the_latency_is_shown_as_the_sum_of_its_parts(tmp_path: Path) -> None:
    import inferplan

    path = _delayed(tmp_path)
    out = invoke_json(["provision", str(path), "vgg16", "--throughput", "30",
                       "--latency", "0.12", "--json"])  # fmt: skip
    data = json.loads(path.read_text())
    delay = {(e["source"], e["target"]): e["delay_s"] for e in data["links"]}
    hops = list(zip(out["path"], out["path"][1:], strict=False))
    parts = out["latency_parts"]
    assert parts["propagation"] == pytest.approx(sum(delay[h] for h in hops), rel=1e-12)
    # compute: each node's blocks over its capacity after the upgrades, from the files alone
    flops = inferplan.vgg16().flops
    capacity = {n["id"]: n["capacity"] for n in data["nodes"]}
    added = {u["id"]: u["amount"] for u in out.get("node_upgrades_list", [])}
    added = out["node_upgrades"] if isinstance(out.get("node_upgrades"), dict) else added
    bounds = [0, *out["partition"]]
    compute = sum(sum(flops[a:b]) / (capacity[v] + added.get(v, 0.0))
                  for v, a, b in zip(out["path"], bounds, bounds[1:], strict=False))  # fmt: skip
    assert parts["compute"] == pytest.approx(compute, rel=1e-9)
    assert parts["total"] == pytest.approx(out["latency"], rel=1e-12)
    assert parts["total"] == pytest.approx(
        parts["compute"] + parts["transfer"] + parts["propagation"], rel=1e-12
    )
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "30",
                                 "--latency", "0.12"])  # fmt: skip
    assert "link delays (bound 120 ms)" in result.stdout


def test_the_report_shows_the_bound_memory_delays_and_why_each_upgrade(tmp_path: Path) -> None:
    path = _delayed(tmp_path)
    report, dot = tmp_path / "r.html", tmp_path / "r.dot"
    args = ["provision", str(path), "vgg16", "--throughput", "30", "--report", str(report),
            "--dot", str(dot), "--json"]  # fmt: skip
    invoke_json(args)
    page = report.read_text()
    assert "latency bound" not in page and "<h2>Memory</h2>" in page
    assert "link delays" in page and "link delays" in dot.read_text()
    invoke_json([*args, "--latency", "0.12"])
    page = report.read_text()
    assert "<dt>latency bound</dt><dd>120 ms</dd>" in page


@pytest.mark.parametrize("bound", [None, 0.11, 0.12, 0.14, 0.2])
def test_an_upgrade_serves_the_latency_bound_exactly_when_its_stage_beats_the_interval(
    tmp_path: Path, bound: float | None
) -> None:
    import inferplan
    from inferplan.codesign.breakdown import plan_breakdown

    net, vgg = inferplan.load_network(_delayed(tmp_path)), inferplan.vgg16()
    try:
        plan = inferplan.provision(net, vgg, throughput=30, latency=bound)
    except inferplan.Infeasible:
        pytest.skip("no plan under this bound")
    parts = plan_breakdown(net, vgg, plan)
    fast = {r.id for r in parts.stages
            if r.added > 0 and r.seconds < plan.target_interval * (1 - 1e-6)}  # fmt: skip
    assert {u.id for u in parts.upgrades if u.for_latency > 0} == fast
    for up in parts.upgrades:
        assert up.for_interval + up.for_latency == pytest.approx(up.amount, rel=1e-12)
    if bound is None:
        assert not fast


def test_dot_colours_only_the_bottleneck_label_as_the_bottleneck(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    dot = tmp_path / "g.dot"
    result = runner.invoke(app, ["provision", str(EXAMPLES / "network.json"),
                                 f"{EXAMPLES / 'mymodels.py'}:make_net", "--input-shape",
                                 "1,3,32,32", "--cuts", "graph", "--throughput", "400",
                                 "--dot", str(dot)])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    slow = "#e67e22"
    labelled = [line for line in dot.read_text().splitlines() if "->" in line and "label=" in line]
    assert labelled
    for line in labelled:
        assert ("bottleneck" in line) == (f'fontcolor="{slow}"' in line), line


def test_the_shipped_delays_example_teaches_latency() -> None:
    path = EXAMPLES / "network-delays.json"
    data = json.loads(path.read_text())
    assert all(link.get("delay_s", 0) > 0 for link in data["links"])
    free = invoke_json(["provision", str(path), "vgg16", "--throughput", "30", "--json"])
    bound = 0.8 * free["latency"]
    out = invoke_json(["provision", str(path), "vgg16", "--throughput", "30", "--latency",
                       str(bound), "--json"])  # fmt: skip
    assert out["latency"] <= bound * (1 + 1e-9) and out["cost"] > free["cost"]
    assert out["latency_parts"]["propagation"] > 0


def test_the_shipped_memory_example_buys_memory() -> None:
    path = EXAMPLES / "network-memory.json"
    out = invoke_json(["provision", str(path), "vgg16", "--throughput", "30", "--json"])
    data = {n["id"]: n for n in json.loads(path.read_text())["nodes"]}
    for row in out["memory"]:  # bought exactly where a node has less than its stage needs
        short = row["need"] > data[row["id"]]["memory"]
        assert (row["added"] > 0) == short
        assert row["memory"] >= row["need"]
    assert any(row["added"] > 0 for row in out["memory"])


def test_the_shipped_caps_example_is_infeasible_beyond_its_caps() -> None:
    path = EXAMPLES / "network-caps.json"
    best = invoke_json(["throughput", str(path), "vgg16", "--json"])
    # every element capped at twice what it has: T* with everything doubled is the limit
    data = json.loads(path.read_text())
    for element in data["nodes"] + data["links"]:
        assert element["cost"]["max"] == element["capacity"]
    args = ["provision", str(path), "vgg16", "--json", "--throughput"]
    assert runner.invoke(app, [*args, str(1.01 * 2 / best["interval"])]).exit_code == 3
    assert runner.invoke(app, [*args, str(0.99 * 2 / best["interval"])]).exit_code == 0


def test_the_example_layer_names_are_not_node_names() -> None:
    import inferplan

    layers = set(inferplan.load_profile(str(EXAMPLES / "two-branch.yaml")).graph.layers)
    for network in EXAMPLES.glob("*network*.json"):
        nodes = {n["id"] for n in json.loads(network.read_text())["nodes"]}
        assert not layers & nodes, network


def test_the_readme_quotes_the_caps_examples_error_as_it_is() -> None:
    result = runner.invoke(app, ["provision", str(EXAMPLES / "network-caps.json"), "vgg16",
                                 "--throughput", "30"])  # fmt: skip
    assert result.exit_code == 3
    line = result.stderr.strip().splitlines()[0]
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert line in readme


@pytest.mark.parametrize("netem", [True, False])
def test_the_testbed_check_names_netem_and_what_needs_it(
    monkeypatch: pytest.MonkeyPatch, netem: bool
) -> None:
    from inferplan.runtime.testbed import linux as testbed

    if testbed.missing():
        pytest.skip("testbed: " + "; ".join(testbed.missing()))
    monkeypatch.setattr(testbed, "_has_netem", lambda: netem)
    result = runner.invoke(app, ["testbed"])
    assert result.exit_code == 0, result.stderr
    assert f"{'has' if netem else 'lacks'} the netem qdisc" in result.stdout
    last = result.stdout.strip().splitlines()[-1]
    assert last == ("testbed: ready" if netem else "testbed: ready for plans without link delays")
    out = invoke_json(["testbed", "--json"])
    assert {"name": "the netem qdisc", "has": netem,
            "needs": "plans whose links have delay_s"} in out["capabilities"]  # fmt: skip


def test_without_root_the_check_says_how_to_run_a_venvs_command_under_sudo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from inferplan.runtime.testbed import linux as testbed

    monkeypatch.setattr(testbed.os, "geteuid", lambda: 1000)
    first = testbed.missing()[0]
    assert first.startswith("root") and "sudo .venv/bin/inferplan" in first
    with pytest.raises(testbed.TestbedUnavailable, match="sudo resets PATH"):
        testbed.require()


def test_a_sweep_reports_its_wall_time_tables_and_figures_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from inferplan.experiments import sweep_summary

    spec = tmp_path / "s.yaml"
    spec.write_text("study: provisioning\nseed: 1\noptions:\n  methods: [psg]\n"
                    "grid:\n  network: tiered\n  topology: [0]\n  dnn: [vgg16]\n"
                    "  alpha: [0.5]\n")  # fmt: skip
    real = sweep_summary.write_sweep_summary

    def slow(*args: object, **kwargs: object) -> object:
        time.sleep(1.5)  # a summary figure that takes its time
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sweep_summary, "write_sweep_summary", slow)
    out = invoke_json(["sweep", str(spec), "--out", str(tmp_path / "o"), "--json"])
    assert out["wall_seconds"] >= 1.5 > out["seconds"]
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "o2")])
    assert result.exit_code == 0, result.stderr
    shown = float(result.stdout.split(") in ")[1].split(" s of wall time")[0])
    assert shown >= 1.5


def test_a_table_of_a_graph_plan_says_what_a_cut_is() -> None:
    args = ["provision", str(EXAMPLES / "network.json"), str(EXAMPLES / "two-branch.yaml"),
            "--throughput", "20", "--cuts"]  # fmt: skip
    graph = runner.invoke(app, [*args, "graph"])
    assert graph.exit_code == 0, graph.stderr
    assert "ideal (layers done)" in graph.stdout
    assert "the k-th ideal of the layer graph" in graph.stdout
    chain = runner.invoke(app, [*args, "chain"])
    assert chain.exit_code == 0, chain.stderr
    assert "ideal" not in chain.stdout


def _svg_overlaps(page: str) -> list[tuple[str, str]]:
    """The (label, line) pairs of a report's drawing where a line passes through a label's
    box (an 11 px label: 0.55 em a character wide, from 9 px above its baseline to 2 below)."""
    import re

    svg = page[page.index("<svg") : page.index("</svg>")]
    lines = [tuple(map(float, m)) for m in re.findall(
        r'<line x1="([-\d.]+)" y1="([-\d.]+)" x2="([-\d.]+)" y2="([-\d.]+)"', svg)]  # fmt: skip
    labels = re.findall(r'<text x="([-\d.]+)" y="([-\d.]+)" text-anchor="middle" '
                        r'font-size="11"[^>]*>([^<]*)</text>', svg)  # fmt: skip
    found = []
    for x, y, text in labels:
        cx, base, half = float(x), float(y), 0.55 * 11 * len(text) / 2
        for x0, y0, x1, y1 in lines:
            for k in range(201):
                px, py = x0 + (x1 - x0) * k / 200, y0 + (y1 - y0) * k / 200
                if cx - half <= px <= cx + half and base - 9 <= py <= base + 2:
                    found.append((text, f"{x0},{y0}->{x1},{y1}"))
                    break
    return found


@pytest.mark.parametrize("model", ["vgg16", "two-branch"])
def test_no_label_of_the_report_drawing_is_struck_by_a_line(tmp_path: Path, model: str) -> None:
    report = tmp_path / "r.html"
    profile = str(EXAMPLES / "two-branch.yaml") if model == "two-branch" else model
    for target in ("20", "30", "45"):
        result = runner.invoke(app, ["provision", str(EXAMPLES / "network.json"), profile,
                                     "--throughput", target, "--report", str(report)])  # fmt: skip
        assert result.exit_code == 0, result.stderr
        assert _svg_overlaps(report.read_text()) == []


def test_the_report_drawing_has_a_legend_below_the_network() -> None:
    import re

    import inferplan
    from inferplan.codesign.breakdown import plan_breakdown
    from inferplan.plots.report import plan_report_html

    net, vgg = inferplan.load_network(EXAMPLES / "network.json"), inferplan.vgg16()
    page = plan_report_html(
        net, plan_breakdown(net, vgg, inferplan.provision(net, vgg, throughput=30))
    )
    svg = page[page.index("<svg") : page.index("</svg>")]
    height = float(re.search(r'viewBox="0 0 [\d.]+ ([\d.]+)"', svg).group(1))  # type: ignore[union-attr]
    legend = svg[svg.index('class="legend"') :]
    assert "bottleneck stage" in legend and "the plan&#x27;s path" in legend
    circles = [float(y) + 22 for y in re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)"', svg)]
    ys = [float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)"', legend)]
    assert ys and min(ys) > max(circles) and max(ys) < height


def test_the_docs_transformers_commands_fit_their_configs_positions() -> None:
    import re
    import shlex

    transformers = pytest.importorskip("transformers")
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        for line in page.read_text().splitlines():
            found = re.match(r"\$ inferplan profile transformers:(\w+) (.*)", line)
            if not found or "--config" in line:
                continue
            args = shlex.split(found.group(2).split("#")[0])
            seq = int(args[args.index("--seq-len") + 1]) if "--seq-len" in args else None
            if seq is None:
                continue
            config = getattr(transformers, found.group(1))()
            tokens = seq + ("--decode" in args)
            assert tokens <= config.max_position_embeddings, (page.name, line)
            checked += 1
    assert checked


# --- item 2: joint services under latency bounds buy no rounding dust ------------------------

BOUNDED_SERVICES = (
    "services:\n"
    "  - {name: cams, profile: resnet50, source: s, target: t, throughput: 10, latency: 0.3}\n"
    "  - {name: detect, profile: vgg16, source: s, target: t, interval: 0.2, latency: 0.5}\n"
    "  - {name: classify, profile: alexnet, source: s, target: t, throughput: 40, latency: 0.1}\n"
)


def _dust(capacity: dict[object, float], load: dict[object, float],
          bought: dict[object, float]) -> dict[object, float]:  # fmt: skip
    """The purchases beyond an element's throughput need by at most a millionth of what it
    has: rounding, not purchases."""
    return {k: x for k, x in bought.items()
            if x - max(0.0, load.get(k, 0.0) - capacity[k]) <= 1e-6 * capacity[k]
            and x > max(0.0, load.get(k, 0.0) - capacity[k]) * (1 + 1e-12)}  # fmt: skip


def test_joint_services_under_latency_bounds_buy_no_dust(tmp_path: Path) -> None:
    path = tmp_path / "services.yaml"
    path.write_text(BOUNDED_SERVICES)
    net = json.loads((EXAMPLES / "network.json").read_text())
    out = invoke_json(["provision", str(EXAMPLES / "network.json"), "--services", str(path),
                       "--json"])  # fmt: skip
    nodes = {n["id"]: n["capacity"] for n in net["nodes"]}
    links = {(e["source"], e["target"]): e["capacity"] for e in net["links"]}
    link_loads = {(e["source"], e["target"]): e["load"] for e in out["loads"]["links"]}
    link_bought = {(e["source"], e["target"]): e["amount"] for e in out["link_upgrades"]}
    assert out["node_upgrades"] and link_bought  # the bounds buy something real
    assert _dust(nodes, out["loads"]["nodes"], out["node_upgrades"]) == {}
    assert _dust(links, link_loads, link_bought) == {}
    for served in out["services"]:  # the snapped plan still meets every bound, exactly
        assert served["latency"] <= served["target_latency"]
        assert served["interval"] <= served["target_interval"] * (1 + 1e-9)


# --- item 8: long commands say so on stderr, stdout stays the result -------------------------


def _one_service(tmp_path: Path) -> Path:
    path = tmp_path / "one.yaml"
    path.write_text("services:\n  - {name: a, profile: alexnet, source: s, target: t, "
                    "throughput: 40, latency: 0.1}\n")  # fmt: skip
    return path


LONG_COMMANDS = [
    ("services", lambda tmp: ["provision", str(EXAMPLES / "network.json"), "--services",
                              str(_one_service(tmp)), "--json"], "planning 1 services (milp)"),
    ("frontier", lambda tmp: ["frontier", str(EXAMPLES / "network.json"), "alexnet", "--points",
                              "5", "--json"], "cost frontier of 5 points"),
    ("serve", lambda tmp: ["serve", str(EXAMPLES / "gpu-cluster.yaml"),
                           str(EXAMPLES / "llama-8b.yaml"), "--workload",
                           str(EXAMPLES / "chat-workload.yaml"), "--catalog",
                           str(EXAMPLES / "gpus.yaml"), "--json"],
     "planning 4 requests/s of llama-8b (cost)"),
    ("flows", lambda tmp: ["provision", str(EXAMPLES / "flow-network.json"), "vgg16",
                           "--pipelines", "any", "--throughput", "3", "--json"],
     "a flow plan of 3 inferences/s"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "args", "what"), LONG_COMMANDS, ids=[c[0] for c in LONG_COMMANDS])
def test_a_long_step_shows_a_spinner_on_a_terminals_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, args: object, what: str
) -> None:
    import inferplan.cli.render as render

    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich draws as on a terminal
    monkeypatch.setattr(render, "PROGRESS_AFTER_S", 0.0)  # every step is a long one here
    result = runner.invoke(app, args(tmp_path))  # type: ignore[operator]
    assert result.exit_code == 0, result.stderr
    json.loads(result.stdout)  # stdout: the one JSON object, nothing else
    assert what in result.stderr  # the spinner's line
    assert f"{what}: " in result.stderr and " s wall time" in result.stderr


@pytest.mark.parametrize(("name", "args", "what"), LONG_COMMANDS, ids=[c[0] for c in LONG_COMMANDS])
def test_a_long_step_says_one_line_into_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, args: object, what: str
) -> None:
    import inferplan.cli.render as render

    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setattr(render, "PROGRESS_AFTER_S", 0.0)
    result = runner.invoke(app, args(tmp_path))  # type: ignore[operator]
    assert result.exit_code == 0, result.stderr
    json.loads(result.stdout)
    lines = result.stderr.splitlines()
    assert f"{what} ..." in lines
    (took,) = [line for line in lines if line.startswith(f"{what}: ")]
    seconds = float(took.removeprefix(f"{what}: ").removesuffix(" s wall time"))
    assert 0 <= seconds < 300


def test_a_short_step_says_nothing_into_a_log(tmp_path: Path) -> None:
    result = runner.invoke(app, ["frontier", str(EXAMPLES / "network.json"), "alexnet",
                                 "--points", "3", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    # (quick here: under a second, so no line; a slow machine may take longer)
    assert all("wall time" in line or line.endswith(" ...")
               for line in result.stderr.splitlines())  # fmt: skip


# --- item 10: co-inference costs are printed with their unit ---------------------------------


def test_coinference_costs_name_their_unit() -> None:
    import yaml

    weight = yaml.safe_load((EXAMPLES / "system.yaml").read_text()).get("energy_weight", 0.5)
    system = str(EXAMPLES / "system.yaml")
    for args in (["coinfer", system], ["coinfer-simulate", system, "--inferences", "200"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.stderr
        assert "ETC units" in result.stdout
        unit = f"ETC units: {1 - weight:.4g} x seconds + {weight:.4g} x joules"
        assert unit in result.stdout
    result = runner.invoke(app, ["coinfer", str(EXAMPLES / "system.yaml")])
    (first,) = [line for line in result.stdout.splitlines() if "expected cost" in line]
    assert "ETC units per inference" in first
