"""A co-design plan carried out on the testbed (:mod:`inferplan.runtime.testbed.linux`): what the
launcher sets up and what each rank does differently there.

The launcher (:func:`hosting`) times each path node's work (its blocks, or its layers for a plan
cut at ideals) on this machine, one thread, just before the run, so that path node ``v``'s work
takes ``t_v`` seconds here; the plan gives it
``p_v = Q_v / (C_v + x_v)``. Node ``v`` then needs ``d_v = t_v / p_v`` of a core (the
effective speed here is ``F_v = Q_v / t_v``, so ``d_v = (C_v + x_v) / F_v``), beside it the CPU
its links' transfers take (:func:`~inferplan.runtime.testbed.linux.transport_cost`), and the run is
dilated by ``k`` (:func:`~inferplan.runtime.testbed.linux.dilation`): node ``v``'s rank runs under a
CFS quota of ``d_v / k`` cores, and link ``u -> v`` is shaped at ``(B + y) / k`` (its delay,
if any, stretched to ``k`` times). Every stage so takes ``k`` times its planned time, and the
prediction of the run is the plan's ``k`` times. A node that only forwards (or whose blocks
have no work) runs without a quota.

Each rank binds to its node's address. The activations go from rank to rank over one TCP
connection per path link, bound at both ends (``gloo`` cannot bind the side that connects, so
its traffic could not be told apart by address); they are the tensors' raw bytes, their shapes
known to both ends. Control traffic (set-up, acknowledgements, results) goes through
``torch.distributed`` on ``127.0.0.1``, which no class shapes. A rank applies its quota just
before the stream starts and lifts it when its part is done, so start-up and the final check
run at full speed.

Examples
--------
Two nodes whose blocks take 30 ms and 4 ms here, planned at 20 ms each, a forwarding node
between them, on two cores of which 0.6 each are given out. Node 2's compute is shorter than
the 10 ms a host's work takes at least (:func:`~inferplan.runtime.testbed.linux.repeats`): it runs
its blocks 3 times over (12 ms). Node 0 needs 1.5 cores, so the run is dilated by
``k = 1.5 / 0.6``, and the two nodes are pinned to different cores:

>>> lay = layout([0.03, 0.0, 0.004], [0.02, 0.0, 0.02], [8e6, 8e6], [0.0, 0.0], cpus=[0, 1])
>>> round(lay.dilation, 3), [round(q, 3) if q else q for q in lay.quotas], lay.cpus, lay.repeats
(2.5, [0.6, None, 0.24], (0, None, 1), (1, 1, 3))
>>> [round(link.rate_bps) for link in lay.links]
[3200000, 3200000]
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import statistics
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from inferplan.runtime.emulate import path_bandwidths
from inferplan.runtime.split import TensorSpec
from inferplan.runtime.testbed.linux import (
    CPU_BUDGET,
    HostSpec,
    LinkSpec,
    Testbed,
    TransportCost,
    cfs_period,
    dilation,
    host_address,
    repeats,
    require,
    transport_cost,
)

__all__ = ["Hosting", "Layout", "Placement", "SocketLinks", "calibrations", "hosting", "layout",
           "placed"]

PLACEMENT = "testbed.json"  # in the run's folder: what each rank needs to know
DATA_PORT = 7000  # in the run's own namespace nothing else listens
MASTER_PORT = 29500


@dataclass(frozen=True)
class Layout:
    """The testbed a plan needs: the dilation, each host's quota, the CFS period, the links."""

    dilation: float
    quotas: tuple[float | None, ...]
    cpus: tuple[int | None, ...]
    period_s: float
    hosts: tuple[HostSpec, ...]
    links: tuple[LinkSpec, ...]
    repeats: tuple[int, ...]


def layout(
    real_s: Sequence[float],
    planned_s: Sequence[float],
    bandwidths: Sequence[float],
    delays: Sequence[float],
    *,
    cpus: Sequence[int],
    budget: float = CPU_BUDGET,
    at_least: float = 1.0,
    transport: TransportCost | None = None,
) -> Layout:
    """The testbed of a path: node ``l``'s blocks take ``real_s[l]`` here and ``planned_s[l]``
    in the plan; link ``l`` has ``bandwidths[l]`` (bit/s, after upgrades) and ``delays[l]`` (s).
    ``cpus``: the cores the hosts are pinned to, ``budget`` of each given out; ``at_least``:
    the least dilation; ``transport``: what moving a byte over a shaped link costs here
    (:func:`~inferplan.runtime.testbed.linux.transport_cost`; None: nothing), which each host needs
    beside its quota for its links at their rates. A node whose blocks take less than 10 ms
    here runs them ``r`` times over (:func:`~inferplan.runtime.testbed.linux.repeats`) under an
    ``r`` times larger quota."""
    times = tuple(repeats(t) for t in real_s)
    demands = [r * t / p if t > 0 and p > 0 else None
               for r, t, p in zip(times, real_s, planned_s, strict=True)]  # fmt: skip
    beside = transport.shares(bandwidths) if transport is not None else None
    k, quotas, cores = dilation(demands, cores=len(cpus), budget=budget, at_least=at_least,
                                beside=beside)  # fmt: skip
    period = cfs_period([k * p for p in planned_s], quotas)  # links are the shaper's, not CFS's
    hosts = tuple(HostSpec(host_address(i), q) for i, q in enumerate(quotas))
    links = tuple(LinkSpec(host_address(i), host_address(i + 1), b / k, d * k)
                  for i, (b, d) in enumerate(zip(bandwidths, delays, strict=True)))  # fmt: skip
    pinned = tuple(None if c is None else cpus[c] for c in cores)
    return Layout(k, tuple(quotas), pinned, period, hosts, links, times)


@dataclass(frozen=True)
class Placement:
    """What every rank reads from the run's folder: the hosts' addresses, cgroups (their
    quotas, set already, for the report), cores, the unlimited cgroup of the rest, the cgroup
    version, the dilation, and how many times each runs its blocks."""

    addresses: tuple[str, ...]
    cgroups: tuple[str, ...]
    quotas: tuple[float | None, ...]
    cpus: tuple[int | None, ...]
    transport: str
    version: str
    dilation: float
    period_s: float
    repeats: tuple[int, ...]

    def save(self, run_dir: Path) -> None:
        (run_dir / PLACEMENT).write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, run_dir: Path) -> Placement | None:
        path = run_dir / PLACEMENT
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return cls(tuple(data["addresses"]), tuple(data["cgroups"]), tuple(data["quotas"]),
                   tuple(data["cpus"]), data["transport"], data["version"], data["dilation"],
                   data["period_s"], tuple(data["repeats"]))  # fmt: skip


@dataclass
class Hosting:
    """How the launcher starts the ranks: their environment, a ``preexec_fn``, and what to do
    with each started rank's process id; ``dilation`` of the run (1 off the testbed)."""

    env: dict[str, str]
    preexec: Callable[[], None] | None = None
    place: Callable[[int, int], None] = lambda rank, pid: None
    dilation: float = 1.0
    testbed: Testbed | None = None


def placed(lay: Layout, bed: Testbed) -> Placement:
    """What the ranks of ``lay`` on the set-up ``bed`` need to know."""
    return Placement(tuple(h.address for h in lay.hosts), tuple(str(h.path) for h in bed.hosts),
                     lay.quotas, lay.cpus, str(bed.transport.path), bed.version, lay.dilation,
                     lay.period_s, lay.repeats)  # fmt: skip


def node_seconds(traced: Any, plan: Any, sample: Sequence[torch.Tensor]) -> tuple[float, ...]:
    """CPU seconds of each path node's work here on one thread, the way the ranks run them:
    a quota rations CPU time, and CPU time is what the machine's other load does not
    stretch."""
    from inferplan.runtime.measure import measure_nodes

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return measure_nodes(traced, plan, sample, clock=time.thread_time)
    finally:
        torch.set_num_threads(threads)


def _link_delays(resolved: Any) -> list[float]:
    """Each path link's propagation delay (s, the network's ``delay_s``)."""
    network = resolved.request.network
    where = network.node_position
    ends = zip(network.link_tail, network.link_head, strict=True)
    index = {(int(u), int(v)): k for k, (u, v) in enumerate(ends)}
    return [float(network.link_delay[index[(where[u], where[v])]])
            for u, v in itertools.pairwise(resolved.plan.path)]  # fmt: skip


@contextlib.contextmanager
def hosting(resolved: Any, run_dir: Path) -> Iterator[Hosting]:
    """Set up the testbed of ``resolved`` (a :class:`~inferplan.runtime.pipeline.Resolved`),
    write the ranks' :class:`Placement` into ``run_dir``, and tear it all down on leaving.

    Raises
    ------
    TestbedUnavailable
        Naming what the machine lacks, before anything is created.
    """
    delays = _link_delays(resolved)
    require(delays=any(d > 0 for d in delays))
    from inferplan.runtime.measure import build_model, random_inputs
    from inferplan.runtime.split import trace_model

    request = resolved.request
    model = build_model(request.model, seed=request.seed, dtype=request.dtype)
    traced = trace_model(model, request.input_shapes, blocks=request.blocks, dtype=request.dtype,
                         granularity=request.granularity,
                         input_dtypes=request.input_dtypes,
                         name=request.model.rpartition(":")[2])  # fmt: skip
    (sample,) = random_inputs(request.input_shapes, 1, seed=request.seed, dtype=request.dtype,
                              input_dtypes=request.input_dtypes)  # fmt: skip
    plan = resolved.plan
    real = list(node_seconds(traced, plan, sample))
    bandwidths = path_bandwidths(request.network, resolved.profile, plan)
    lay = layout(real, resolved.node_s, bandwidths, delays, cpus=sorted(os.sched_getaffinity(0)),
                 at_least=request.dilation or 1.0, transport=transport_cost())  # fmt: skip
    with Testbed(lay.hosts, lay.links, period_s=lay.period_s) as bed:
        placed(lay, bed).save(run_dir)
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(MASTER_PORT),
               "GLOO_SOCKET_IFNAME": "lo"}  # fmt: skip
        yield Hosting(env, bed.preexec(), lambda rank, pid: bed.admit(pid), lay.dilation, bed)


ROUND = 4  # inferences a calibration round takes (its median is the CPU it measures)


def calibrations(count: int) -> tuple[int, ...]:
    """After which of a run's ``count`` inferences (counted from 1) a rank on the testbed sets
    its quota again, from its compute's CPU per inference in the round just ended (the
    median, :meth:`SocketLinks.warm`): every :data:`ROUND` inferences after the first (which
    runs cold), through the whole run.

    The CPU an inference takes here drifts within a run, by a factor of up to 2 between spells
    of a few inferences on a quiet machine (what else runs on the core and through its caches,
    how often the quota throttles it; measured in docs/testbed.md): a quota set once, from
    the warm-up, held the node-bound plans of the study to 0.74 to 1.51 of their interval. The
    quota follows the CPU, never the time: the kernel still decides how long the inference
    takes under it, so contention and the links' queues show as before.

    Examples
    --------
    >>> calibrations(14), calibrations(5), calibrations(4)
    ((5, 9, 13), (5,), ())
    """
    return tuple(range(1 + ROUND, count + 1, ROUND))


# --------------------------------------------------------------------------- in a rank


class SocketLinks:
    """A rank's data path on the testbed: a TCP connection from its node's address to the next
    node's, one from the previous node's; tensors as their raw bytes."""

    def __init__(self, placement: Placement, rank: int, world: int, timeout_s: float, *,
                 planned_s: float, inferences: int) -> None:  # fmt: skip
        self.placement = placement
        self._rounds = frozenset(calibrations(inferences))
        self.rank, self.world, self.timeout_s = rank, world, timeout_s
        self.planned_s = planned_s  # this node's dilated planned time per inference
        self.quota = placement.quotas[rank]
        self.repeats = placement.repeats[rank]
        self.address = placement.addresses[rank]
        self._listener: socket.socket | None = None
        self._out: socket.socket | None = None
        self._in: socket.socket | None = None
        self._affinity: set[int] | None = None
        if rank > 0:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.address, DATA_PORT))
            listener.listen(1)
            listener.settimeout(timeout_s)
            self._listener = listener

    def connect(self) -> None:
        """Connect to the next rank, accept the previous one (every rank listens already)."""
        if self.rank < self.world - 1:
            out = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            out.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            out.bind((self.address, 0))
            out.settimeout(self.timeout_s)
            out.connect((self.placement.addresses[self.rank + 1], DATA_PORT))
            self._out = _blocking(out, self.timeout_s)
        if self._listener is not None:
            conn, _ = self._listener.accept()
            self._in = _blocking(conn, self.timeout_s)

    def send(self, values: Sequence[torch.Tensor]) -> None:
        assert self._out is not None
        for t in values:
            try:
                self._out.sendall(_bytes(t.contiguous()))
            except BlockingIOError:  # SO_SNDTIMEO ran out
                raise TimeoutError(f"stage {self.rank + 1} took no data for "
                                   f"{self.timeout_s:g} s") from None  # fmt: skip

    def recv(self, specs: Sequence[TensorSpec]) -> tuple[torch.Tensor, ...]:
        assert self._in is not None
        tensors = tuple(torch.empty(s.shape, dtype=s.torch_dtype) for s in specs)
        return recv_tensors(self._in, tensors, f"stage {self.rank - 1}", self.timeout_s)

    def hold(self) -> None:
        """Move the calling (compute) thread into this rank's host cgroup, on its core: from
        now on the kernel holds it to its capacity. Threads it starts later inherit both (the
        kernel's rule), so the rank's transport threads are started before."""
        self._join(Path(self.placement.cgroups[self.rank]))
        cpu = self.placement.cpus[self.rank]
        if cpu is not None:
            self._affinity = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {cpu})  # 0: the calling thread

    def warm(self, cpu_s: Sequence[float]) -> float | None:
        """Where a round of the calibration ends (:func:`calibrations`), hold the compute from
        now on to the CPU it took per inference in that round (``cpu_s``: each inference's so
        far; the round's median) over its planned time: on the testbed the stage's work is what
        it costs here in the pipeline (cold caches after idle time, its neighbours on the core,
        the throttling of the quota itself), which timing the blocks alone before the run does
        not see. Returns the quota."""
        if self.quota is None or len(cpu_s) not in self._rounds:
            return self.quota
        self.quota = recalibrate(cpu_s, self.planned_s, Path(self.placement.cgroups[self.rank]),
                                 self.placement.version, self.placement.period_s) or self.quota
        return self.quota

    def release(self) -> None:
        """Move the calling thread back beside the transport (no quota, any core)."""
        self._join(Path(self.placement.transport))
        if self._affinity is not None:
            os.sched_setaffinity(0, self._affinity)

    def _join(self, path: Path) -> None:
        from inferplan.runtime.testbed.linux import CpuQuota

        CpuQuota(path, self.placement.version, None, 0.0).add_thread(threading.get_native_id(),
                                                                     os.getpid())  # fmt: skip

    def close(self) -> None:
        for sock in (self._out, self._in, self._listener):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()


def recalibrate(cpu_s: Sequence[float], planned_s: float, cgroup: Path, version: str,
                period_s: float) -> float | None:  # fmt: skip
    """Hold ``cgroup`` from now on to the CPU its compute took per inference in the round just
    ended (the median of the last :data:`ROUND` of ``cpu_s``) over its ``planned_s``, at most
    a core, with a period of at least ``period_s`` (longer where a smaller quota needs it to
    keep the kernel's 1 ms a period); the quota (``None``: no CPU measured, nothing set)."""
    median = statistics.median(cpu_s[-ROUND:])
    if not median > 0:
        return None
    from inferplan.runtime.testbed.linux import CpuQuota

    quota = min(1.0, median / planned_s)
    CpuQuota(cgroup, version, quota, max(period_s, cfs_period([], [quota]))).hold()
    return quota


def recv_tensors(sock: socket.socket, tensors: tuple[torch.Tensor, ...], peer: str,
                 timeout_s: float) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """Fill ``tensors`` with their raw bytes from ``sock`` (blocking, :func:`_blocking`), sent
    by ``peer``; raise TimeoutError or ConnectionError naming it."""
    for t in tensors:
        view = memoryview(_bytes(t))
        got = 0
        while got < len(view):  # bounded: every call waits at most timeout_s
            try:  # all of it in one system call, which runs without the GIL
                n = sock.recv_into(view[got:], len(view) - got, socket.MSG_WAITALL)
            except BlockingIOError:  # SO_RCVTIMEO ran out
                raise TimeoutError(f"no data from {peer} for {timeout_s:g} s") from None
            if n == 0:
                raise ConnectionError(f"{peer} closed its link")
            got += n
    return tensors


def _blocking(sock: socket.socket, timeout_s: float) -> socket.socket:
    """``sock`` blocking, its waits bounded by the kernel (``SO_RCVTIMEO``/``SO_SNDTIMEO``):
    a blocking call moves a whole tensor in one system call, holding no GIL meanwhile, where
    Python's own timeouts poll and move it piece by piece, taking the GIL for every piece
    (which a compute thread the CFS has throttled may be holding)."""
    sock.settimeout(None)
    whole = int(timeout_s)
    limit = struct.pack("ll", whole, int((timeout_s - whole) * 1e6))  # struct timeval
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
    return sock


def _bytes(t: torch.Tensor) -> Any:
    """The tensor's memory as a writable byte buffer (any dtype numpy may lack)."""
    return t.reshape(-1).view(torch.uint8).numpy()


def link_times(sent_at: Sequence[float], arrived_at: Sequence[float]) -> list[float]:
    """Each item's time on a link: from when the sender started it (or the link was done with
    the previous item) until it had all arrived. One machine: one monotonic clock.

    Examples
    --------
    >>> [round(t, 3) for t in link_times([0.0, 0.1, 0.15], [0.05, 0.2, 0.3])]
    [0.05, 0.1, 0.1]
    """
    out, free = [], -float("inf")
    for sent, arrived in zip(sent_at, arrived_at, strict=True):
        out.append(arrived - max(sent, free))
        free = arrived
    return out
