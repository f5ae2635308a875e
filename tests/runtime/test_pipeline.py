"""``inferplan run`` end to end: real processes on 127.0.0.1 talking through torch.distributed.

Each run streams a dozen inputs through a 3-node path in a few seconds; the outputs are checked
against the unsplit model evaluated here, the pacing against the plan's stage times computed
here from the profile. No assertion depends on how fast this machine is.
"""

from __future__ import annotations

import html
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from inferplan.profiles.cuts import parse_block_spec  # noqa: E402
from inferplan.profiles.from_torch import profile_module  # noqa: E402
from inferplan.units import si  # noqa: E402

from . import models  # noqa: E402
from .pipeline_support import (  # noqa: E402
    MODELS,
    ROOT,
    chain,
    env,
    finish,
    hand_plan,
    model_args,
    processes_marked,
    ranks_started,
    run,
    stage_seconds,
    start,
    write,
)

PATH = ("s", "a", "t")
K = 12


def _profile(name):
    factory, shape, blocks = getattr(models, name), MODELS[name][1], MODELS[name][2]
    with torch.device("meta"):
        model = factory()
    return profile_module(model, [shape], blocks=parse_block_spec(blocks)).profile.to_dict()


def _case(tmp, name, partition, node_s=0.02, *, delay_s=0.0, slack=1.0):
    """Network, plan and inputs files for ``name`` on PATH; nodes take about ``node_s``, links
    have a propagation delay of ``delay_s``, the plan's target interval is ``slack`` times its
    interval."""
    profile = _profile(name)
    capacity = sum(profile["flops"]) / (len(PATH) * node_s)
    bandwidth = max(profile["activation_bits"]) / (0.5 * node_s)
    network = chain(PATH, capacity, bandwidth)
    for link in network["links"]:
        link["delay_s"] = delay_s
    net = write(tmp / "net.json", network)
    made = hand_plan(PATH, partition, profile, capacity, bandwidth)
    made["target_interval"] *= slack
    plan = write(tmp / "plan.json", made)
    shape = MODELS[name][1]
    inputs = torch.randn(K, *shape[1:], generator=torch.Generator().manual_seed(5))
    torch.save(inputs, tmp / "in.pt")
    return profile, capacity, bandwidth, net, plan, inputs


def _expected(name, inputs):
    torch.manual_seed(0)  # the run's default seed builds the same weights
    model = getattr(models, name)().eval()
    with torch.inference_mode():
        return torch.stack([model(x.unsqueeze(0)) for x in inputs])


@pytest.fixture(scope="module")
def resnet_run(tmp_path_factory):
    """ResNet-style model, cuts inside residual blocks (both branches cross), emulated."""
    tmp = tmp_path_factory.mktemp("resnet")
    partition = [2, 4, 6]
    profile, capacity, bandwidth, net, plan, inputs = _case(tmp, "resnet", partition)
    code, out, err, mark = run(["run", str(net), *model_args("resnet"), "--plan", str(plan),
                                "--inputs", str(tmp / "in.pt"), "--outputs", str(tmp / "out.pt"),
                                "--warmup", "2", "--json",
                                "--report", str(tmp / "run.html")])  # fmt: skip
    assert code == 0, err
    return {"report": json.loads(out), "profile": profile, "partition": partition,
            "capacity": capacity, "bandwidth": bandwidth, "inputs": inputs, "tmp": tmp,
            "mark": mark}  # fmt: skip


def test_split_run_outputs_equal_the_unsplit_model(resnet_run):
    report = resnet_run["report"]
    assert report["outputs_match"] is True
    assert report["max_abs_diff"] <= 1e-5
    saved = torch.load(resnet_run["tmp"] / "out.pt", weights_only=True)
    want = _expected("resnet", resnet_run["inputs"])
    assert saved.shape == want.shape == (K, 1, 10)
    torch.testing.assert_close(saved, want)


def test_report_has_one_stage_per_node_and_link_in_path_order(resnet_run):
    report = resnet_run["report"]
    assert set(report) >= {"plan", "inferences", "predicted_interval", "measured_interval",
                           "latency_s", "stages", "outputs_match", "max_abs_diff"}  # fmt: skip
    assert report["inferences"] == K
    assert report["plan"]["path"] == list(PATH) and report["plan"]["status"] == "optimal"
    kinds = [(s["kind"], s["id"], s.get("blocks")) for s in report["stages"]]
    assert kinds == [("node", "s", [0, 2]), ("link", "s->a", None), ("node", "a", [2, 4]),
                     ("link", "a->t", None), ("node", "t", [4, 6])]  # fmt: skip


def test_the_html_report_sets_each_measured_time_beside_the_predicted_one(resnet_run):
    from inferplan.units import link_name, si

    report, page = resnet_run["report"], (resnet_run["tmp"] / "run.html").read_text()
    for stage in report["stages"]:
        name = link_name(stage["id"]) if stage["kind"] == "link" else stage["id"]
        # the stage's row of the run's table (a node's name heads its memory row too)
        rows = re.findall(rf"<tr[^>]*><td>{re.escape(html.escape(name))}(.*?)</tr>", page)
        want = [si(stage["measured_s"], "s"), f"{stage['measured_s'] / stage['predicted_s']:.2f}"]
        pairs = [list(pair) for row in rows
                 for pair in itertools.pairwise(re.findall(r"<td>(.*?)</td>", row))]  # fmt: skip
        assert want in pairs, rows  # measured beside predicted: the time and their ratio
    assert f"measured interval</dt><dd>{si(report['measured_interval'], 's')}" in page


def test_emulated_stages_take_at_least_their_planned_time(resnet_run):
    report = resnet_run["report"]
    nodes, links = stage_seconds(resnet_run["profile"], resnet_run["partition"],
                                 resnet_run["capacity"], resnet_run["bandwidth"])  # fmt: skip
    planned = [nodes[0], links[0], nodes[1], links[1], nodes[2]]
    for stage, want in zip(report["stages"], planned, strict=True):
        assert stage["predicted_s"] == pytest.approx(want, rel=1e-12)
        assert stage["measured_s"] >= want  # pacing never lets a stage run faster than planned
    assert report["predicted_interval"] == pytest.approx(max(planned), rel=1e-12)
    # an inference passes every stage in turn, each holding it at least its planned time
    # after it arrived: its latency is at least their sum
    assert report["latency_s"]["median"] >= sum(planned)
    assert report["latency_s"]["p95"] >= report["latency_s"]["median"]


def test_a_run_that_holds_its_plan_warns_of_nothing(resnet_run):
    # 20 ms per node against the tiny ResNet's blocks, which take well under a millisecond
    report = resnet_run["report"]
    assert report["warnings"] == []
    for stage in report["stages"]:
        if stage["kind"] == "node":
            assert 0 < stage["real_s"] < stage["predicted_s"]


def test_a_stage_faster_than_the_machine_is_named_in_a_warning(tmp_path):
    # Nodes planned at 100 ns: no CPU computes a ResNet block in that, emulation cannot hold it.
    partition = [2, 4, 6]
    _, _, _, net, plan, _ = _case(tmp_path, "resnet", partition, node_s=1e-7)
    code, out, err, _ = run(["run", str(net), *model_args("resnet"), "--plan", str(plan),
                             "--inputs", str(tmp_path / "in.pt"), "--warmup", "2", "--emulate",
                             "--json"])  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    warned = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert [f"warning: {w}" for w in report["warnings"]] == warned
    assert len(warned) == len(PATH)  # every node
    for stage, line in zip([s for s in report["stages"] if s["kind"] == "node"], warned,
                           strict=True):  # fmt: skip
        assert stage["real_s"] > stage["predicted_s"]
        assert f"node {stage['id']!r}" in line and "--no-emulate" in line
        assert (
            f"{si(stage['real_s'], 's')} (median) against {si(stage['predicted_s'], 's')}" in line
        )


def test_no_process_is_left_after_a_run(resnet_run):
    assert processes_marked(resnet_run["mark"]) == []


def test_unet_several_tensors_cross_a_cut_at_machine_speed(tmp_path):
    # cut 2 carries enc1's output beside enc2's; not emulated: the report adds what the blocks'
    # times measured on this machine predict for each node. Fed open loop every target
    # interval (20 ms against blocks far faster here), outputs come at that interval.
    partition = [1, 2, 4]
    _, _, _, net, plan, inputs = _case(tmp_path, "unet", partition)
    code, out, err, _ = run(["run", str(net), *model_args("unet"), "--plan", str(plan),
                             "--inputs", str(tmp_path / "in.pt"), "--outputs",
                             str(tmp_path / "out.pt"), "--no-emulate", "--warmup", "1",
                             "--rate", "--json"])  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report["outputs_match"] is True and report["emulated"] is False
    torch.testing.assert_close(torch.load(tmp_path / "out.pt", weights_only=True),
                               _expected("unet", inputs))  # fmt: skip
    nodes = [s for s in report["stages"] if s["kind"] == "node"]
    assert all(s["profiled_s"] > 0 for s in nodes)
    target = json.loads(plan.read_text())["target_interval"]
    assert report["feed_interval_s"] == target
    assert report["measured_interval"] == pytest.approx(target, rel=0.15)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_same_entry_point_runs_under_torchrun_on_loopback(tmp_path):
    partition = [1, 3, 4]
    _, _, _, net, plan, inputs = _case(tmp_path, "mlp", partition)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "3",
               "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
               "-m", "inferplan", "run", str(net), *model_args("mlp"), "--plan", str(plan),
               "--inputs", str(tmp_path / "in.pt"), "--outputs", str(tmp_path / "out.pt"),
               "--warmup", "1", "--timeout", "60", "--json"]  # fmt: skip
    proc = subprocess.Popen(command, cwd=ROOT, env=env("torchrun"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    code, out, err = finish(proc)
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert len(lines) == 1  # rank 0 alone reports
    report = json.loads(lines[0])
    assert report["outputs_match"] is True and report["emulated"] is True
    assert [s["id"] for s in report["stages"]] == ["s", "s->a", "a", "a->t", "t"]
    torch.testing.assert_close(torch.load(tmp_path / "out.pt", weights_only=True),
                               _expected("mlp", inputs))  # fmt: skip


def test_a_stage_that_raises_ends_the_run_with_one_line(tmp_path):
    _, _, _, net, plan, _ = _case(tmp_path, "broken", [1, 2, 3])
    code, _out, err, mark = run(["run", str(net), *model_args("broken"), "--plan", str(plan)])
    assert code == 1
    assert err.strip() == "error: stage 1 (node 'a', blocks 2..2) failed: RuntimeError: boom in fc2"
    assert processes_marked(mark) == []


def test_a_stage_that_hangs_ends_the_run_within_the_timeout(tmp_path):
    _, _, _, net, plan, _ = _case(tmp_path, "hangs", [1, 2, 3])
    code, _, err, mark = run(["run", str(net), *model_args("hangs"), "--plan", str(plan),
                              "--timeout", "5"])  # fmt: skip
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1
    # whichever notices first: a stage waiting on the silent one, or the launcher
    assert lines[0].startswith(("error: stage ", "error: no inference completed for 5 s"))
    assert processes_marked(mark) == []


def test_a_stage_that_dies_ends_the_run_and_nothing_is_left(tmp_path):
    _, _, _, net, plan, _ = _case(tmp_path, "mlp", [1, 3, 4], node_s=0.05)
    proc, mark = start(["run", str(net), *model_args("mlp"), "--plan", str(plan),
                        "--inferences", "100000"])  # fmt: skip
    ranks = ranks_started(mark, len(PATH))
    os.kill(ranks[1], signal.SIGKILL)
    code, _out, err = finish(proc, timeout=60)
    assert code == 1
    assert err.strip() == "error: stage 1 (node 'a', blocks 2..3) died: SIGKILL"
    assert processes_marked(mark) == []


def test_ctrl_c_stops_every_stage(tmp_path):
    _, _, _, net, plan, _ = _case(tmp_path, "mlp", [1, 3, 4], node_s=0.05)
    proc, mark = start(["run", str(net), *model_args("mlp"), "--plan", str(plan),
                        "--inferences", "100000"])  # fmt: skip
    ranks_started(mark, len(PATH))
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends to the foreground group
    code, _, err = finish(proc, timeout=60)
    assert code == 130
    assert err.strip().splitlines()[-1] == "error: interrupted: every stage was stopped"
    assert processes_marked(mark) == []


def test_each_node_reports_its_state_dict_and_peak_memory(resnet_run):
    profile = resnet_run["profile"]
    nodes = [s for s in resnet_run["report"]["stages"] if s["kind"] == "node"]
    for stage in nodes:
        first, last = stage["blocks"]
        memory = stage["memory"]
        weights = 4 * sum(profile["params"][first:last])  # float32 parameters; buffers add more
        assert weights <= memory["state_dict_bytes"] <= weights * 1.1 + 4096
        assert memory["peak_rss_bytes"] > memory["state_dict_bytes"]
        assert memory["planned_need_bytes"] is None  # a hand-written plan file says none


def test_a_full_pipeline_is_reported_to_queue_by_littles_law(resnet_run):
    report, tmp = resnet_run["report"], resnet_run["tmp"]
    nodes, links = stage_seconds(resnet_run["profile"], resnet_run["partition"],
                                 resnet_run["capacity"], resnet_run["bandwidth"])  # fmt: skip
    idle = sum(nodes) + sum(links)  # no propagation delays on this network
    assert report["feed_interval_s"] is None
    assert report["latency_s"]["predicted"] == pytest.approx(idle, rel=1e-12)
    queueing = report["queueing"]
    # six inferences in flight (one per stage and the acknowledgement) through five stages
    # whose times sum to about three intervals: each one waits
    assert queueing["in_flight"] > 4 and queueing["queued"] is True
    median, interval = report["latency_s"]["median"], report["measured_interval"]
    assert queueing["little_s"] == pytest.approx(queueing["in_flight"] * interval, rel=1e-12)
    assert median == pytest.approx(queueing["little_s"], rel=0.25)  # Little's law, about
    assert median > 1.2 * idle
    assert queueing["says"].startswith("the pipeline was kept full, so inferences queued")
    assert "--rate" in queueing["says"]
    page = html.unescape((tmp / "run.html").read_text())
    assert f"(predicted {si(report['latency_s']['predicted'], 's')})" in page
    assert queueing["says"] in page and "the pipeline kept full" in page


def test_inputs_fed_at_the_plans_rate_meet_its_latency(tmp_path):
    # the plan's target interval 1.5 times its slowest stage: fed at that rate no stage is
    # busy when an inference arrives, so each takes the idle pipeline's latency, the links'
    # 5 ms propagation delays emulated
    partition = [2, 4, 6]
    profile, capacity, bandwidth, net, plan, _ = _case(
        tmp_path, "resnet", partition, delay_s=0.005, slack=1.5
    )
    code, out, err, _ = run(["run", str(net), *model_args("resnet"), "--plan", str(plan),
                             "--inputs", str(tmp_path / "in.pt"), "--warmup", "2", "--rate",
                             "--json", "--report", str(tmp_path / "run.html")])  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    nodes, links = stage_seconds(profile, partition, capacity, bandwidth)
    predicted = sum(nodes) + sum(links) + 2 * 0.005
    feed = 1.5 * max(nodes + links)
    assert report["feed_interval_s"] == pytest.approx(feed, rel=1e-12)
    assert report["measured_interval"] == pytest.approx(feed, rel=0.1)
    assert report["latency_s"]["predicted"] == pytest.approx(predicted, rel=1e-12)
    median = report["latency_s"]["median"]
    # paced stages never run faster than planned, delays included; a busy machine's late
    # wake-ups add a little
    assert predicted * (1 - 1e-3) <= median <= 1.25 * predicted
    assert report["queueing"]["idle_latency_s"] >= predicted * (1 - 1e-3)
    assert report["queueing"]["says"].startswith("fed at the plan's throughput")
    page = html.unescape((tmp_path / "run.html").read_text())
    assert f"median {si(median, 's')}" in page and f"(predicted {si(predicted, 's')})" in page
    assert f"inputs fed every {si(feed, 's')}" in page
