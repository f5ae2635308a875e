"""``inferplan run --testbed`` end to end (as root, with network namespaces and a CPU
controller): a plan measured against its prediction on kernel-shaped links and CPU quotas, its
outputs against the unsplit model, and every way out leaving no namespace, qdisc, cgroup or
process behind."""

from __future__ import annotations

import json
import os
import signal

import pytest

torch = pytest.importorskip("torch")

from inferplan.profiles.cuts import parse_block_spec  # noqa: E402
from inferplan.profiles.from_torch import profile_module  # noqa: E402
from inferplan.runtime.testbed.linux import cpu_counts, missing, others_share  # noqa: E402

from .pipeline_support import (  # noqa: E402
    chain,
    finish,
    hand_plan,
    processes_marked,
    ranks_started,
    start,
    write,
)
from .testbed_support import WIDE_SHAPE, fails_in_rank, left_by, wide  # noqa: E402

LACKS = missing()
pytestmark = pytest.mark.skipif(bool(LACKS), reason="testbed: " + "; ".join(LACKS))

PATH = ("s", "a", "t")
WIDE = [
    "tests.runtime.testbed_support:wide",
    "--input-shape",
    ",".join(map(str, WIDE_SHAPE)),
    "--blocks",
    "depth=1",
]
SMALL = ["tests.runtime.testbed_support:fails_in_rank", "--input-shape", "1,16"]


def _wide_case(tmp):
    """The wide MLP on PATH, two blocks a node: nodes planned at 25, 40 and 25 ms, links at
    25 ms (capacities and bandwidths made here from the profile's numbers)."""
    with torch.device("meta"):
        profile = profile_module(wide(), [WIDE_SHAPE], blocks=parse_block_spec("depth=1")).profile
    partition = [2, 4, 6]
    work = [sum(profile.flops[a:b]) for a, b in zip([0, 2, 4], partition, strict=True)]
    node_s = [0.025, 0.040, 0.025]
    bits = [profile.activation_bits[b] for b in partition[:-1]]
    nodes = [{"id": v, "capacity": q / s, "price": 1e-6}
             for v, q, s in zip(PATH, work, node_s, strict=True)]  # fmt: skip
    links = [{"source": u, "target": v, "capacity": d / 0.025, "price": 1e-5}
             for u, v, d in zip(PATH, PATH[1:], bits, strict=False)]  # fmt: skip
    net = write(tmp / "net.json", {"source": "s", "target": "t", "nodes": nodes, "links": links})
    plan = {"status": "optimal", "method": "hand", "cost": 0.0, "interval": 0.04,
            "target_interval": 0.04, "path": list(PATH), "partition": partition,
            "node_upgrades": {}, "link_upgrades": []}  # fmt: skip
    return net, write(tmp / "plan.json", plan), [*node_s, 0.025, 0.025]


def test_a_plan_on_the_testbed_keeps_its_interval_and_the_models_outputs(tmp_path):
    net, plan, planned = _wide_case(tmp_path)
    inputs = torch.randn(40, *WIDE_SHAPE, generator=torch.Generator().manual_seed(3))
    torch.save(inputs, tmp_path / "in.pt")
    assert not _in_a_testbed_cgroup()  # a launcher forked from here would start held
    # Every run's outputs and predictions are checked; its timing on the first run, or on a
    # second where the first missed: the CPU an inference takes drifts within a run by up to
    # twice on a quiet machine, which the quota follows only every few inferences
    # (docs/testbed.md); with the quota set once, one run in several missed by more than 15 %
    # (measured: +17.4 %, others idle).
    for attempt in (1, 2):  # noqa: B007 - the failure message names it
        before = cpu_counts()
        proc, mark = start(["run", str(net), *WIDE, "--plan", str(plan), "--testbed",
                            "--inputs", str(tmp_path / "in.pt"), "--outputs",
                            str(tmp_path / "out.pt"), "--json"])  # fmt: skip
        code, out, err = finish(proc)
        others = others_share(before, cpu_counts())
        assert code == 0, err
        report = json.loads(out)
        assert report["mode"] == "testbed" and report["emulated"] is False
        k = report["dilation"]
        assert k >= 1
        by_kind = {s["id"]: s for s in report["stages"]}
        assert list(by_kind) == ["s", "s->a", "a", "a->t", "t"]
        for name, want in zip(["s", "a", "t", "s->a", "a->t"], planned, strict=True):
            assert by_kind[name]["predicted_s"] == pytest.approx(k * want, rel=1e-9), name
        assert report["predicted_interval"] == pytest.approx(k * 0.040, rel=1e-9)
        assert report["outputs_match"] is True
        torch.manual_seed(0)
        model = wide().eval()
        with torch.inference_mode():
            want = torch.stack([model(x) for x in inputs])
        torch.testing.assert_close(torch.load(tmp_path / "out.pt", weights_only=True), want)
        assert left_by(proc.pid) == [] and processes_marked(mark) == []
        a = by_kind["a"]
        assert a["quota"] > 0 and a["cpu_s"] > 0
        off = {name: by_kind[name]["measured_s"] / by_kind[name]["predicted_s"] - 1
               for name in ("s->a", "a->t")}  # fmt: skip
        off["interval"] = report["measured_interval"] / report["predicted_interval"] - 1
        held = abs(off["interval"]) <= 0.15 and all(abs(x) <= 0.10 for x in off.values())
        if held or others > OTHERS_SHARE:
            break
    if any(abs(x) > 0.15 for x in off.values()) and others > OTHERS_SHARE:
        inflation = a["cpu_s"] / (a["quota"] * a["predicted_s"]) - 1
        pytest.skip(f"while the run ran, the machine's other processes took {others:.0%} of "
                    f"its cores; measured against predicted: {_percent(off)}; the "
                    f"bottleneck's compute took {inflation:+.1%} of the CPU time measured "
                    "before the run")  # fmt: skip
    # On a quiet machine the interval holds within 15 %, the transfers (the receiver's view)
    # within 10 % (measured: -0.5 to -2.1 %; +15 to +16 % on the first link while the
    # sender's transport threads ran under its node's quota, docs/testbed.md).
    assert off["interval"] == pytest.approx(0, abs=0.15), f"run {attempt}: {_percent(off)}"
    assert off == {name: pytest.approx(0, abs=0.10) for name in off}


def _percent(off):
    return ", ".join(f"{name} {x:+.1%}" for name, x in off.items())


# Of the machine's cores, what other processes may take while the run runs before its timing
# is not checked: the quotas need their cores. Measured over the run itself, not before or
# after it: an idle spell after the run says nothing of what ran beside it.
OTHERS_SHARE = 0.10


def _in_a_testbed_cgroup():
    with open("/proc/thread-self/cgroup") as groups:
        return "inferplan-tb-" in groups.read()


def _small_case(tmp):
    with torch.device("meta"):
        profile = profile_module(fails_in_rank(), [(1, 16)]).profile.to_dict()
    net = write(tmp / "net.json", chain(PATH, 1e8, 1e7))
    return net, write(tmp / "plan.json", hand_plan(PATH, [1, 2, 3], profile, 1e8, 1e7))


def test_a_stage_that_raises_ends_the_run_and_the_testbed(tmp_path):
    net, plan = _small_case(tmp_path)
    proc, mark = start(["run", str(net), *SMALL, "--plan", str(plan), "--testbed"])
    code, _, err = finish(proc)
    assert code == 1
    assert err.strip() == ("error: stage 1 (node 'a', blocks 2..2) failed: RuntimeError: boom "
                           "in a rank")  # fmt: skip
    assert left_by(proc.pid) == [] and processes_marked(mark) == []


def _streaming_case(tmp):
    """The test MLP (four blocks, none failing) on PATH, blocks 2..3 on node a."""
    from .models import mlp

    with torch.device("meta"):
        profile = profile_module(mlp(), [(1, 16)]).profile.to_dict()
    net = write(tmp / "net.json", chain(PATH, 1e8, 1e7))
    return net, write(tmp / "plan.json", hand_plan(PATH, [1, 3, 4], profile, 1e8, 1e7))


@pytest.mark.parametrize("how", ["rank SIGKILL", "launcher SIGTERM", "Ctrl-C"])
def test_every_way_out_removes_the_testbed(tmp_path, how):
    net, plan = _streaming_case(tmp_path)
    # a small model that streams for long (the ranks, forked, start at once and must not
    # fail on their own): ended from outside once its ranks are up
    proc, mark = start(["run", str(net), "tests.runtime.models:mlp", "--input-shape", "1,16",
                        "--plan", str(plan), "--testbed", "--inferences", "100000",
                        "--dilation", "50"])  # fmt: skip
    ranks = ranks_started(mark, len(PATH))
    assert left_by(proc.pid) != []  # the testbed is up
    if how == "rank SIGKILL":
        os.kill(ranks[1], signal.SIGKILL)
    elif how == "launcher SIGTERM":
        os.kill(proc.pid, signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT)
    code, _, err = finish(proc, timeout=60)
    assert code == {"rank SIGKILL": 1, "launcher SIGTERM": 143, "Ctrl-C": 130}[how], err
    if how == "rank SIGKILL":
        assert err.strip() == "error: stage 1 (node 'a', blocks 2..3) died: SIGKILL"
    assert left_by(proc.pid) == [] and processes_marked(mark) == []


def test_a_plan_with_link_delays_needs_netem(tmp_path):
    from inferplan.runtime.testbed.linux import _has_netem

    if _has_netem():
        pytest.skip("this kernel has netem: the delays are emulated, not refused")
    net, plan = _small_case(tmp_path)
    data = json.loads(net.read_text())
    data["links"][0]["delay_s"] = 0.01
    net.write_text(json.dumps(data))
    proc, mark = start(["run", str(net), *SMALL, "--plan", str(plan), "--testbed"])
    code, _, err = finish(proc)
    assert code == 2, err
    assert err.strip().splitlines() == [
        "error: --testbed: the testbed needs the netem qdisc for link delays (this kernel is "
        "built without CONFIG_NET_SCH_NETEM)"
    ]
    assert left_by(proc.pid) == [] and processes_marked(mark) == []
