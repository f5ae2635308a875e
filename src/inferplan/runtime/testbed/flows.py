"""A flow plan carried out on the testbed (:mod:`inferplan.runtime.testbed.linux`): many
pipelines at once, each node a host of its own, each link a shaped class.

The launcher times each node's block range on this machine (one thread, CPU time, just before
the run): node ``v``'s range takes ``t_v`` here and ``p_v = W(a, b) / (C_v + x_v)`` in the
plan, so ``v`` needs ``d_v = r_v t_v / p_v`` of a core (``r_v`` times over where its range
takes less than the 10 ms a quota's periods need, :func:`~inferplan.runtime.testbed.linux.repeats`),
beside the CPU its links' transfers take, and the run is dilated by ``k``
(:func:`~inferplan.runtime.testbed.linux.dilation`), as a one-path testbed run is
(:mod:`inferplan.runtime.testbed.run`): node ``v``'s compute runs under a CFS quota of
``d_v / k`` cores, set again from its own CPU per inference every few inferences
(:func:`~inferplan.runtime.testbed.run.calibrations`), and link ``u -> v`` is an HTB class
for the traffic from ``u``'s address to ``v``'s at the rate that moves its messages in ``k``
times their planned ``D_j / (B + y)``, the messages' headers counted (:func:`link_rate`).
A link with a propagation delay needs netem, which the run refuses without.

Each rank binds its node's address; every link is one TCP connection bound at both ends, so
the shaper tells the links apart. Control traffic (``torch.distributed``: set-up,
acknowledgements, results) goes over ``127.0.0.1``, which no class shapes.

Examples
--------
Two nodes whose ranges take 2 ms and 30 ms here, planned at 20 ms and 40 ms, on two cores of
which 0.6 each are given out: the first runs its range 5 times over (10 ms of CPU), needing
half a core, the second three quarters, so the run is dilated by 1.25:

>>> lay = flow_layout([0.002, 0.03, 0.0], [0.02, 0.04, 0.0], {}, cpus=[0, 1])
>>> round(lay.dilation, 3), [round(q, 3) if q else q for q in lay.quotas], lay.repeats
(1.25, [0.4, 0.6, None], (5, 1, 1))
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import pickle
import signal
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from inferplan.runtime.ranks import die_with_parent
from inferplan.runtime.split import TensorSpec
from inferplan.runtime.testbed.linux import (
    CPU_BUDGET,
    CpuQuota,
    HostSpec,
    LinkSpec,
    Testbed,
    TransportCost,
    cfs_period,
    dilation,
    host_address,
    repeats,
)
from inferplan.runtime.testbed.run import (
    DATA_PORT,
    _blocking,
    _bytes,
    calibrations,
    recalibrate,
    recv_tensors,
)

__all__ = ["FlowBed", "FlowLayout", "FlowSockets", "HeldCompute", "Hop", "flow_layout",
           "flow_testbed", "link_rate", "link_rates"]  # fmt: skip

_STEPS = 100  # bound of the wait for a compute process to end

HEADER_B = 24  # a message's header: three int64


def link_rate(payload_b: Sequence[int], weights: Sequence[float], seconds: Sequence[float]
              ) -> float:  # fmt: skip
    """The rate (bit/s of payload, as :class:`~inferplan.runtime.testbed.linux.LinkSpec` takes
    it) at which messages of ``payload_b`` bytes each (their tensors and header) take their
    ``seconds`` back to back, on the average of ``weights`` (each kind's share of the link's
    messages).

    A link limits the flow only where it is busy, and there TCP fills its packets with the
    messages queued behind the shaper, so the class's full-packet framing holds (measured: 50
    messages of 280 bytes sent back to back went in 13 packets; at a rate counting each
    message's own packet headers they took 0.84 of their time).

    Examples
    --------
    >>> link_rate([280], [1.0], [0.001]), link_rate([100, 300], [3.0, 1.0], [0.01, 0.02])
    (2240000.0, 96000.0)
    """
    bytes_ = math.fsum(w * b for b, w in zip(payload_b, weights, strict=True))
    return 8 * bytes_ / math.fsum(w * s for w, s in zip(weights, seconds, strict=True))


class Hop(Protocol):
    """A pipeline's step as :func:`link_rates` reads it: the rank there, the cut it sends
    and the rank it sends to (``None``: the output)."""

    @property
    def rank(self) -> int: ...
    @property
    def last(self) -> int: ...
    @property
    def next_rank(self) -> int | None: ...


def link_rates(pipelines: Sequence[tuple[float, Sequence[Hop]]],
               link_s: Mapping[tuple[int, int], Sequence[float]], message_b: Sequence[int]
               ) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:  # fmt: skip
    """Each link's shaped rate (:func:`link_rate`) and the bit/s the flow puts on it, from
    the plan: ``pipelines`` each pipeline's planned rate (inferences/s) and its hops,
    ``link_s[u, v]`` the seconds a message of each cut takes on link ``u -> v``,
    ``message_b[j]`` the bytes of a message at cut ``j`` (its header included).

    The messages by cut are as the plan's rates share them out, not as a run dispatched
    them: a short run may dispatch none to a pipeline of a small rate, and its link then
    still has a rate. A link none of whose cuts carries data in the model, or that no
    planned rate uses, is left out (nothing to shape).

    >>> from types import SimpleNamespace as Hop
    >>> one = (2.0, [Hop(rank=0, last=1, next_rank=1), Hop(rank=1, last=2, next_rank=None)])
    >>> link_rates([one], {(0, 1): [0.0, 0.001, 0.0]}, [24, 104, 24])
    ({(0, 1): 832000.0}, {(0, 1): 1664.0})
    """
    rates: dict[tuple[int, int], float] = {}
    loads: dict[tuple[int, int], float] = {}
    for link, by_cut in link_s.items():
        carried: dict[int, float] = {}  # messages per second by cut
        for rate, hops in pipelines:
            for h in hops:
                if (h.rank, h.next_rank) == link:
                    carried[h.last] = carried.get(h.last, 0.0) + rate
        cuts = sorted(j for j, r in carried.items() if r > 0)
        if not any(by_cut[j] > 0 for j in cuts):
            continue
        rates[link] = link_rate([message_b[j] for j in cuts], [carried[j] for j in cuts],
                                [by_cut[j] for j in cuts])  # fmt: skip
        loads[link] = 8 * math.fsum(carried[j] * message_b[j] for j in cuts)
    return rates, loads


@dataclass(frozen=True)
class FlowLayout:
    """The testbed a flow plan needs: the dilation, each rank's quota, core, CFS period and
    repeats, the hosts and the shaped links (dilated).

    Each host has a period of its own (:func:`~inferplan.runtime.testbed.linux.cfs_period` of
    its stage alone): a flow's nodes differ by orders of magnitude (a weak source computing
    one pipeline's blocks once a second beside nodes taking 10 ms), and one period long enough
    for the smallest quota's 1 ms a period lets the others' whole stages run unthrottled
    within one (measured: a node planned at 82 ms ran in 11 ms under a 0.44 s period)."""

    dilation: float
    quotas: tuple[float | None, ...]
    cpus: tuple[int | None, ...]
    periods_s: tuple[float, ...]
    hosts: tuple[HostSpec, ...]
    links: tuple[LinkSpec, ...]
    repeats: tuple[int, ...]


def flow_layout(
    real_s: Sequence[float],
    planned_s: Sequence[float],
    links: Mapping[tuple[int, int], float],
    *,
    loads: Mapping[tuple[int, int], float] | None = None,
    cpus: Sequence[int],
    budget: float = CPU_BUDGET,
    at_least: float = 1.0,
    transport: TransportCost | None = None,
) -> FlowLayout:
    """The testbed of a flow plan's ranks: rank ``v``'s range takes ``real_s[v]`` here and
    ``planned_s[v]`` in the plan (0: it computes nothing); ``links[u, v]`` is the rate (bit/s
    of payload, :func:`link_rate`, undilated) of link ``u -> v``, ``loads[u, v]`` the bit/s
    the flow puts on it (default: its rate). ``transport``: what moving a byte costs here,
    which each host needs beside its quota for its links' loads (a flow's links are mostly
    far from full: charged at their rates, a 1 Gbit/s link carrying 40 messages of 88 bytes a
    second dilated a run 58 times)."""
    times = tuple(repeats(t) for t in real_s)
    demands = [r * t / p if t > 0 and p > 0 else None
               for r, t, p in zip(times, real_s, planned_s, strict=True)]  # fmt: skip
    beside = [0.0] * len(real_s)
    if transport is not None:
        for (u, v), rate in (links if loads is None else loads).items():
            beside[u] += transport.send_s_per_b * rate / 8
            beside[v] += transport.receive_s_per_b * rate / 8
    k, quotas, cores = dilation(demands, cores=len(cpus), budget=budget, at_least=at_least,
                                beside=beside)  # fmt: skip
    periods = tuple(cfs_period([k * p], [q]) for p, q in zip(planned_s, quotas, strict=True))
    hosts = tuple(HostSpec(host_address(i), q) for i, q in enumerate(quotas))
    shaped = tuple(LinkSpec(host_address(u), host_address(v), rate / k)
                   for (u, v), rate in sorted(links.items()))  # fmt: skip
    pinned = tuple(None if c is None else cpus[c] for c in cores)
    return FlowLayout(k, tuple(quotas), pinned, periods, hosts, shaped, times)


@dataclass(frozen=True)
class FlowBed:
    """What every rank of a flow run on the testbed knows (forked from the launcher)."""

    addresses: tuple[str, ...]
    cgroups: tuple[str, ...]
    quotas: tuple[float | None, ...]
    cpus: tuple[int | None, ...]
    repeats: tuple[int, ...]
    transport: str
    version: str
    dilation: float
    periods_s: tuple[float, ...]
    enter: int  # the namespace's file descriptor (inherited by the fork)

    def join(self) -> None:
        """In a freshly forked rank: into the namespace, the whole process into the testbed's
        unlimited cgroup (its compute thread is held later, :meth:`FlowSockets.hold`)."""
        from inferplan.runtime.testbed.linux import _setns

        _setns(self.enter)
        CpuQuota(Path(self.transport), self.version, None, 0.0).add(os.getpid())


@contextlib.contextmanager
def flow_testbed(lay: FlowLayout) -> Iterator[FlowBed]:
    """The testbed of ``lay`` set up, as the ranks see it; torn down on leaving."""
    with Testbed(lay.hosts, lay.links, period_s=min(lay.periods_s, default=0.01)) as bed:
        for host, period in zip(bed.hosts, lay.periods_s, strict=True):
            host.period_s = period
            host.hold()
        fd = bed.namespace.enter_fd()
        try:
            yield FlowBed(tuple(h.address for h in lay.hosts),
                          tuple(str(h.path) for h in bed.hosts), lay.quotas, lay.cpus,
                          lay.repeats, str(bed.transport.path), bed.version, lay.dilation,
                          lay.periods_s, fd)  # fmt: skip
        finally:
            os.close(fd)


class FlowSockets:
    """A rank's links on the testbed: one TCP connection from its address to each next node's,
    one accepted from each previous node's; a message is its header and tensors' raw bytes."""

    def __init__(self, bed: FlowBed, rank: int, heads: Sequence[int], tails: Sequence[int],
                 timeout_s: float) -> None:  # fmt: skip
        self.bed, self.rank, self.timeout_s = bed, rank, timeout_s
        self.heads, self.tails = tuple(heads), tuple(tails)
        self.out: dict[int, socket.socket] = {}
        self.into: dict[int, socket.socket] = {}
        self._listener: socket.socket | None = None
        self._affinity: set[int] | None = None
        if self.tails:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((bed.addresses[rank], DATA_PORT))
            listener.listen(len(self.tails))
            listener.settimeout(timeout_s)
            self._listener = listener

    def connect(self) -> None:
        """Connect to every next rank, accept every previous one (all listen already)."""
        for head in self.heads:
            out = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            out.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            out.bind((self.bed.addresses[self.rank], 0))
            out.settimeout(self.timeout_s)
            out.connect((self.bed.addresses[head], DATA_PORT))
            self.out[head] = _blocking(out, self.timeout_s)
        rank_of = {a: k for k, a in enumerate(self.bed.addresses)}
        for _ in self.tails:  # bounded: one accept per previous rank, each within the timeout
            assert self._listener is not None
            conn, (address, _port) = self._listener.accept()
            self.into[rank_of[address]] = _blocking(conn, self.timeout_s)

    def send(self, head: int, header: Sequence[int], values: Sequence[torch.Tensor]) -> None:
        sock = self.out[head]
        try:
            sock.sendall(_bytes(torch.tensor(list(header), dtype=torch.int64)))
            for t in values:
                sock.sendall(_bytes(t.contiguous()))
        except BlockingIOError:  # SO_SNDTIMEO ran out
            raise TimeoutError(f"rank {head} took no data for {self.timeout_s:g} s") from None

    def header(self, tail: int) -> tuple[int, int, int]:
        """The next message's header from ``tail``: inference, pipeline, hop."""
        (t,) = self._recv(tail, (torch.empty(3, dtype=torch.int64),))
        i, p, h = (int(x) for x in t)
        return i, p, h

    def tensors(self, tail: int, specs: Sequence[TensorSpec]) -> tuple[torch.Tensor, ...]:
        return self._recv(tail, tuple(torch.empty(s.shape, dtype=s.torch_dtype) for s in specs))

    def _recv(self, tail: int, tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        return recv_tensors(self.into[tail], tensors, f"rank {tail}", self.timeout_s)

    def close(self) -> None:
        for sock in (*self.out.values(), *self.into.values(), self._listener):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()


class HeldCompute:
    """A rank's block range computed in a process of its own, forked before the rank starts
    any thread, which its host's cgroup holds to the quota while the rank's threads (its
    links, its acknowledgements) run beside, unlimited.

    In one process the CFS would throttle the compute thread holding Python's GIL, and every
    other thread of the rank would wait with it, up to a period at a time (measured: a weak
    source computing one inference in 4 s under a 0.3 s period held back the links of every
    pipeline it fed). Each call sends the tensors through a pipe, runs the range ``repeats``
    times there and returns the outputs and the CPU seconds they took; the quota is set again
    from that CPU every few inferences (:meth:`warm`, as the one-path testbed does).
    """

    def __init__(self, module: torch.nn.Module, bed: FlowBed, rank: int, *, planned_s: float,
                 inferences: int) -> None:  # fmt: skip
        self.bed, self.rank = bed, rank
        self.planned_s = planned_s  # the dilated planned time of this rank's range
        self.quota = bed.quotas[rank]
        self.repeats = bed.repeats[rank]
        self._rounds = frozenset(calibrations(inferences))
        self.cpu_s: list[float] = []
        mine, theirs = multiprocessing.Pipe()
        pid = os.fork()
        if pid == 0:  # the compute process: its loop ends when the rank closes the pipe
            code = 1
            try:
                die_with_parent()
                mine.close()
                _serve(theirs, module, self.repeats)
                code = 0
            finally:
                os._exit(code)
        theirs.close()
        self.pid, self._conn = pid, mine

    def __call__(self, values: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        self._conn.send_bytes(_pack(values, 0.0))
        out, cpu = _unpack(self._conn.recv_bytes())
        self.cpu_s.append(cpu)
        self.warm()
        return out

    def hold(self) -> None:
        """Into the host's cgroup, on its core: from now on the kernel holds the compute."""
        if self.quota is None:
            return
        CpuQuota(Path(self.bed.cgroups[self.rank]), self.bed.version, None, 0.0).add(self.pid)
        cpu = self.bed.cpus[self.rank]
        if cpu is not None:
            os.sched_setaffinity(self.pid, {cpu})

    def warm(self) -> None:
        """At the end of a calibration round, hold the compute to the CPU it took per
        inference in that round (the median) over its dilated planned time."""
        if self.quota is None or len(self.cpu_s) not in self._rounds:
            return
        cgroup = Path(self.bed.cgroups[self.rank])
        period = self.bed.periods_s[self.rank]
        quota = recalibrate(self.cpu_s, self.planned_s, cgroup, self.bed.version, period)
        self.quota = quota or self.quota

    def close(self) -> None:
        """End the compute process (it leaves the cgroup with it)."""
        with contextlib.suppress(OSError):
            self._conn.close()
        for _ in range(_STEPS):  # bounded: it ends on the closed pipe, else it is killed
            done, _status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                return
            time.sleep(0.02)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


def _serve(conn: Any, module: torch.nn.Module, times: int) -> None:
    """The compute process's loop: tensors in, the range run ``times`` times, outputs and
    their CPU seconds out, until the rank closes the pipe."""
    torch.set_num_threads(1)
    with torch.inference_mode():
        while True:
            try:
                given, _ = _unpack(conn.recv_bytes())
            except EOFError:
                return
            cpu = time.thread_time()
            values = given
            for _ in range(times):
                values = module(*given)
            conn.send_bytes(_pack(values, time.thread_time() - cpu))


def _pack(values: Sequence[torch.Tensor], cpu_s: float) -> bytes:
    """Tensors as their shapes, dtypes and raw bytes, in a plain pickle: a tensor pickled for
    a pipe goes through shared memory and a file descriptor that a thread of the sending
    process hands over, which in the compute process the quota throttles."""
    return pickle.dumps(([(tuple(t.shape), t.dtype, _bytes(t.contiguous()).tobytes())
                          for t in values], cpu_s))  # fmt: skip


def _unpack(data: bytes) -> tuple[tuple[torch.Tensor, ...], float]:
    """What :func:`_pack` packed.

    Examples
    --------
    >>> out, cpu = _unpack(_pack([torch.arange(6.0).reshape(2, 3)], 0.5))
    >>> out[0].tolist(), cpu
    ([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], 0.5)
    """
    items, cpu = pickle.loads(data)  # from the rank's own compute process
    out = tuple(torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)
                if raw else torch.empty(shape, dtype=dtype)
                for shape, dtype, raw in items)  # fmt: skip
    return out, cpu
