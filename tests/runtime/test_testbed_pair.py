"""Device-edge co-inference on the testbed: the layout against brute force and the rate of a
message against a token bucket simulated here, then (as root, with network namespaces and a CPU
controller) a run whose uploads follow the Shannon rate of the SNR observed at each split, its
outputs against the unsplit model, and every way out leaving nothing behind."""

from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from inferplan.runtime.testbed.linux import (  # noqa: E402
    CGROUP_ROOT,
    CPU_BUDGET,
    FRAMING,
    MIN_BURST_S,
    MTU_B,
    ShapedLink,
    _cpu_controller,
    leftovers,
    missing,
)
from inferplan.runtime.testbed.pair import pair_layout  # noqa: E402

from .pipeline_support import finish, processes_marked, start, write  # noqa: E402
from .testbed_support import assert_refused_without_root, left_by  # noqa: E402

LACKS = missing()
V2 = _cpu_controller(CGROUP_ROOT) == "v2"
needs_testbed = pytest.mark.skipif(bool(LACKS), reason="testbed: " + "; ".join(LACKS))

# 16 rows of 1024 values between layers (64 KiB: 45 packets, so that an upload's first packet,
# which goes ahead of the rate, is 2 % of it); a 20 MHz uplink: 5 to 80 ms an upload
SYSTEM = {
    "device": {"cpu_hz": 1.0e9, "kappa": 1.0e-28, "tx_power_w": 0.1, "bandwidth_hz": 2.0e7},
    "edge": {"cpu_hz": 2.0e9},
    "downlink_bps": 1.0e9,
    "inferences_per_update": 1000,
    "energy_weight": 0.5,
    "channel": {"kind": "rayleigh", "mean_snr": 10.0, "min_snr": 0.25},
    "layers": {"input_bits_per_element": 32},
}
MODEL = ["mlp-1024x4", "--input-shape", "16,1024"]


# --------------------------------------------------------------------------- no root needed


@settings(max_examples=100)
@given(layer_s=st.lists(st.floats(1e-4, 0.05), min_size=1, max_size=6),
       device_f=st.floats(0.05, 20.0), edge_f=st.floats(0.05, 20.0), data=st.data())  # fmt: skip
def test_the_layout_holds_each_side_to_its_work_within_the_budget(layer_s, device_f, edge_f,
                                                                   data):  # fmt: skip
    n = len(layer_s)
    placement = data.draw(st.integers(0, n))
    device_s = [t * device_f for t in layer_s]  # the model's times: the work's, scaled
    edge_s = [t * edge_f for t in layer_s]
    lay = pair_layout(lambda r: [t * r for t in layer_s], device_s, edge_s, placement,
                      cpus=[0, 1])  # fmt: skip
    dr, er = lay.repeats
    first = min(placement + 1, n) - 1
    # each side's shortest stretch of compute, repeated, takes at least the minimum burst
    if placement:
        assert dr * min(layer_s[:placement]) >= MIN_BURST_S * (1 - 1e-9) or dr == 1000
        assert (dr - 1) * min(layer_s[:placement]) < MIN_BURST_S
    assert er * sum(layer_s[first:]) >= MIN_BURST_S * (1 - 1e-9) or er == 1000
    # at the quota, each side's work takes k times its modelled time
    k = lay.dilation
    if placement:
        device_q = lay.quotas[0]
        assert device_q is not None
        assert dr * sum(layer_s[:placement]) / device_q == pytest.approx(
            k * sum(device_s[:placement]), rel=1e-9
        )
    else:
        assert lay.quotas[0] is None
    edge_q = lay.quotas[1]
    assert edge_q is not None
    assert er * sum(layer_s) / edge_q == pytest.approx(k * sum(edge_s), rel=1e-9)
    # the least dilation that fits: on two cores each side has its own
    demands = [q * k for q in lay.quotas if q is not None]
    assert k == pytest.approx(max(1.0, max(demands) / CPU_BUDGET), rel=1e-9)
    assert lay.cpus[0] != lay.cpus[1] or lay.quotas[0] is None


def _token_bucket_seconds(payload_b, rate_bps, burst_b):
    """When the last packet of a message of ``payload_b`` bytes leaves a token bucket of
    ``burst_b`` bytes, full at the start, that sends a packet whenever it holds tokens and
    charges it afterwards (HTB), filling at ``rate_bps`` of payload (the loopback's bytes)."""
    fill = rate_bps * FRAMING / 8  # loopback bytes per second
    packets, left = [], payload_b
    while left > 0:  # bounded: one packet of up to MTU_B - 52 payload bytes per step
        size = min(left, MTU_B - 52)
        packets.append(size + 66)  # IPv4, TCP with timestamps, Ethernet header
        left -= size
    tokens, now = burst_b, 0.0
    for size in packets:
        if tokens < 0:
            now += -tokens / fill
            tokens = 0.0
        tokens -= size
    return now


@settings(max_examples=200)
@given(packets=st.integers(3, 400), seconds=st.floats(0.005, 2.0))
def test_a_message_sent_at_its_rate_arrives_in_its_time_through_a_token_bucket(packets, seconds):
    payload = packets * (MTU_B - 52)
    rate = ShapedLink.message_rate(payload, seconds)
    burst = max(ShapedLink.BURST_B, rate * FRAMING / 8 * ShapedLink.BURST_S)
    assert _token_bucket_seconds(payload, rate, burst) == pytest.approx(seconds, rel=0.02)


def test_device_run_testbed_refuses_an_edge_a_token_and_pacing(tmp_path):
    system = write(tmp_path / "system.json", SYSTEM)
    token = tmp_path / "token.txt"
    token.write_text("secret\n")
    for extra, line in [
        (["--edge", "http://127.0.0.1:1"],
         "error: --edge: the testbed starts its own edge: give --edge or --testbed, not both"),
        (["--token-file", str(token)], "error: --token-file: the testbed's edge is its own: "
         "no token"),
        (["--emulate"], "error: --emulate: the testbed runs without pacing: give --testbed or "
         "--emulate, not both"),
    ]:  # fmt: skip
        proc, _ = start(["device", "run", str(system), *MODEL, "--testbed", *extra])
        code, _, err = finish(proc)
        assert (code, err.strip()) == (2, line)


def test_without_root_device_run_testbed_is_refused_in_one_line_before_anything_exists(
    tmp_path,
):
    system = write(tmp_path / "system.json", SYSTEM)
    assert_refused_without_root(["device", "run", str(system), *MODEL, "--testbed"])


def test_the_recalibration_holds_each_side_to_the_cpu_its_compute_took_in_the_warm_up():
    """The quotas set after the warm-up from each side's compute CPU (the device's layers and
    the edge's, as its ``/stats`` reports them) over its modelled time, worked out by hand."""
    from types import SimpleNamespace

    from inferplan.runtime.testbed.pair import DOWNLINK, Pair

    held = [SimpleNamespace(quota=None, period_s=None, holds=0) for _ in range(2)]
    for host in held:
        host.hold = lambda host=host: setattr(host, "holds", host.holds + 1)
    rates: dict[int, float] = {}
    bed = SimpleNamespace(specs=[SimpleNamespace(address="127.0.0.2")], hosts=held,
                          set_rate=rates.__setitem__)  # fmt: skip
    # the layout of the module's example: quotas 0.18 and 0.6 on cores 1 and 0, k = 6.67
    lay = pair_layout(lambda r: [0.004 * r] * 4, [0.01] * 4, [0.002] * 4, 2, cpus=[0, 1],
                      downlink_bps=6e8)  # fmt: skip
    pair = Pair(bed, lay, [0.004] * 4)
    # 4 inferences of 20 ms modelled on the device and 4 ms on the edge; the device's
    # layers took 24 ms of CPU in all (0.3 of a core at the model's speed), the edge's 32 ms
    # (2 cores): k = 2 / 0.6, the edge at the budget, the device at 0.3 / k
    warm = [SimpleNamespace(modelled_device_s=0.02, modelled_edge_s=0.004)] * 4
    pair.recalibrate(warm, [0.024, 0.032])
    k = 2.0 / CPU_BUDGET
    assert pair.dilation == pytest.approx(k)
    assert pair.quotas == pytest.approx((0.3 / k, CPU_BUDGET))
    assert [h.quota for h in held] == pytest.approx([0.3 / k, CPU_BUDGET])
    assert [h.holds for h in held] == [1, 1] and held[0].period_s == pair.period_s
    assert rates == {DOWNLINK: pytest.approx(6e8 / k)}


# --------------------------------------------------------------------------- on the testbed


@needs_testbed
def test_uploads_follow_the_shannon_rate_of_the_snr_at_the_split_and_outputs_are_the_models(
    tmp_path,
):
    from inferplan.runtime.layered import ModelSpec, build_layers, load_model_system
    from inferplan.runtime.testbed.pair import run_on_testbed

    spec = ModelSpec("mlp-1024x4", input_shapes=((16, 1024),))
    system = load_model_system(write(tmp_path / "system.json", SYSTEM),
                               build_layers(spec, weights=False).profile)  # fmt: skip
    inputs = [(torch.randn(16, 1024, generator=torch.Generator().manual_seed(k)),)
              for k in range(12)]  # fmt: skip
    mine = os.getpid()
    run = run_on_testbed(system, spec, method="fixed:1", inferences=12, seed=3, inputs=inputs,
                         warmup=4)  # fmt: skip
    assert [p for _, p in leftovers() if p.name.split("-")[2] == str(mine)] == []
    assert len(run.records) == 12 and not run.failed
    assert run.to_dict()["mode"] == "testbed"
    bed = run.testbed
    assert bed is not None and bed["dilation"] >= 1 and bed["rate_changes"] >= 12
    # the model's own outputs, computed here from the edge's seeded weights
    model = build_layers(spec, weights=True, seed=0).module
    with torch.no_grad():
        for (x,), out in zip(inputs, run.outputs, strict=True):
            assert out is not None
            torch.testing.assert_close(out[0], model(x), rtol=1e-4, atol=1e-5)
    assert run.outputs_match is True
    # every upload at split 2, its SNR drawn per inference: rates spread over 3x or more, so
    # a link held at any one rate could not pass the check below
    modelled = [r.modelled_upload_s for r in run.records]
    shannon = [SYSTEM["device"]["bandwidth_hz"] * math.log2(1 + r.snr) for r in run.records]
    bits = system.layers.input_bits[1]
    assert modelled == pytest.approx([bits / rate for rate in shannon], rel=1e-9)
    assert max(modelled) / min(modelled) >= 3
    # measured = offset + slope * modelled: the slope within 15 % of 1 (the rate followed
    # the SNR), the offset what the HTTP exchange around each transfer costs: 1.5 to 5.5 ms
    # of the system's time per upload here (a load average of 9), measured; at most 8 ms
    measured = [r.upload_s for r in run.records]
    mx, my = sum(modelled) / len(modelled), sum(measured) / len(measured)
    slope = (sum((x - mx) * (y - my) for x, y in zip(modelled, measured, strict=True))
             / sum((x - mx) ** 2 for x in modelled))  # fmt: skip
    offset = my - slope * mx
    pairs = [(round(1e3 * x, 2), round(1e3 * y, 2)) for x, y in zip(modelled, measured,
                                                                     strict=True)]  # fmt: skip
    assert slope == pytest.approx(1.0, abs=0.15), pairs
    assert -0.002 <= offset <= 0.008, pairs


def _serving_edge(mark, launcher, deadline_s=120):
    """Wait (bounded) until the edge of the run marked ``mark`` serves, held by its quota (the
    launcher moves its compute thread alone into the edge's cgroup once it answers): its
    pid."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for pid in processes_marked(mark):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                held = [task.name for task in Path(f"/proc/{pid}/task").iterdir()
                        if "/host-1" in (task / "cgroup").read_text()]  # fmt: skip
            except OSError:
                continue
            if pid != launcher and b"inferplan.runtime.testbed.pair" in cmdline and held:
                # one thread, and not the one that serves HTTP (the process's main thread);
                # cgroup v2 moves whole processes (CpuQuota.add_thread)
                assert V2 or (len(held) == 1 and held != [str(pid)]), held
                return pid
        time.sleep(0.2)
    raise AssertionError("the edge did not start")


@needs_testbed
@pytest.mark.parametrize("how", ["edge SIGKILL", "launcher SIGTERM", "Ctrl-C"])
def test_every_way_out_of_a_device_run_removes_the_testbed(tmp_path, how):
    system = write(tmp_path / "system.json", SYSTEM)
    proc, mark = start(["device", "run", str(system), *MODEL, "--testbed", "--inferences",
                        "1000", "--method", "fixed:1", "--timeout", "5"])  # fmt: skip
    edge = _serving_edge(mark, proc.pid)
    assert left_by(proc.pid) != []  # the testbed is up
    if how == "edge SIGKILL":
        os.kill(edge, signal.SIGKILL)
    elif how == "launcher SIGTERM":
        os.kill(proc.pid, signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT)
    code, _, err = finish(proc, timeout=90)
    # the edge killed during the warm-up (its calibration asks it, exit 2 as an edge that does
    # not answer the checks) or during the measured run (exit 1): unreachable either way
    want = {"edge SIGKILL": (1, 2), "launcher SIGTERM": (143,), "Ctrl-C": (130,)}[how]
    assert code in want, err
    if how == "edge SIGKILL":
        assert "unreachable" in err.strip().splitlines()[-1]
    assert left_by(proc.pid) == [] and processes_marked(mark) == []
