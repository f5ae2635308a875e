"""The testbed: quotas and dilation checked against brute force, then (as root, with network
namespaces and a CPU controller) the kernel's shaping and quotas measured, a plan run on it, and
nothing left behind on any way out.

Timing tolerances are those of a quiet machine. Where a check depends on getting the cores the
quotas grant, the test first measures what an unlimited process gets here and says so when the
machine's other load takes too much of it.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.errors import InvalidArgument
from inferplan.runtime.testbed import linux as tb
from inferplan.runtime.testbed.linux import (
    MIN_QUOTA_S,
    HostSpec,
    LinkSpec,
    cfs_period,
    cleanup,
    dilation,
    host_address,
    leftovers,
    missing,
    require,
)

LACKS = missing()
needs_testbed = pytest.mark.skipif(bool(LACKS), reason="testbed: " + "; ".join(LACKS))


# --------------------------------------------------------------------------- no root needed

demands_st = st.lists(st.one_of(st.none(), st.floats(1e-3, 20.0)), min_size=1, max_size=8)


@settings(max_examples=200)
@given(data=st.data(), demands=demands_st, cores=st.integers(1, 3), budget=st.floats(0.3, 1.0),
       at_least=st.floats(1.0, 10.0))  # fmt: skip
def test_dilation_packs_every_quota_and_transport_onto_a_core_within_four_thirds_of_the_least(
    data, demands, cores, budget, at_least
):
    beside = data.draw(st.one_of(st.none(), st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 5.0)),
                                                     min_size=len(demands),
                                                     max_size=len(demands))))  # fmt: skip
    k, quotas, placed = dilation(demands, cores=cores, budget=budget, at_least=at_least,
                                 beside=beside)  # fmt: skip
    extra = beside or [0.0] * len(demands)
    assert [q is None for q in quotas] == [d is None for d in demands]
    assert [p is None for p in placed] == [q is None for q in quotas]
    load = [0.0] * cores
    for d, q, c, e in zip(demands, quotas, placed, extra, strict=True):
        if d is not None:
            assert q == pytest.approx(d / k) and 0 <= c < cores
            load[c] += q + e / k  # the quota and, beside it, the host's transport
    # every host's need at k fits: the held ones' on their cores, the rest's anywhere there is
    # room (they are not pinned)
    spare = sum(budget - x for x in load)
    unpinned = sum(e / k for d, e in zip(demands, extra, strict=True) if d is None)
    assert max(load) <= budget * (1 + 1e-9) and unpinned <= spare * (1 + 1e-9) + 1e-12
    assert k >= max(at_least, 1.0)
    # brute force over every assignment: the least dilation that fits the budget
    needs = [(d or 0.0) + e for d, e in zip(demands, extra, strict=True) if (d or 0.0) + e > 0]
    best = min(
        max(math.fsum(n for n, c in zip(needs, combo, strict=True) if c == core)
            for core in range(cores))
        for combo in itertools.product(range(cores), repeat=len(needs))
    ) if needs else 0.0  # fmt: skip
    least = max(at_least, 1.0, best / budget)
    assert least * (1 - 1e-9) <= k <= least * 4 / 3 * (1 + 1e-9)


def test_a_path_whose_links_need_more_cpu_than_its_nodes_is_dilated_for_its_transport():
    from inferplan.runtime.testbed.run import layout

    # a forwarding node between two held ones; 800 Mbit/s links: at 10 ns a byte at each end
    # a link's transfer takes a core at its source and one at its target at the plan's speed
    cost = tb.TransportCost(10e-9, 10e-9)
    args = ([0.012, 0.0, 0.012], [0.1, 0.0, 0.1], [800e6, 800e6], [0.0, 0.0])
    alone = layout(*args, cpus=[0, 1])
    lay = layout(*args, cpus=[0, 1], transport=cost)
    assert alone.dilation == 1.0
    shares = cost.shares([link.rate_bps for link in lay.links])  # at the dilated rates
    assert shares == pytest.approx([x / lay.dilation for x in [1.0, 2.0, 1.0]])
    # 0.12 + 1 cores at either end, 2 in the middle: 4.24 cores' need on 2 cores of 0.6
    assert lay.dilation >= (0.12 * 2 + 4.0) / (2 * 0.6)
    for core in (0, 1):
        assert sum(q + s for q, s, c in zip(lay.quotas, shares, lay.cpus, strict=True)
                   if c == core) <= 0.6 + 1e-9  # fmt: skip
    assert lay.quotas[0] == pytest.approx(0.12 / lay.dilation)


def test_a_links_transport_is_charged_to_its_two_ends_at_its_rate():
    cost = tb.TransportCost(3e-9, 2e-9)
    assert cost.shares([]) == [0.0]
    # host 1 sends link 1 (16 Mbit/s = 2 MB/s) and receives link 0 (1 MB/s)
    assert cost.shares([8e6, 16e6, 0.0]) == pytest.approx([3e-3, 2e-3 + 6e-3, 4e-3, 0.0])


def test_bad_transport_shares_are_refused():
    with pytest.raises(InvalidArgument, match="one non-negative share per host"):
        dilation([0.5, None], cores=1, beside=[0.1])
    with pytest.raises(InvalidArgument, match="one non-negative share per host"):
        dilation([0.5], cores=1, beside=[-0.1])


@settings(max_examples=200)
@given(stages=st.lists(st.floats(0.0, 5.0), max_size=6),
       quotas=st.lists(st.one_of(st.none(), st.floats(1e-3, 1.0)), max_size=6))  # fmt: skip
def test_the_cfs_period_is_within_the_kernels_bounds_and_grants_every_quota_a_millisecond(
    stages, quotas
):
    period = cfs_period(stages, quotas)
    assert 1e-3 <= period <= 1.0
    for q in quotas:
        if q is not None and MIN_QUOTA_S / q <= 1.0:
            assert q * period >= MIN_QUOTA_S * (1 - 1e-12)
    positive = [s for s in stages if s > 0]
    if positive and all(q is None for q in quotas) and min(positive) / 20 >= 1e-3:
        assert period == pytest.approx(min(min(positive) / 20, 1.0))


def test_bad_dilations_are_refused():
    with pytest.raises(InvalidArgument, match="at least 1"):
        dilation([0.5], cores=2, at_least=0.5)
    with pytest.raises(InvalidArgument, match="at least 1"):
        dilation([0.5], cores=0)
    with pytest.raises(InvalidArgument, match="positive"):
        dilation([0.0], cores=1)


@settings(max_examples=100)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), max_size=10))
def test_link_times_are_the_receivers_view_of_a_one_item_server(pairs):
    from inferplan.runtime.testbed.run import link_times

    sent, gaps = [], []
    clock = 0.0
    arrived = []
    for wait, took in pairs:  # items sent `wait` after the last arrival, each taking `took`
        clock += wait
        sent.append(clock)
        gaps.append(took)
        start = max(clock, arrived[-1] if arrived else -math.inf)
        arrived.append(start + took)
        clock = start
    assert link_times(sent, arrived) == pytest.approx(gaps)


def test_host_addresses_are_loopback_and_distinct():
    addresses = [host_address(k) for k in range(300)]
    assert len(set(addresses)) == 300
    assert all(a.startswith("127.") and a != "127.0.0.1" for a in addresses)


def test_a_machine_without_a_cpu_controller_is_refused_naming_it(tmp_path):
    assert any("CPU controller" in m for m in missing(cgroup_root=tmp_path))
    with pytest.raises(tb.TestbedUnavailable, match="CPU controller"):
        require(cgroup_root=tmp_path)
    with pytest.raises(tb.TestbedUnavailable, match="CPU controller"):
        tb.Testbed([HostSpec(host_address(0))], [], cgroup_root=tmp_path)


def test_without_root_the_run_is_refused_with_one_line_before_anything_exists(tmp_path):
    pytest.importorskip("torch")
    from .pipeline_support import chain, model_args, write
    from .testbed_support import assert_refused_without_root

    net = write(tmp_path / "net.json", chain(("s", "a", "t"), 1e9, 1e9))
    assert_refused_without_root(["run", str(net), *model_args("mlp"), "--throughput", "10",
                                 "--testbed"])  # fmt: skip


# --------------------------------------------------------------------------- the kernel's part


def _in_namespace(bed, code):
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            preexec_fn=bed.preexec())  # fmt: skip


@needs_testbed
def test_a_bulk_transfer_over_a_shaped_link_moves_at_its_rate():
    rate, size = 16e6, 2_000_000  # one second of payload
    src, dst = host_address(0), host_address(1)
    with tb.Testbed([HostSpec(src), HostSpec(dst)], [LinkSpec(src, dst, rate)]) as bed:
        receiver = _in_namespace(
            bed,
            f"""
import socket, time
server = socket.socket(); server.bind(("{dst}", 7000)); server.listen(1)
print("ready", flush=True)
conn, _ = server.accept(); conn.settimeout(30); got = 0; buf = bytearray(1 << 20)
while got < {size}:
    n = conn.recv_into(buf)
    if not n: break
    got += n
print(got, time.monotonic(), flush=True)
""",
        )
        assert receiver.stdout.readline().strip() == "ready"
        sender = _in_namespace(
            bed,
            f"""
import socket, time
s = socket.socket(); s.bind(("{src}", 0)); s.connect(("{dst}", 7000))
print(time.monotonic(), flush=True)
s.sendall(bytes({size})); s.close()
""",
        )
        started = float(sender.stdout.readline())
        got, ended = receiver.stdout.readline().split()
        assert sender.wait(30) == 0 and receiver.wait(30) == 0
    assert int(got) == size
    assert size * 8 / (float(ended) - started) == pytest.approx(rate, rel=0.05)


def _cpu_loop(bed, host, cpu_s=0.5):
    """Wall seconds a loop of ``cpu_s`` CPU seconds takes in host ``host``'s cgroup."""
    proc = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
sys.stdin.readline()
t, w = time.thread_time(), time.monotonic()
while time.thread_time() - t < {cpu_s}:
    pass
print(time.monotonic() - w)
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    bed.place(host, proc.pid)
    out, _ = proc.communicate("go\n", timeout=60)
    return float(out)


@needs_testbed
def test_a_cpu_bound_loop_under_a_quarter_core_quota_takes_four_times_as_long():
    hosts = [HostSpec(host_address(0)), HostSpec(host_address(1), 0.25)]
    with tb.Testbed(hosts, [], period_s=0.01) as bed:
        free = _cpu_loop(bed, 0)
        held = _cpu_loop(bed, 1)
    share = 0.5 / free  # what an unlimited process got of a core here
    # the kernel never grants more than the quota, whatever else the machine runs
    assert held >= 4 * 0.5 * 0.9
    if share < 0.9:
        pytest.skip(f"the machine's other load left an unlimited loop {share:.0%} of a core: "
                    f"the quota's 4x is {held / 0.5:.2f}x, not checked to 10 %")  # fmt: skip
    assert held / 0.5 == pytest.approx(4, rel=0.10)


@needs_testbed
def test_set_up_and_teardown_leave_nothing_and_cleanup_removes_what_a_killed_run_left():
    hosts = [HostSpec(host_address(k), 0.2) for k in range(5)]
    links = [LinkSpec(host_address(k), host_address(k + 1), 1e7) for k in range(4)]
    with tb.Testbed(hosts, links) as bed:
        made = {path.name for _, path in leftovers()}
        assert bed.name in made
        shown = subprocess.run([*bed.exec_prefix(), "tc", "class", "show", "dev", "lo"],
                               capture_output=True, text=True, timeout=10).stdout  # fmt: skip
        assert shown.count("class htb") == 4
    assert bed.name not in {path.name for _, path in leftovers()}
    # a run killed outright leaves its namespace and cgroups; they go at the next clean-up
    from .testbed_support import killed_testbed

    name = killed_testbed()
    assert name in {path.name for _, path in leftovers()}
    from .pipeline_support import ROOT, env

    done = subprocess.run([sys.executable, "-m", "inferplan", "testbed", "--cleanup", "--json"],
                          cwd=ROOT, env=env("cleanup"), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {f"netns {name}", f"cgroup {name}"} <= set(json.loads(done.stdout)["removed"])
    assert name not in {path.name for _, path in leftovers()}
    assert cleanup() == []


@needs_testbed
def test_a_link_rate_changes_through_netlink_in_milliseconds():
    src, dst = host_address(0), host_address(1)
    with tb.Testbed([HostSpec(src), HostSpec(dst)], [LinkSpec(src, dst, 1e6)]) as bed:
        took = [bed.set_rate(0, rate) for rate in (2e6, 5e7, 3e5)]
        shown = subprocess.run([*bed.exec_prefix(), "tc", "class", "show", "dev", "lo"],
                               capture_output=True, text=True, timeout=10).stdout  # fmt: skip
    assert all(0 < t < 1 for t in took)
    (rate,) = re.findall(r" rate (\d+)bit ", shown)  # the payload's rate plus its headers'
    assert int(rate) == pytest.approx(3e5 * (1500 + 14) / (1500 - 52), rel=1e-3)


@settings(max_examples=50)
@given(count=st.integers(0, 200))
def test_the_quota_is_set_again_every_round_after_the_first_inference(count):
    from inferplan.runtime.testbed.run import ROUND, calibrations

    rounds = calibrations(count)
    assert all(1 < b <= count for b in rounds)
    assert [b - a for a, b in zip((1, *rounds), rounds, strict=False)] == [ROUND] * len(rounds)
    assert count - (rounds[-1] if rounds else 1) < ROUND  # no longer stretch without one


def test_a_rank_holds_its_compute_to_the_cpu_of_the_last_round_over_its_planned_time(tmp_path):
    from inferplan.runtime.testbed.run import ROUND, Placement, SocketLinks

    placement = Placement((host_address(0),), (str(tmp_path),), (0.5,), (None,), str(tmp_path),
                          "v2", 1.0, 0.002, (1,))  # fmt: skip
    links = SocketLinks(placement, 0, 1, 1.0, planned_s=0.1, inferences=20)
    cpu = [0.09] + [0.02, 0.03, 0.5, 0.01] + [0.04] * ROUND  # a cold first, then two rounds
    assert links.warm([]) == 0.5 and not (tmp_path / "cpu.max").exists()
    assert [links.warm(cpu[:n]) for n in range(1, 1 + ROUND)] == [0.5] * ROUND
    assert links.warm(cpu[: 1 + ROUND]) == pytest.approx(0.25)  # median 0.025 s over 0.1 s
    # 0.25 of a core needs a period of 4 ms for the kernel's 1 ms
    assert (tmp_path / "cpu.max").read_text() == "1000 4000"
    assert links.warm(cpu[: 2 + ROUND]) == pytest.approx(0.25)  # mid-round: unchanged
    assert links.warm(cpu) == pytest.approx(0.4)
    assert (tmp_path / "cpu.max").read_text() == "1000 2500"


def test_draining_the_pipeline_waits_for_every_place_in_flight():
    import threading

    from inferplan.runtime.pipeline import _drain

    window = threading.Semaphore(3)
    window.acquire()
    window.acquire()  # two inferences in flight
    threading.Timer(0.05, window.release).start()
    with pytest.raises(TimeoutError, match="1 inferences still in it"):
        _drain(window, 3, 0.2)  # one is never acknowledged
    window.release()
    _drain(window, 3, 1.0)
    assert all(window.acquire(blocking=False) for _ in range(3))
    assert not window.acquire(blocking=False)  # all places back, no more


@needs_testbed
def test_what_a_shaped_byte_costs_is_measured_once_per_process():
    cost = tb.transport_cost()
    per_byte = cost.send_s_per_b + cost.receive_s_per_b
    # a shaped transfer at 1,500-byte packets costs nanoseconds a byte (16 to 21 ns here),
    # at both ends; 1 microsecond would be a megabyte a second per core
    assert 1e-10 < per_byte < 1e-6 and cost.receive_s_per_b > 0
    assert tb.transport_cost() is cost
    assert not [p for _, p in leftovers() if p.name.startswith(f"{tb.PREFIX}{os.getpid()}-")]
