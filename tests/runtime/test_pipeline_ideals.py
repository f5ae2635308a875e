"""``inferplan run`` and ``inferplan split`` on plans cut at ideals of a layer graph: a stage
computes its layers, every tensor of a boundary travels, and the outputs equal the unsplit
model's, on a two-branch model and an Inception-style one (tests/runtime/models.py), with
real processes on 127.0.0.1 (emulated, at this machine's speed, and on the testbed)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import inferplan  # noqa: E402
from inferplan.codesign.instance import compile_instance  # noqa: E402
from inferplan.codesign.plan import plan_from_path  # noqa: E402
from inferplan.profiles.cuts import parse_block_spec  # noqa: E402
from inferplan.profiles.from_torch import profile_module  # noqa: E402
from inferplan.runtime.measure import build_model, stream_inputs  # noqa: E402
from inferplan.runtime.testbed.linux import missing  # noqa: E402

from . import models  # noqa: E402
from .pipeline_support import chain, run, write  # noqa: E402
from .test_artefacts import _split  # noqa: E402

PATH = ("s", "a", "t")
K = 8
TWO = ("tests.runtime.models:two_branch", (2, 8), None)
INCEPTION = ("tests.runtime.models:inception", (1, 3, 8, 8), "depth=2")


def _args(model):
    spec, shape, blocks = model
    return [spec, "--input-shape", ",".join(map(str, shape)),
            *(["--blocks", blocks] if blocks else [])]  # fmt: skip


def _profile(model):
    spec, shape, blocks = model
    with torch.device("meta"):
        net = getattr(models, spec.rpartition(":")[2])()
    return profile_module(net, [shape], blocks=parse_block_spec(blocks)).profile


def _network(tmp, profile, node_s=0.01):
    """PATH, every node computing the whole model in ``3 * node_s``; every link passing the
    largest boundary of any two layers' outputs in ``node_s``."""
    graph = profile.graph
    capacity = sum(graph.flops) / (3 * node_s)
    bandwidth = 2 * max(graph.output_bits) / node_s
    path = write(tmp / "net.json", chain(PATH, capacity, bandwidth))
    return path, capacity, bandwidth


def _graph_plan(tmp, net_file, profile, layers):
    """The plan that runs ``layers[l]`` on ``PATH[l]`` (priced by the planners' own
    arithmetic, no capacity bought), as a plan file."""
    net = inferplan.load_network(net_file)
    inst = compile_instance(net, profile, cuts="graph")
    cuts = inst.cuts
    done: set[str] = set()
    partition = []
    for names in layers:
        done |= set(names)
        partition.append(next(k for k in range(cuts.n_cuts)
                              if set(cuts.units_between(0, k)) == done))  # fmt: skip
    index = {v: k for k, v in enumerate(inst.node_ids)}
    plan = plan_from_path(inst, "hand", 1e9, [index[v] for v in PATH], partition,
                          status="heuristic")  # fmt: skip
    assert [set(names) for names in plan.layers] == [set(names) for names in layers]
    return write(tmp / "plan.json", plan.to_dict())


def _want(model, count, seed=0):
    """The unsplit model's outputs on the run's seeded inputs, computed here."""
    spec, shape, _ = model
    net = build_model(spec, seed=seed)
    with torch.inference_mode():
        outs = [net(*args) for args in stream_inputs([shape], count, seed=seed)]
    return [o if isinstance(o, tuple) else (o,) for o in outs]


def _check_outputs(saved, want):
    saved = saved if isinstance(saved, tuple | list) else (saved,)
    for k, stacked in enumerate(saved):
        for i, out in enumerate(want):
            assert torch.equal(stacked[i], out[k])  # the same operations: bit for bit


# branches apart: the stem and one op of branch a first, the rest of both branches, the join
SPLIT = [["stem", "a1"], ["a2", "b1"], ["cat", "head"]]


def test_a_two_branch_plan_cut_inside_its_branches_runs_emulated(tmp_path):
    profile = _profile(TWO)
    net, capacity, bandwidth = _network(tmp_path, profile)
    plan = _graph_plan(tmp_path, net, profile, SPLIT)
    code, out, err, _ = run(["run", str(net), *_args(TWO), "--plan", str(plan), "--inferences",
                             str(K), "--warmup", "2", "--outputs", str(tmp_path / "out.pt"),
                             "--json"])  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report["outputs_match"] is True and report["mode"] == "emulate"
    _check_outputs(torch.load(tmp_path / "out.pt", weights_only=True), _want(TWO, K))
    graph = profile.graph
    bits = {"input": graph.input_bits, **dict(zip(graph.layers, graph.output_bits, strict=True))}
    flops = dict(zip(graph.layers, graph.flops, strict=True))
    nodes = [s for s in report["stages"] if s["kind"] == "node"]
    links = [s for s in report["stages"] if s["kind"] == "link"]
    assert [set(s["layers"]) for s in nodes] == [set(names) for names in SPLIT]
    assert "blocks" not in nodes[0]
    # every tensor a later stage reads travels: after {stem, a1} the stem's output (read by
    # b1, and an output) and a1's; after {a2, b1} the stem's output still (returned at the end)
    sends = report["plan"]["sends"]
    assert [set(s) for s in sends] == [{"stem", "a1"}, {"stem", "a2", "b1"}]
    for stage, names in zip(nodes, SPLIT, strict=True):  # planned from the layers' own numbers
        assert stage["predicted_s"] == pytest.approx(sum(flops[v] for v in names) / capacity)
        assert stage["measured_s"] >= stage["predicted_s"]
    for stage, names in zip(links, sends, strict=True):
        assert stage["predicted_s"] == pytest.approx(sum(bits[v] for v in names) / bandwidth)
        assert stage["measured_s"] >= stage["predicted_s"]


def test_an_inception_model_planned_at_ideals_runs_at_machine_speed(tmp_path):
    # blocks: the top-level modules; layers: every convolution (--granularity modules)
    model = (INCEPTION[0], INCEPTION[1], None)
    with torch.device("meta"):
        net_module = models.inception()
    profile = profile_module(net_module, [INCEPTION[1]], granularity="modules").profile
    assert profile.n_blocks == 4 and profile.graph.n_layers == 16
    net, _, _ = _network(tmp_path, profile)
    code, out, err, _ = run(["run", str(net), *_args(model), "--granularity", "modules",
                             "--interval", "0.02", "--inferences", str(K), "--warmup", "2",
                             "--no-emulate", "--outputs", str(tmp_path / "out.pt"),
                             "--json"])  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report["plan"]["cuts"] == "graph"  # the default where the profile has a graph
    assert report["outputs_match"] is True and report["mode"] == "native"
    _check_outputs(torch.load(tmp_path / "out.pt", weights_only=True), _want(INCEPTION, K))
    nodes = [s for s in report["stages"] if s["kind"] == "node"]
    ran = [v for s in nodes for v in s["layers"]]
    assert sorted(ran) == sorted(profile.graph.layers)  # each layer once
    assert all(s["profiled_s"] > 0 for s in nodes if s["layers"])
    assert all(s["profiled_s"] == 0 for s in nodes if not s["layers"])


def test_the_table_of_a_run_cut_at_ideals_names_layers_and_tensors(tmp_path, capsys):
    from inferplan.cli.run import _render
    from inferplan.codesign.planfile import load_plan
    from inferplan.runtime.pipeline import RunReport, StageReport

    profile = _profile(TWO)
    net, _, _ = _network(tmp_path, profile)
    plan = load_plan(_graph_plan(tmp_path, net, profile, SPLIT))
    stages = []
    for k, node in enumerate(PATH):
        stages.append(StageReport("node", node, 0.01, 0.011, layers=plan.layers[k]))
        if k < 2:
            stages.append(StageReport("link", f"{node}->{PATH[k + 1]}", 0.01, 0.012))
    report = RunReport(plan, 4, 1, True, 0.01, 0.012, 0.05, 0.06, tuple(stages), True, 0.0,
                       mode="emulate")  # fmt: skip
    _render(report)
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in out.splitlines() if line.count("│") > 3}  # fmt: skip
    assert rows["node s"] == "stem, a1" and rows["node t"] == "cat, head"
    assert rows["link s -> a"] == "sends stem, a1"
    assert rows["link a -> t"] == "sends stem, a2, b1"
    assert "layers" in out.split("node s")[0]  # the column's heading


def test_cuts_are_for_planning_not_for_a_plan_file(tmp_path):
    profile = _profile(TWO)
    net, _, _ = _network(tmp_path, profile)
    plan = _graph_plan(tmp_path, net, profile, SPLIT)
    code, _, err, _ = run(["run", str(net), *_args(TWO), "--plan", str(plan), "--cuts", "chain"])
    assert code == 2
    assert err.strip() == "error: --plan: --cuts is for planning: a plan file says where it cuts"


@pytest.mark.skipif(bool(missing()), reason="testbed: " + "; ".join(missing()))
def test_a_plan_cut_at_ideals_runs_on_the_testbed(tmp_path):
    profile = _profile(TWO)
    net, _, _ = _network(tmp_path, profile, node_s=0.02)
    plan = _graph_plan(tmp_path, net, profile, SPLIT)
    code, out, err, _ = run(["run", str(net), *_args(TWO), "--plan", str(plan), "--testbed",
                             "--inferences", str(K), "--warmup", "2", "--outputs",
                             str(tmp_path / "out.pt"), "--json"])  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report["mode"] == "testbed" and report["outputs_match"] is True
    _check_outputs(torch.load(tmp_path / "out.pt", weights_only=True), _want(TWO, K))
    assert [set(s["layers"]) for s in report["stages"] if s["kind"] == "node"] == [
        set(names) for names in SPLIT
    ]


RESNET = ("tests.runtime.models:resnet", (1, 3, 16, 16), "depth=2")


@pytest.mark.parametrize(("model", "layers"), [
    (TWO, [[], SPLIT[0], SPLIT[1] + SPLIT[2]]),  # a source that only forwards
    (INCEPTION, None),  # the plan's own chain of ideals, planned here
    # planned on the profile torch.export makes (as inferplan profile writes it), whose
    # graph has no call of the residual blocks' nn.Identity shortcuts
    (RESNET, None),
])  # fmt: skip
def test_split_writes_programs_that_chain_to_the_unsplit_model(tmp_path, model, layers):
    profile = _profile(model)
    net, _, _ = _network(tmp_path, profile)
    if layers is None:
        net_value = inferplan.load_network(net)
        plan = inferplan.provision(net_value, profile, interval=0.02, cuts="graph").to_dict()
        layers = plan["layers"]
    else:
        plan = json.loads(_graph_plan(tmp_path, net, profile, layers).read_text())
    spec, shape, blocks = model
    result, folder = _split(tmp_path, spec, ",".join(map(str, shape)), plan,
                            *(["--blocks", blocks] if blocks else []))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    manifest = json.loads(result.stdout)
    assert manifest["cuts"] == "graph"
    assert [s["layers"] for s in manifest["stages"]] == [list(v) for v in layers]
    for a, b in zip(manifest["stages"], manifest["stages"][1:], strict=False):
        assert a["outputs"] == b["inputs"]  # what one stage returns the next one takes
    inputs = next(stream_inputs([shape], 1, seed=3))
    values = inputs
    with torch.no_grad():  # the programs alone (test_artefacts loads them in a fresh process)
        for stage in manifest["stages"]:
            values = torch.export.load(folder / stage["file"]).module()(*values)
    got = values
    with torch.no_grad():
        want = build_model(spec)(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
