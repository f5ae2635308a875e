"""Device-edge co-inference on the testbed (:mod:`inferplan.runtime.testbed.linux`): the device and
the real HTTP edge of ``inferplan edge serve``, each held to its modelled processor by a CPU
quota, the uplink shaped by the kernel to the Shannon rate of every upload.

:func:`run_on_testbed` creates a network namespace of its own with the device at ``127.0.0.2``
and the edge at ``127.0.0.3``, and two shaped links: the uplink device -> edge, whose HTB class
is set through netlink just before each upload to ``W log2(1 + gamma_n) / k`` of the SNR the
device observed at the split (how long each change took is reported), and the downlink edge ->
device at ``R_d / k`` (the layers' download). The edge is a process of its own (``python -m
inferplan.runtime.testbed.pair``: :class:`~inferplan.runtime.edge.EdgeService` behind
:func:`~inferplan.runtime.edge.create_app`, served by :func:`~inferplan.runtime.edge.serve`)
in the namespace; once it answers, its compute thread (the one that runs its layers) goes
under the edge's quota, while its HTTP handling stays unheld. The device runs in the calling
thread, which enters the namespace for the run; its layers run on a compute thread of its own
in the device's cgroup (its HTTP client runs beside them, unheld: the model charges an upload
its transfer, not the device's or the edge's work).

The quotas follow the dilation rules of ``inferplan run --testbed``: the layers are timed here
on one thread in CPU seconds just before the run; the device needs
``d_l = r_l sum_{i<=M} t_i / sum_{i<=M} (L_i / f_l)`` of a core and the edge
``d_c = r_c sum_i t_i / sum_i (L_i / f_c)``, where ``r`` (:func:`~inferplan.runtime.testbed.linux.
repeats`) is how many times each side runs each layer so that its shortest stretch of compute
(one layer on the device, layers ``min(M + 1, N)..N`` on the edge) takes at least 10 ms of CPU;
``k`` (:func:`~inferplan.runtime.testbed.linux.dilation`) fits both quotas on the cores, each pinned
to its own. No side sleeps or paces: what the run measures is what the kernel let through.

Examples
--------
Four layers of 4 ms each here; modelled at 10 ms on the device, 2 ms on the edge; two layers
on the device. The device runs each layer 3 times (12 ms), the edge, whose shortest stretch is
layers 3..4, twice; the edge needs 4 cores at the model's speed, and 0.6 of a core is given out
to each side (:data:`~inferplan.runtime.testbed.linux.CPU_BUDGET`), so the run is dilated 6.67x:

>>> lay = pair_layout(lambda r: [0.004 * r] * 4, [0.01] * 4, [0.002] * 4, 2, cpus=[0, 1])
>>> lay.repeats, round(lay.dilation, 2), [round(q, 3) for q in lay.quotas], lay.cpus
((3, 2), 6.67, [0.18, 0.6], (1, 0))
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy.typing as npt

from inferplan.coinference import System
from inferplan.errors import InvalidArgument
from inferplan.runtime.client import EdgeClient, EdgeUnavailable
from inferplan.runtime.device import DeviceRun, InferenceRecord, Tensors, run_device
from inferplan.runtime.layered import LayeredModel, ModelSpec, build_layers, plan_device
from inferplan.runtime.split import run_layer
from inferplan.runtime.testbed.linux import (
    CPU_BUDGET,
    HostSpec,
    LinkSpec,
    ShapedLink,
    Testbed,
    TestbedUnavailable,
    cfs_period,
    dilation,
    host_address,
    repeats,
    require,
)

__all__ = ["Pair", "PairLayout", "pair_layout", "run_on_testbed"]

DEVICE, EDGE = 0, 1  # the hosts, and the links: UPLINK device -> edge, DOWNLINK edge -> device
UPLINK, DOWNLINK = 0, 1
EDGE_PORT = 8000  # in the run's own namespace nothing else listens
LIFTED_BPS = 1e9  # the uplink once the run is over: the outputs are checked at full speed
HTTP_HEAD_B = 128  # bytes of an /infer request's head (request line, Host, Content-Length ...)
START_S = 120.0  # the edge's start-up (imports, the model), bounded
WARMUP = 8  # inferences before the quotas are set again to what the work costs in the run


@dataclass(frozen=True)
class PairLayout:
    """The testbed of a device-edge run: the dilation, the device's and the edge's quota
    (cores), core and repeats, the CFS period and the downlink's rate."""

    dilation: float
    quotas: tuple[float | None, float | None]
    cpus: tuple[int | None, int | None]
    repeats: tuple[int, int]
    period_s: float
    downlink_bps: float
    stage_s: tuple[float, float]  # each side's shortest stretch of compute, modelled


def pair_layout(
    timed: Callable[[int], Sequence[float]],
    device_s: Sequence[float],
    edge_s: Sequence[float],
    placement: int,
    *,
    cpus: Sequence[int],
    downlink_bps: float = math.inf,
    budget: float = CPU_BUDGET,
    at_least: float = 1.0,
) -> PairLayout:
    """The testbed of a run: ``timed(r)[i]`` is the CPU seconds layer ``i`` takes here run
    ``r`` times over (a repeat costs less than the first run: the layer's weights are in the
    caches then), the model gives it ``device_s[i] = L_i / f_l`` on the device and
    ``edge_s[i] = L_i / f_c`` on the edge; ``placement`` (``M``) layers are on the device."""
    layer_s = timed(1)
    n = len(layer_s)
    if not 0 <= placement <= n:
        raise InvalidArgument(f"must be in 0..{n}, got {placement}", field="placement")
    first = min(placement + 1, n) - 1  # the edge's shortest stretch: layers first+1..N
    device_r = repeats(min(layer_s[:placement], default=0.0))
    edge_r = repeats(sum(layer_s[first:]))
    device_t = sum(timed(device_r)[:placement]) if device_r > 1 else sum(layer_s[:placement])
    edge_t = sum(timed(edge_r) if edge_r > 1 else layer_s)
    demands = [
        device_t / sum(device_s[:placement]) if device_t > 0 else None,
        edge_t / sum(edge_s) if edge_t > 0 else None,
    ]
    k, quotas, cores = dilation(demands, cores=len(cpus), budget=budget, at_least=at_least)
    stages = (min(device_s[:placement], default=0.0), sum(edge_s[first:]))
    pinned = tuple(None if c is None else cpus[c] for c in cores)
    return PairLayout(k, (quotas[0], quotas[1]), (pinned[0], pinned[1]), (device_r, edge_r),
                      cfs_period([k * t for t in stages], quotas), downlink_bps / k,
                      stages)  # fmt: skip


def _layer_seconds(layered: LayeredModel, times: int) -> tuple[float, ...]:
    """CPU seconds of each layer here run ``times`` times over, on one thread (as the quotas
    ration them)."""
    import torch

    from inferplan.runtime.measure import random_inputs, time_stages

    (sample,) = random_inputs([s for s, _ in layered.crossings[0]], 1, seed=0,
                              input_dtypes=[d for _, d in layered.crossings[0]])  # fmt: skip
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        stages = [functools.partial(_repeated, stage, times) for stage in layered.stages]
        return time_stages(stages, sample, repeats=10 if times == 1 else 5, clock=time.thread_time)
    finally:
        torch.set_num_threads(threads)


def _repeated(stage: Any, times: int, *values: Any) -> Tensors:
    return run_layer(stage, values, times)


class Pair:
    """The testbed's hold on the device (a :class:`~inferplan.runtime.device.DeviceHost`):
    its layers under the device's quota on its core, the uplink's rate set per upload."""

    def __init__(self, bed: Testbed, lay: PairLayout, layer_s: Sequence[float], *,
                 at_least: float = 1.0) -> None:  # fmt: skip
        self.bed = bed
        self.layout = lay
        self.address = bed.specs[DEVICE].address
        self.dilation = lay.dilation
        self.repeats = lay.repeats[DEVICE]
        self.layer_s = tuple(layer_s)
        self.changes: list[float] = []  # seconds each rate change took
        self.rates: list[float] = []  # the uplink's class rate of each upload (bit/s, run's)
        self.cpu_s = 0.0  # CPU seconds the device's layers took
        self._worker: ThreadPoolExecutor | None = None
        # as set again after the warm-up (recalibrate)
        self.quotas, self.period_s = lay.quotas, lay.period_s
        self.downlink_bps = lay.downlink_bps * lay.dilation
        self.at_least = at_least

    def compute(self, work: Callable[[], Tensors]) -> Tensors:
        assert self._worker is not None, "compute() outside admitted()"
        return self._worker.submit(self._timed, work).result()

    def _timed(self, work: Callable[[], Tensors]) -> Tensors:
        started = time.thread_time()
        try:
            return work()
        finally:
            self.cpu_s += time.thread_time() - started

    def _hold(self) -> None:
        """In the compute thread, once: into the device's cgroup, on its core (moving a
        thread between cgroups takes 0.05 ms at the median but up to 14 ms, measured: once
        per layer it would stretch the device's layers)."""
        import torch

        # one thread of its own: the intra-op threads of OpenMP are set per calling thread,
        # and two of them on the one pinned core spin against each other (measured: the
        # layers took 5.5 times the CPU they were timed at)
        torch.set_num_threads(1)
        self.bed.hosts[DEVICE].add_thread(threading.get_native_id(), os.getpid())
        cpu = self.layout.cpus[DEVICE]
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})  # 0: the calling thread

    @contextlib.contextmanager
    def admitted(self) -> Iterator[None]:
        """While inside, the device's layers run on a compute thread of their own, held by
        the device's quota, and the calling thread (the device's HTTP client) in the run's
        unlimited cgroup, whose scheduler weight keeps the machine's other load from
        stretching it; back home on leaving (the teardown kills what is left in the run's
        cgroups; the compute thread has ended by then)."""
        import torch

        tid, pid = threading.get_native_id(), os.getpid()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the layers on the held thread alone, as they were timed
        self.bed.transport.add_thread(tid, pid)
        self._worker = ThreadPoolExecutor(1, "inferplan-device", initializer=self._hold)
        try:
            yield
        finally:
            self._worker.shutdown(wait=True)
            self._worker = None
            self.bed.home.add_thread(tid, pid)
            torch.set_num_threads(threads)

    def before_upload(self, rate_bps: float, payload_bits: float, body_bytes: int) -> float:
        # the request (head and body, one send) is to take payload_bits / rate_bps, dilated
        seconds = self.dilation * payload_bits / rate_bps
        rate = ShapedLink.message_rate(body_bytes + HTTP_HEAD_B, seconds)
        took = self.bed.set_rate(UPLINK, rate)
        self.changes.append(took)
        self.rates.append(rate)
        return took

    def before_verify(self) -> None:
        self.bed.set_rate(UPLINK, LIFTED_BPS)

    def recalibrate(self, warm: Sequence[InferenceRecord], cpu_s: Sequence[float]) -> None:
        """Dilate the run, from now on, by what each side's work cost in the warm-up
        inferences ``warm`` (``cpu_s``: the CPU seconds the device's and the edge's layers took
        in them, each on its compute thread, which the quota holds alone) over its modelled
        time there, and hold each side to that: in the run the work costs more than timed
        alone before it (caches that the machine's other load emptied while the quota held
        it), which the first timing does not see. The same rule as :func:`pair_layout`, on
        the same cores."""
        lay = self.layout
        modelled = (sum(r.modelled_device_s for r in warm),
                    sum(r.modelled_edge_s for r in warm))  # fmt: skip
        demands: list[float | None] = []
        for side, used in zip((DEVICE, EDGE), cpu_s, strict=True):
            quota = lay.quotas[side]
            timed = None if quota is None else quota * lay.dilation
            measured = used / modelled[side] if used > 0 and modelled[side] > 0 else None
            demands.append(None if timed is None else measured or timed)
        load: dict[int | None, float] = {}
        for cpu, demand in zip(lay.cpus, demands, strict=True):
            load[cpu] = load.get(cpu, 0.0) + (demand or 0.0)
        k = max(self.at_least, 1.0, max(load.values()) / CPU_BUDGET)
        quotas = [None if d is None else d / k for d in demands]
        period = cfs_period([k * t for t in lay.stage_s], quotas)
        for host, quota in zip(self.bed.hosts, quotas, strict=True):
            host.quota, host.period_s = quota, period
            host.hold()
        self.bed.set_rate(DOWNLINK, self.downlink_bps / k)
        self.dilation, self.quotas, self.period_s = k, (quotas[DEVICE], quotas[EDGE]), period

    def summary(self) -> dict[str, Any]:
        lay = self.layout
        changes = sorted(self.changes)
        return {
            "dilation": self.dilation,
            "quotas": {"device": self.quotas[DEVICE], "edge": self.quotas[EDGE]},
            "cfs_period_s": self.period_s,
            "timed": {
                "dilation": lay.dilation,
                "quotas": {"device": lay.quotas[DEVICE], "edge": lay.quotas[EDGE]},
                "layer_cpu_s": list(self.layer_s),
            },
            "cpus": {"device": lay.cpus[DEVICE], "edge": lay.cpus[EDGE]},
            "repeats": {"device": lay.repeats[DEVICE], "edge": lay.repeats[EDGE]},
            "rate_changes": len(changes),
            "rate_change_s": {
                "median": statistics.median(changes) if changes else None,
                "max": changes[-1] if changes else None,
            },
            "setup_s": self.bed.setup_s,
        }


def _start_edge(bed: Testbed, lay: PairLayout, folder: Path, config: dict[str, Any],
                ) -> subprocess.Popen[bytes]:  # fmt: skip
    from inferplan.runtime.ranks import die_with_parent

    (folder / "edge.pkl").write_bytes(pickle.dumps(config))
    enter, cpu = bed.preexec(), lay.cpus[EDGE]

    def prepare() -> None:
        die_with_parent()
        enter()
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})  # the edge's every thread, inherited

    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # one compute thread, as the layers were timed
    with open(folder / "edge.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", __name__, str(folder / "edge.pkl")],
                                env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=prepare)  # fmt: skip
    bed.admit(proc.pid)  # start-up at full speed; the quota once it serves
    return proc


def _await_edge(proc: subprocess.Popen[bytes], url: str, folder: Path, timeout_s: float) -> None:
    """Wait (bounded) until the edge answers ``/health``; raise naming why it did not."""
    client = EdgeClient(url, token=None, timeout_s=1.0, retries=0, backoff_s=0.0)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                text = (folder / "edge.log").read_text(errors="replace").strip().splitlines()
                last = text[-1] if text else f"exit status {proc.returncode}"
                raise TestbedUnavailable(f"the edge did not start: {last}", field="testbed")
            with contextlib.suppress(EdgeUnavailable):
                client.request("GET", "/health")
                return
            time.sleep(0.05)
    finally:
        client.close()
    raise TestbedUnavailable(f"the edge did not answer within {timeout_s:g} s", field="testbed")


def _layout(system: System, spec: ModelSpec, method: str, weights_seed: int,
            at_least: float) -> tuple[PairLayout, tuple[float, ...]]:  # fmt: skip
    """The run's layout from the model's layers timed here (built for it alone), and their
    CPU seconds run once."""
    real = build_layers(spec, weights=True, seed=weights_seed)
    if real.n_layers != system.n_layers:
        raise InvalidArgument(f"the system has {system.n_layers} layers, the model "
                              f"{real.n_layers} blocks")  # fmt: skip
    timings: dict[int, tuple[float, ...]] = {}

    def timed(times: int) -> tuple[float, ...]:
        if times not in timings:
            timings[times] = _layer_seconds(real, times)
        return timings[times]

    cycles = system.layers.cycles
    lay = pair_layout(timed, [c / system.device.cpu_hz for c in cycles],
                      [c / system.edge.cpu_hz for c in cycles],
                      plan_device(system, method).placement,
                      cpus=sorted(os.sched_getaffinity(0)), downlink_bps=system.downlink_bps,
                      at_least=at_least)  # fmt: skip
    return lay, timed(1)


def run_on_testbed(
    system: System,
    spec: ModelSpec,
    *,
    method: str = "optimal",
    inferences: int = 100,
    seed: int = 0,
    inputs: Sequence[Tensors] | None = None,
    snr: npt.ArrayLike | None = None,
    phase: npt.ArrayLike | None = None,
    weights_seed: int = 0,
    at_least: float = 1.0,
    warmup: int = WARMUP,
    timeout_s: float = 30.0,
    verify: bool = True,
    on_inference: Callable[[int], None] | None = None,
) -> DeviceRun:
    """Run ``inferences`` co-inferences of ``spec`` with the strategy ``method`` on a testbed
    of their own (see the module's description), and tear it down whatever happens.

    ``at_least``: the least dilation; ``warmup``: inferences (their SNRs drawn with
    ``seed + 1``, not reported) after which both quotas are set again to the CPU the work took
    in them (:meth:`Pair.recalibrate`); the other parameters as for
    :func:`~inferplan.runtime.device.run_device`. The report's ``testbed`` says what the run
    was held to (dilation, quotas, repeats, CFS period) and how long the rate changes took.

    Raises
    ------
    TestbedUnavailable
        Naming what the machine lacks, before anything is created; or that the edge did not
        start.
    """
    require()
    plan_device(system, method)  # an unknown method is refused before anything is created
    lay, layer_s = _layout(system, spec, method, weights_seed, at_least)
    device, edge = host_address(DEVICE), host_address(EDGE)
    first_rate = system.device.bandwidth_hz / lay.dilation  # set again before every upload
    hosts = [HostSpec(device, lay.quotas[DEVICE]), HostSpec(edge, lay.quotas[EDGE])]
    links = [LinkSpec(device, edge, first_rate), LinkSpec(edge, device, lay.downlink_bps)]
    layered = build_layers(spec, weights=False)
    url = f"http://{edge}:{EDGE_PORT}"
    with (tempfile.TemporaryDirectory(prefix="inferplan-pair-") as tmp,
          Testbed(hosts, links, period_s=lay.period_s) as bed):  # fmt: skip
        config = {"system": system, "spec": spec, "seed": weights_seed, "host": edge,
                  "port": EDGE_PORT, "repeats": lay.repeats[EDGE]}  # fmt: skip
        proc = _start_edge(bed, lay, Path(tmp), config)
        try:
            pair = Pair(bed, lay, layer_s, at_least=at_least)
            with bed.inside():
                _await_edge(proc, url, Path(tmp), START_S)
                # the edge's compute thread alone is held from now on; its HTTP handling
                # (receiving an upload, parsing it) stays in the unlimited cgroup, as the
                # device's client does: the model charges it to the upload
                compute_tid = int((Path(tmp) / "edge.tid").read_text())
                bed.hosts[EDGE].add_thread(compute_tid, proc.pid)
                stats = EdgeClient(url, token=None, timeout_s=timeout_s, retries=0,
                                   backoff_s=0.0)  # fmt: skip
                with pair.admitted(), contextlib.closing(stats):
                    co_infer = functools.partial(
                        run_device,
                        system,
                        layered,
                        url,
                        method=method,
                        emulate=False,
                        timeout_s=timeout_s,
                        retries=0,
                        host=pair,
                    )
                    used: list[tuple[float, float]] = []  # after each warm-up inference

                    def count(index: int) -> None:
                        used.append((pair.cpu_s, stats.request("GET", "/stats").json()
                                     ["compute_cpu_s"]))  # fmt: skip

                    warm = co_infer(inferences=warmup + 1, seed=seed + 1, verify=False,
                                  on_inference=count)  # fmt: skip
                    # from the end of the first inference on: the download is not the work;
                    # a warm-up that failed (the edge gone) leaves the quotas as timed, and
                    # the run then says why it fails
                    if len(used) > 1 and not warm.failed:
                        pair.recalibrate(
                            [r for r in warm.records if r.index > 0],
                            [b - a for a, b in zip(used[0], used[-1], strict=True)],
                        )
                    return co_infer(
                        inferences=inferences,
                        seed=seed,
                        inputs=inputs,
                        snr=snr,
                        phase=phase,
                        verify=verify,
                        on_inference=on_inference,
                    )
        finally:
            from inferplan.runtime.ranks import stop_ranks

            stop_ranks([proc])


def _serve_edge(config_path: str) -> None:
    """The edge process: the model with real weights, served on its testbed address, its
    layers on a compute thread of their own whose id it writes to ``edge.tid`` beside the
    config (the launcher holds that thread alone by the edge's quota)."""
    import torch

    from inferplan.runtime.client import listen
    from inferplan.runtime.edge import EdgeService, create_app, serve

    torch.set_num_threads(1)
    config = pickle.loads(Path(config_path).read_bytes())
    layered = build_layers(config["spec"], weights=True, seed=config["seed"])
    # one OpenMP thread on the compute thread too: its thread count is per calling thread
    worker = ThreadPoolExecutor(1, "inferplan-edge", initializer=torch.set_num_threads,
                                initargs=(1,))  # fmt: skip
    tid = worker.submit(threading.get_native_id).result()
    written = Path(config_path).with_name("edge.tid.new")
    written.write_text(str(tid))
    written.replace(written.with_name("edge.tid"))  # whole, before /health answers

    def compute(work: Callable[[], Tensors]) -> Tensors:
        return worker.submit(work).result()

    service = EdgeService(layered, config["system"], repeats=config["repeats"], compute=compute)
    try:
        serve(create_app(service), listen(config["host"], config["port"]))
    finally:
        worker.shutdown()


if __name__ == "__main__":
    _serve_edge(sys.argv[1])
