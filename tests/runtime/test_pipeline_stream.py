"""``inferplan run`` streams its inputs (made as they are sent, made again to compare) and
gives up on a rank that does not join within ``--timeout``: real ranks on 127.0.0.1, launched
by :func:`~inferplan.runtime.pipeline.run_plan` in this process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

import inferplan
from inferplan.runtime import pipeline
from inferplan.runtime.pipeline import RunRequest, StageFailed, run_plan

from .pipeline_support import ROOT, chain, env, processes_marked, write


def _request(tmp: Path, path: tuple[str, ...], **options: object) -> RunRequest:
    net = write(tmp / "net.json", chain(path, 1e12, 1e12))
    return RunRequest(network=inferplan.load_network(net), interval=1.0, warmup=1,
                      **options)  # type: ignore[arg-type]  # fmt: skip


def _resident_bytes() -> int:
    """This process's resident set now (``VmRSS``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.fixture
def ranks_env(monkeypatch):
    """The ranks' environment: this worktree's code and a marker to find them by."""
    mark = "stream-" + os.urandom(6).hex()
    for name, value in env(mark).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(ROOT)
    return mark


def test_inputs_are_streamed_not_built_up_front(tmp_path, ranks_env):
    count, size = 100, 2**21  # 800 MiB of inputs, more than a rank needs for all else
    request = _request(tmp_path, ("s", "t"), model="tests.runtime.models:wide",
                       input_shapes=((1, size),), inferences=count, timeout_s=30.0)  # fmt: skip
    # a rank forked from this process starts with its pages resident (a whole test session's,
    # over a GiB late in the suite): what the rank adds to them is what streaming bounds
    forked = pipeline.rank_threads(2, testbed=False) == 1  # two ranks, s and t
    inherited = _resident_bytes() if forked else 0
    report = run_plan(request)
    # made again from the seed, the inputs give the unsplit model's outputs
    assert report.outputs_match and report.max_abs_diff == 0.0
    first = report.stages[0]
    assert first.kind == "node" and first.id == "s" and first.memory is not None
    assert first.memory.peak_rss_bytes - inherited < count * size * 4


def test_a_rank_that_never_joins_ends_the_run_within_the_timeout(tmp_path, ranks_env,
                                                                 monkeypatch):  # fmt: skip
    # the first rank (the rendezvous' host) would arrive a minute late: a startup hook
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os, time\n"
        "if os.environ.get('RANK') == '0' and 'INFERPLAN_RUN_DIR' in os.environ:\n"
        "    time.sleep(60)\n"
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(hook), os.environ["PYTHONPATH"]]))
    # the same in a rank forked from this process, which runs no startup hook
    threads = pipeline.rank_threads

    def late(local: int, *, testbed: bool) -> int:
        if os.environ.get("RANK") == "0" and "INFERPLAN_RUN_DIR" in os.environ:
            time.sleep(60)
        return threads(local, testbed=testbed)

    monkeypatch.setattr(pipeline, "rank_threads", late)
    request = _request(tmp_path, ("s", "a", "t"), model="tests.runtime.models:mlp",
                       input_shapes=((1, 16),), inferences=4, timeout_s=2.0)  # fmt: skip
    started = time.monotonic()
    with pytest.raises(StageFailed) as failed:
        run_plan(request)
    assert time.monotonic() - started < 50  # before the late rank would have come
    message = str(failed.value)
    assert message.startswith("stage 0 (node 's', "), message
    assert message.endswith(" did not join the run within 2 s of the first stage (2 of 3 "
                            "stages were there)"), message  # fmt: skip
    deadline = time.monotonic() + 10
    while processes_marked(ranks_env) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_marked(ranks_env) == []


def test_a_rank_0_busy_past_the_timeout_ends_every_rank_by_the_runs_timeout(
    tmp_path, ranks_env, monkeypatch
):
    # Every rank joins; then rank 0 is busy for 25 s before it sends the others their part
    # (as building a large model is). The others wait in gloo's first broadcast, which the
    # run's timeout of 3 s bounds, not gloo's default of a minute: the run ends in an error
    # long before rank 0 would have come back, and no rank is left.
    setup = pipeline._setup_rank0

    def busy(*args, **kwargs):
        time.sleep(25)
        return setup(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_setup_rank0", busy)
    monkeypatch.setattr(pipeline, "rank_threads", lambda local, *, testbed: 1)  # forked ranks
    request = _request(tmp_path, ("s", "a", "t"), model="tests.runtime.models:mlp",
                       input_shapes=((1, 16),), inferences=4, timeout_s=3.0)  # fmt: skip
    started = time.monotonic()
    with pytest.raises(StageFailed) as failed:
        run_plan(request)
    took = time.monotonic() - started
    message = str(failed.value)
    assert took < 20, (took, message)  # the timeout and the ranks' start, not rank 0's 25 s
    assert message.startswith(("stage 1 ", "stage 2 ")), message
    assert message.endswith(" failed: TimeoutError: nothing from stage 0 for 3 s after every "
                            "stage joined (--timeout): it was busy or stalled"), message
    deadline = time.monotonic() + 10
    while processes_marked(ranks_env) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_marked(ranks_env) == []


@pytest.mark.parametrize("threads", [1, 2])
def test_ranks_are_forked_when_each_computes_on_one_thread_else_started_afresh(
    tmp_path, ranks_env, monkeypatch, threads
):
    """The launcher forks its ranks when each computes on one thread and starts them afresh
    otherwise; either way the run is the same. This process has run torch on several threads
    first: a forked rank of one thread does not need the OpenMP threads it cannot inherit."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.randn(256, 256) @ torch.randn(256, 256)  # the parent's OpenMP threads start
    finally:
        torch.set_num_threads(before)
    monkeypatch.setattr(pipeline, "rank_threads", lambda local, *, testbed: threads)
    forks, starts = [], []
    fork, popen = pipeline.os.fork, pipeline.subprocess.Popen

    def counted_fork() -> int:
        pid = fork()
        if pid:
            forks.append(pid)
        return pid

    def counted_popen(*args, **kwargs):
        starts.append(args[0])
        return popen(*args, **kwargs)

    monkeypatch.setattr(pipeline.os, "fork", counted_fork)
    monkeypatch.setattr(pipeline.subprocess, "Popen", counted_popen)
    request = _request(tmp_path, ("s", "a", "t"), model="tests.runtime.models:mlp",
                       input_shapes=((1, 16),), inferences=6, timeout_s=30.0)  # fmt: skip
    report = run_plan(request)
    assert report.outputs_match and report.max_abs_diff == 0.0
    assert (len(forks), len(starts)) == ((3, 0) if threads == 1 else (0, 3))
    assert all(args[1:3] == ["-m", "inferplan.runtime.stage"] for args in starts)


def test_the_run_report_says_which_plan_ran(capsys):
    """The report of a run names the plan it carried out: method, status, cost, what it
    achieves, its target and every upgrade it buys (as provision says them)."""
    from inferplan.cli.run import _render
    from inferplan.runtime.pipeline import RunReport
    from inferplan.units import si

    net = inferplan.load_network(ROOT / "examples" / "network.json")
    plan = inferplan.provision(net, inferplan.load_profile("vgg16"), throughput=30)
    assert plan.node_upgrades and plan.link_upgrades  # the plan buys both kinds
    _render(RunReport(plan=plan, inferences=10, warmup=2, emulated=True,
                      predicted_interval=plan.interval, measured_interval=plan.interval,
                      latency_median_s=0.1, latency_p95_s=0.1, stages=(), outputs_match=True,
                      max_abs_diff=0.0, mode="emulate"))  # fmt: skip
    out = capsys.readouterr().out
    assert f"plan: psg (optimal): cost {plan.cost:.6g} price units\n" in out
    assert "target:   interval 33.33 ms, 30 inferences/s" in out
    bought = out.split("upgrades: ", 1)[1].splitlines()[0].split(", ")
    assert sorted(bought) == sorted(
        [f"{node} +{si(amount, 'FLOP/s')}" for node, amount in plan.node_upgrades.items()]
        + [f"{u.source} -> {u.target} +{si(u.amount, 'bit/s')}" for u in plan.link_upgrades]
    )
