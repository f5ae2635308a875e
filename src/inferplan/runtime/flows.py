"""A flow plan carried out: many pipelines at once on ``torch.distributed``, measured beside
the plan (:class:`~inferplan.codesign.pipelines.result.FlowPlan`).

One rank per node that some pipeline visits (rank 0 is the source). A node holding a block
range runs it with one stage module, once for every pipeline through it, in the order the
inferences arrive (one compute thread); a visit that computes nothing (a relay) passes the
tensors straight to the next link. Each outgoing link has a sender thread, each incoming one
a receiver thread. A message is a header ``[inference, pipeline, hop]`` and the tensors
crossing the cut the pipeline is at, so a rank knows from the header alone what to run and
where to send next.

The source dispatches inference ``i`` to a pipeline by smooth weighted round robin on the
rates (:func:`weighted_round_robin`, as nginx balances upstreams): deterministic, so every
rank knows in advance how many messages each of its links carries and stops when they are
done. The source keeps at most two inferences in flight per stage of all pipelines (closed
loop: the pipelines kept full). The target acknowledges each output to the source.

With ``emulate`` (the default) a node serves each inference for at least its planned
``W(a, b) / (C + x)`` and a link each message for at least ``D_j / (B + y)`` of the cut ``j``
it carries, plus the link's propagation delay, on the schedule a server of that capacity
keeps (:class:`~inferplan.runtime.emulate.Server`), as a one-path run does. The ranks are
forked from the launcher, which builds the model once, on ``127.0.0.1``; the outputs are
checked against the unsplit model.

With ``request.testbed`` the ranks run on the kernel-shaped testbed instead
(:mod:`inferplan.runtime.testbed.flows`): each in its node's namespace address and CPU quota,
each link a traffic-control class at its bandwidth, the run's time dilated by ``k``, no
pacing; the report's times and throughputs are then the run's own (the plan's ``k`` times
slower).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import math
import os
import pickle
import queue
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from inferplan.codesign.instance import CodesignInstance, compile_instance
from inferplan.codesign.pipelines.flow import flow_provision, flow_throughput
from inferplan.codesign.pipelines.result import FlowPlan
from inferplan.errors import InvalidArgument
from inferplan.runtime.checks import check_run
from inferplan.runtime.emulate import Server, overrun
from inferplan.runtime.measure import build_model, random_inputs, time_stages
from inferplan.runtime.pipeline import (
    _RUN_DIR,
    RunRequest,
    StageFailed,
    _check_memory,
    _compare,
    _Forked,
    _free_port,
    _inputs,
    _load_inputs,
    _percentile,
    _thread,
    fork_rank,
    input_count,
)
from inferplan.runtime.ranks import die_with_parent, stop_ranks
from inferplan.runtime.split import TensorSpec, TracedModel, trace_model
from inferplan.runtime.testbed.flows import (
    HEADER_B,
    FlowBed,
    FlowSockets,
    HeldCompute,
    flow_layout,
    flow_testbed,
    link_rates,
)
from inferplan.runtime.testbed.linux import require as require_testbed
from inferplan.runtime.testbed.linux import transport_cost
from inferplan.runtime.testbed.run import MASTER_PORT, link_times

__all__ = ["FlowRunReport", "flow_plan_for", "run_flow", "weighted_round_robin"]

HEAD, DATA, ACK = 11, 12, 13  # message tags


def weighted_round_robin(rates: Sequence[float], count: int) -> list[int]:
    """The pipeline of each of ``count`` inferences, by smooth weighted round robin: every
    pick adds each pipeline's rate to its credit, takes the pipeline of most credit (the first
    of equals) and takes the sum of the rates off its credit. Of the first ``n`` picks
    pipeline ``p`` gets ``n r_p / sum r``, within one per other pipeline, spread evenly (and
    integer rates exactly, every ``sum r`` picks).

    Examples
    --------
    >>> weighted_round_robin([5, 1, 1], 7)
    [0, 0, 1, 0, 2, 0, 0]
    >>> weighted_round_robin([2.0, 1.0], 6)
    [0, 1, 0, 0, 1, 0]
    """
    if not rates or any(not (math.isfinite(r) and r > 0) for r in rates):
        raise InvalidArgument(f"rates must be positive and finite, got {list(rates)}",
                              field="rates")  # fmt: skip
    total = math.fsum(rates)
    credit = [0.0] * len(rates)
    picks = []
    for _ in range(count):
        for p, r in enumerate(rates):
            credit[p] += r
        best = max(range(len(rates)), key=lambda p: (credit[p], -p))
        credit[best] -= total
        picks.append(best)
    return picks


@dataclass(frozen=True)
class _Hop:
    """Step ``h`` of a pipeline: the rank there, the cuts it goes from and to (equal: it
    relays) and the rank it sends to next (``None``: the output)."""

    rank: int
    first: int
    last: int
    next_rank: int | None


@dataclass(frozen=True)
class _FlowSetup:
    """What every rank knows before the run (forked from the launcher)."""

    nodes: tuple[str, ...]  # the node of each rank
    hops: tuple[tuple[_Hop, ...], ...]  # each pipeline's steps
    schedule: tuple[int, ...]  # each inference's pipeline
    node_s: tuple[float, ...]  # each rank's planned seconds for its range (0: none)
    link_s: dict[tuple[int, int], tuple[float, ...]]  # per link, seconds per message by cut
    delay_s: dict[tuple[int, int], float]
    specs: tuple[tuple[TensorSpec, ...], ...]  # the tensors crossing each cut
    inferences: int
    warmup: int
    emulate: bool
    timeout_s: float
    window: int
    bed: FlowBed | None = None  # on the testbed

    def messages(self, tail: int, head: int) -> int:
        """How many messages link ``tail -> head`` carries in the run."""
        per = Counter(self.schedule)
        return sum(per[p] for p, hops in enumerate(self.hops)
                   for h in hops if h.rank == tail and h.next_rank == head)  # fmt: skip

    def heads(self, rank: int) -> list[int]:
        """The ranks that rank ``rank`` sends to."""
        return sorted({h.next_rank for s in self.hops for h in s
                       if h.rank == rank and h.next_rank is not None})  # fmt: skip

    def tails(self, rank: int) -> list[int]:
        """The ranks that send to rank ``rank``."""
        return sorted({h.rank for s in self.hops for h in s if h.next_rank == rank})

    def computed(self, rank: int) -> int:
        """How many inferences rank ``rank`` computes in the run."""
        per = Counter(self.schedule)
        return sum(per[p] for p, hops in enumerate(self.hops)
                   for h in hops if h.rank == rank and h.last > h.first)  # fmt: skip


@dataclass
class _FlowMeasured:
    """What one rank measured (monotonic seconds; one machine, one clock)."""

    node_busy: list[float] = field(default_factory=list)
    node_real: list[float] = field(default_factory=list)
    link_busy: dict[int, list[float]] = field(default_factory=dict)
    link_planned: dict[int, list[float]] = field(default_factory=dict)
    done_at: dict[int, float] = field(default_factory=dict)  # the target: each inference's end
    outputs: dict[int, tuple[torch.Tensor, ...]] = field(default_factory=dict)
    latency: dict[int, float] = field(default_factory=dict)  # the source
    link_sent: dict[int, list[float]] = field(default_factory=dict)  # testbed: per head
    link_arrived: dict[int, list[float]] = field(default_factory=dict)  # testbed: per tail
    node_cpu: list[float] = field(default_factory=list)  # testbed: CPU s per inference
    node_quota: float | None = None  # testbed: the quota at the end (recalibrated)


@dataclass(frozen=True)
class FlowRunReport:
    """A flow plan run and measured (``to_dict()`` is ``inferplan run --pipelines any
    --json``).

    Each pipeline's measured throughput is its outputs of the inferences dispatched after the
    warm-up, ``n - 1`` over the time from its first to its last on the target's clock (a
    stream's own rate, which the bursts of parallel pipelines do not skew);
    ``measured_throughput`` is their sum. ``nodes`` and
    ``links`` give each element's planned and measured (median; a link's on the testbed the
    mean) seconds per inference or message. ``dispatched`` is how many inferences each
    pipeline was given. On the testbed (``mode`` ``"testbed"``) every time and throughput is
    the run's own, the plan's ``dilation`` times slower; a node adds its CPU per inference
    (``cpu_s``), its quota first and last set and how many times it ran its range."""

    plan: FlowPlan
    inferences: int
    warmup: int
    mode: str
    measured_throughput: float
    pipeline_measured: tuple[float, ...]
    dispatched: tuple[int, ...]
    nodes: tuple[dict[str, Any], ...]
    links: tuple[dict[str, Any], ...]
    latency_median_s: float
    latency_p95_s: float
    outputs_match: bool
    max_abs_diff: float
    warnings: tuple[str, ...] = ()
    dilation: float = 1.0  # on the testbed: the run is this many times slower than the plan

    @property
    def predicted_throughput(self) -> float:
        """The plan's throughput in the run's time (``dilation`` times lower)."""
        return self.plan.throughput / self.dilation

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_dict(),
            "inferences": self.inferences,
            "warmup": self.warmup,
            "mode": self.mode,
            "dilation": self.dilation,
            "throughput": {
                "predicted": self.predicted_throughput,
                "measured": self.measured_throughput,
            },
            "pipelines": [
                {**p.to_dict(), "predicted": p.rate / self.dilation, "measured": m, "dispatched": d}
                for p, m, d in zip(
                    self.plan.pipelines, self.pipeline_measured, self.dispatched, strict=True
                )
            ],
            "nodes": list(self.nodes),
            "links": list(self.links),
            "latency_s": {"median": self.latency_median_s, "p95": self.latency_p95_s},
            "outputs_match": self.outputs_match,
            "max_abs_diff": self.max_abs_diff,
            "warnings": list(self.warnings),
        }


# --------------------------------------------------------------------------- planning


def flow_plan_for(inst: CodesignInstance, rate: float | None,
                  time_limit: float | None = None) -> FlowPlan:  # fmt: skip
    """The flow plan a run carries out: the cheapest upgrades for ``rate`` inferences/s, or
    (``None``) the largest flow on the network as it is."""
    if rate is None:
        return flow_throughput(inst, time_limit=time_limit)
    return flow_provision(inst, rate, time_limit=time_limit)


def _setup(plan: FlowPlan, inst: CodesignInstance, traced: TracedModel, count: int,
           request: RunRequest) -> _FlowSetup:  # fmt: skip
    """Every rank's part: ranks in order of first visit (the source first), each pipeline's
    hops, the dispatch and the planned times from the plan's capacities after upgrades."""
    network = request.network
    nodes: list[str] = [network.source]
    for p in plan.pipelines:
        nodes += [v for v in p.path if v not in nodes]
    rank = {v: k for k, v in enumerate(nodes)}
    hops: list[tuple[_Hop, ...]] = []
    for p in plan.pipelines:
        steps: list[_Hop] = []
        for h, v in enumerate(p.path):
            first = p.partition[h - 1] if h else 0
            last = p.partition[h]
            if last > first and plan.layout.get(v) != (first, last):
                raise InvalidArgument(f"pipeline {list(p.path)} runs blocks {first + 1}..{last} "
                                      f"on {v!r}, which holds {plan.layout.get(v)}",
                                      field="pipelines")  # fmt: skip
            nxt = rank[p.path[h + 1]] if h + 1 < len(p.path) else None
            steps.append(_Hop(rank[v], first, last, nxt))
        hops.append(tuple(steps))
    capacity = {x.id: x.capacity for x in plan.loads}
    work = inst.work_between
    node_s = []
    for v in nodes:
        a, b = plan.layout.get(v, (0, 0))
        node_s.append(float(work[a, b]) / capacity[v] if b > a else 0.0)
    bits = inst.activation_bits
    links = {f"{e.source}->{e.target}": e for e in network.links}
    link_s: dict[tuple[int, int], tuple[float, ...]] = {}
    delay_s: dict[tuple[int, int], float] = {}
    for route in hops:
        for hop in route:
            if hop.next_rank is None or (hop.rank, hop.next_rank) in link_s:
                continue
            name = f"{nodes[hop.rank]}->{nodes[hop.next_rank]}"
            bandwidth = capacity.get(name, links[name].capacity)
            with_bits = [float(d) / bandwidth if d > 0 else 0.0 for d in bits]
            link_s[hop.rank, hop.next_rank] = tuple(with_bits)
            delay_s[hop.rank, hop.next_rank] = float(links[name].delay_s)
    schedule = weighted_round_robin([p.rate for p in plan.pipelines], count)
    stages = sum(2 * len(route) - 1 for route in hops)
    specs = tuple(traced.crossing(j) for j in range(inst.last_cut + 1))
    emulate = True if request.emulate is None else request.emulate
    return _FlowSetup(tuple(nodes), tuple(hops), tuple(schedule), tuple(node_s), link_s,
                      delay_s, specs, count, request.warmup, emulate, request.timeout_s,
                      2 * stages + 2)  # fmt: skip


# --------------------------------------------------------------------------- one rank


def _recv(tensor: torch.Tensor, src: int, tag: int, timeout_s: float) -> None:
    try:
        dist.recv(tensor, src, tag=tag)
    except RuntimeError as exc:
        if "timed out" not in str(exc).lower():
            raise
        raise TimeoutError(f"nothing from rank {src} for {timeout_s:g} s") from None


def _rank(rank: int, setup: _FlowSetup, module: torch.nn.Module | None,
          inputs: Callable[[], Iterator[tuple[torch.Tensor, ...]]],
          sockets: FlowSockets | None = None, held: HeldCompute | None = None
          ) -> _FlowMeasured:  # fmt: skip
    """Run rank ``rank``'s threads to the end of the stream (on the testbed its links over
    ``sockets``, its range computed by ``held``; else ``torch.distributed``, ``module``);
    what it measured."""
    mine = _FlowMeasured()
    label = f"rank {rank} (node {setup.nodes[rank]!r})"
    emulate, timeout = setup.emulate, setup.timeout_s
    Item = tuple[float, int, int, int, tuple[torch.Tensor, ...]]  # at, inference, pipeline, hop
    inbox: queue.Queue[Item] = queue.Queue()
    answers: queue.Queue[Item] = queue.Queue()
    heads, tails = setup.heads(rank), setup.tails(rank)
    outboxes: dict[int, queue.Queue[Item]] = {v: queue.Queue() for v in heads}
    window = threading.Semaphore(setup.window)
    started: dict[int, float] = {}

    def onward(item: Item) -> None:
        at, i, p, h, values = item
        nxt = setup.hops[p][h].next_rank
        if nxt is None:
            answers.put(item)
        else:
            outboxes[nxt].put((at, i, p, h + 1, values))

    def arrive(item: Item) -> None:
        hop = setup.hops[item[2]][item[3]]
        if hop.last > hop.first:
            inbox.put(item)
        else:
            onward(item)

    threads = []
    if rank == 0:

        def feed() -> None:
            stream = inputs()
            for i, p in enumerate(setup.schedule):
                if not window.acquire(timeout=timeout):
                    raise TimeoutError(f"no output acknowledged for {timeout:g} s")
                args = next(stream)
                started[i] = time.monotonic()
                arrive((started[i], i, p, 0, args))

        threads.append(_thread(label, feed))

    def acknowledged(i: int) -> None:
        mine.latency[i] = time.monotonic() - started[i]
        window.release()

    target = next(h.rank for h in setup.hops[0] if h.next_rank is None)
    if rank == 0 and target != 0:

        def acks() -> None:
            index = torch.zeros(1, dtype=torch.int64)
            for _ in range(setup.inferences):
                _recv(index, target, ACK, timeout)
                acknowledged(int(index))

        threads.append(_thread(label, acks))
    if rank == target:

        def answer() -> None:
            for _ in range(setup.inferences):
                at, i, _p, _h, values = answers.get()
                mine.done_at[i] = at
                mine.outputs[i] = tuple(t.clone() for t in values)
                if target == 0:
                    acknowledged(i)
                else:
                    dist.send(torch.tensor([i], dtype=torch.int64), 0, tag=ACK)

        threads.append(_thread(label, answer))
    for src in tails:

        def receive(src: int = src) -> None:
            delay = setup.delay_s[src, rank] if emulate else 0.0
            header = torch.zeros(3, dtype=torch.int64)
            arrived = mine.link_arrived.setdefault(src, [])
            for _ in range(setup.messages(src, rank)):
                if sockets is not None:
                    i, p, h = sockets.header(src)
                    values = sockets.tensors(src, setup.specs[setup.hops[p][h].first])
                    arrived.append(time.monotonic())
                    arrive((arrived[-1], i, p, h, values))
                    continue
                _recv(header, src, HEAD, timeout)
                i, p, h = (int(x) for x in header)
                specs = setup.specs[setup.hops[p][h].first]
                values = tuple(torch.empty(s.shape, dtype=s.torch_dtype) for s in specs)
                for t in values:
                    _recv(t, src, DATA, timeout)
                arrive((time.monotonic() + delay, i, p, h, values))

        threads.append(_thread(f"{label}, from rank {src}", receive))
    for dst in heads:
        mine.link_busy[dst] = []
        mine.link_planned[dst] = []
        mine.link_sent[dst] = []

        def send(dst: int = dst) -> None:
            link = Server(None)
            seconds = setup.link_s[rank, dst]
            for _ in range(setup.messages(rank, dst)):
                at, i, p, h, values = outboxes[dst].get()
                planned = seconds[setup.hops[p][h].first]
                mine.link_planned[dst].append(planned)
                link.seconds = planned if emulate else None
                start = link.start(at)
                if emulate:  # the data leaves when the emulated transfer is over
                    link.finish(start)
                mine.link_sent[dst].append(time.monotonic())
                if sockets is not None:  # the kernel's shaper holds it to the link's rate
                    sockets.send(dst, (i, p, h), values)
                    mine.link_busy[dst].append(0.0)  # the receiver's view replaces it
                    continue
                dist.send(torch.tensor([i, p, h], dtype=torch.int64), dst, tag=HEAD)
                for t in values:
                    dist.send(t.contiguous(), dst, tag=DATA)
                if not emulate:
                    link.finish(start)
                mine.link_busy[dst].append(time.monotonic() - start)

        threads.append(_thread(f"{label}, to rank {dst}", send))
    node = Server(setup.node_s[rank] if emulate else None)
    if held is not None:
        held.hold()
    with torch.inference_mode():
        for _ in range(setup.computed(rank)):
            at, i, p, h, values = inbox.get()
            start = node.start(at)
            computing = time.monotonic()
            if held is not None:
                values = held(values)
            else:
                assert module is not None
                values = module(*values)
            mine.node_real.append(time.monotonic() - computing)
            now = node.finish(start)
            mine.node_busy.append(now - start)
            onward((now, i, p, h, values))
    if held is not None:
        mine.node_cpu, mine.node_quota = list(held.cpu_s), held.quota
    for thread in threads:
        thread.join()
    return mine


def _child(rank: int, setup: _FlowSetup, module: torch.nn.Module | None,
           inputs: Callable[[], Iterator[tuple[torch.Tensor, ...]]], run_dir: Path,
           env: dict[str, str]) -> int:  # fmt: skip
    """A forked rank: join the group, run, write ``result-RANK.pkl``; the exit status."""
    os.environ.update({**env, "RANK": str(rank), _RUN_DIR: str(run_dir)})
    torch.set_num_threads(1)
    held = None
    if setup.bed is not None and module is not None and setup.computed(rank):
        # forked before any thread of the rank starts
        held = HeldCompute(module, setup.bed, rank,
                           planned_s=setup.bed.dilation * setup.node_s[rank],
                           inferences=setup.computed(rank))  # fmt: skip
    sockets = None
    try:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=setup.timeout_s),
                                rank=rank, world_size=len(setup.nodes))  # fmt: skip
        if setup.bed is not None:
            sockets = FlowSockets(setup.bed, rank, setup.heads(rank), setup.tails(rank),
                                  setup.timeout_s)  # fmt: skip
            dist.barrier()  # every rank listens
            sockets.connect()
        mine = _rank(rank, setup, module, inputs, sockets, held)
        dist.barrier()  # every message is in: no rank leaves a peer mid-transfer
    finally:
        if sockets is not None:
            sockets.close()
        if held is not None:
            held.close()
    part = run_dir / f"result-{rank}.pkl.part"
    part.write_bytes(pickle.dumps(mine))
    part.rename(run_dir / f"result-{rank}.pkl")
    dist.destroy_process_group()
    return 0


def _fork(rank: int, setup: _FlowSetup, module: torch.nn.Module | None,
          inputs: Callable[[], Iterator[tuple[torch.Tensor, ...]]], run_dir: Path,
          env: dict[str, str]) -> _Forked:  # fmt: skip
    """Rank ``rank`` forked (:func:`~inferplan.runtime.pipeline.fork_rank`; on the testbed
    into its namespace and cgroups); a failure leaves one line in ``RUN_DIR/error-RANK.txt``."""

    def body() -> int:
        try:
            return _child(rank, setup, module, inputs, run_dir, env)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                first = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
                (run_dir / f"error-{rank}.txt").write_text(f"rank {rank} failed: {first}")
            raise

    bed = setup.bed

    def prepare() -> None:
        die_with_parent()
        if bed is not None:
            bed.join()

    return fork_rank(run_dir / f"log-{rank}.txt", prepare, body)


def _watch(procs: Sequence[_Forked], run_dir: Path, timeout_s: float, nodes: Sequence[str]
           ) -> None:  # fmt: skip
    """Wait for every rank; raise StageFailed on the first failure or when no rank ends for
    ``timeout_s`` after the last did (or from the start)."""
    last = time.monotonic()
    ended = 0
    while True:
        codes = [p.poll() for p in procs]
        failed = [k for k, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            time.sleep(0.2)  # the ranks that fail in turn write their reports
            reports = sorted(run_dir.glob("error-*.txt"), key=lambda f: f.stat().st_mtime_ns)
            if reports:
                raise StageFailed(reports[0].read_text().strip())
            raise StageFailed(f"rank {failed[0]} (node {nodes[failed[0]]!r}) ended with exit "
                              f"code {codes[failed[0]]}")  # fmt: skip
        done = sum(c == 0 for c in codes)
        if done == len(procs):
            return
        if done != ended:
            ended, last = done, time.monotonic()
        if time.monotonic() - last > timeout_s * 2 + 30:
            raise StageFailed(f"the run hung: {len(procs) - done} ranks still running after "
                              f"{timeout_s * 2 + 30:g} s")  # fmt: skip
        time.sleep(0.05)


# --------------------------------------------------------------------------- the run


def run_flow(request: RunRequest, *, rate: float | None = None,
             time_limit: float | None = None) -> FlowRunReport:  # fmt: skip
    """Plan a flow (:func:`flow_plan_for`: ``rate`` inferences/s at least cost, or the largest
    flow) for ``request``'s model and network, run it on ``127.0.0.1``, one forked rank per
    node the pipelines visit, and measure it.

    With ``request.testbed``, on the kernel-shaped testbed
    (:mod:`inferplan.runtime.testbed.flows`), its time
    dilated by at least ``request.dilation``. ``request.plan``, ``open_loop`` and
    ``interval`` are not used: a flow plan is made here, on one machine, closed loop.

    Raises
    ------
    InferplanError
        For bad input, before any rank starts.
    TestbedUnavailable
        With ``request.testbed``, naming what this machine lacks (root, namespaces, netem for
        a link with a delay, ...), before anything is created.
    StageFailed
        If a rank raised, died or hung; every rank is stopped.
    """
    check_run(network=request.network, model=request.model, inferences=request.inferences,
              warmup=request.warmup, inputs=request.inputs, outputs=request.outputs,
              timeout_s=request.timeout_s, emulate=request.emulate, testbed=request.testbed,
              dilation=request.dilation)  # fmt: skip
    if request.testbed:
        require_testbed()  # before anything is read or created
    model = build_model(request.model, seed=request.seed, dtype=request.dtype)
    traced = trace_model(model, request.input_shapes, blocks=request.blocks,
                         granularity=request.granularity, dtype=request.dtype,
                         input_dtypes=request.input_dtypes,
                         name=request.model.rpartition(":")[2])  # fmt: skip
    inst = compile_instance(request.network, traced.profile, require_acyclic=False,
                            cuts="chain")  # fmt: skip
    plan = flow_plan_for(inst, rate, time_limit)
    data = _load_inputs(request)
    count = input_count(request, data)
    _check_memory(count, traced.profile, len(plan.layout) + 2)
    setup = _setup(plan, inst, traced, count, request)
    modules: list[torch.nn.Module | None] = []
    for v in setup.nodes:
        a, b = plan.layout.get(v, (0, 0))
        modules.append(traced._stage(a, b) if b > a else None)

    def inputs() -> Iterator[tuple[torch.Tensor, ...]]:
        return _inputs(request, count, data)

    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
           "WORLD_SIZE": str(len(setup.nodes))}  # fmt: skip
    with contextlib.ExitStack() as stack:
        if request.testbed:
            setup = stack.enter_context(_on_testbed(setup, traced, plan, modules, request))
            env.update(MASTER_PORT=str(MASTER_PORT), GLOO_SOCKET_IFNAME="lo")
        gathered = _launch(setup, modules, inputs, env)
    return _report(plan, setup, gathered, model, list(inputs()), request)


def _launch(setup: _FlowSetup, modules: Sequence[torch.nn.Module | None],
            inputs: Callable[[], Iterator[tuple[torch.Tensor, ...]]],
            env: dict[str, str]) -> list[_FlowMeasured]:  # fmt: skip
    """Fork every rank, wait for them all and gather what each measured."""
    with tempfile.TemporaryDirectory(prefix="inferplan-flow-") as tmp:
        run_dir = Path(tmp)
        procs: list[_Forked] = []
        try:
            for k in range(len(setup.nodes)):
                procs.append(_fork(k, setup, modules[k], inputs, run_dir, env))
            _watch(procs, run_dir, setup.timeout_s, setup.nodes)
        finally:
            stop_ranks(procs)
        return [pickle.loads((run_dir / f"result-{k}.pkl").read_bytes())
                for k in range(len(setup.nodes))]  # fmt: skip


def _bytes(specs: Sequence[TensorSpec]) -> int:
    """The bytes of the tensors ``specs``."""
    return sum(math.prod(s.shape) * torch.empty((), dtype=s.torch_dtype).element_size()
               for s in specs)  # fmt: skip


@contextlib.contextmanager
def _on_testbed(setup: _FlowSetup, traced: TracedModel, plan: FlowPlan,
                modules: Sequence[torch.nn.Module | None],
                request: RunRequest) -> Iterator[_FlowSetup]:  # fmt: skip
    """``setup`` on a testbed of its own (:mod:`inferplan.runtime.testbed.flows`): each rank's
    range timed here, the quotas, the dilation and the shaped links from it; torn down on
    leaving.

    Raises
    ------
    TestbedUnavailable
        Where a link the pipelines use has a propagation delay and the kernel has no netem.
    """
    used = [link for link in setup.link_s if setup.delay_s[link] > 0]
    require_testbed(delays=bool(used))
    (sample,) = random_inputs(request.input_shapes, 1, seed=request.seed, dtype=request.dtype,
                              input_dtypes=request.input_dtypes)  # fmt: skip
    real = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the ranks run
    try:
        for rank, (v, module) in enumerate(zip(setup.nodes, modules, strict=True)):
            a, _b = plan.layout.get(v, (0, 0))
            if module is None or not setup.computed(rank):  # no quota
                real.append(0.0)
                continue
            with torch.inference_mode():
                given = tuple(traced._stage(0, a)(*sample)) if a > 0 else tuple(sample)
            (seconds,) = time_stages([module], given, clock=time.thread_time)
            real.append(seconds)
    finally:
        torch.set_num_threads(threads)
    pipelines = [(p.rate, hops) for p, hops in zip(plan.pipelines, setup.hops, strict=True)]
    sizes = [HEADER_B + _bytes(s) for s in setup.specs]
    rates, loads = link_rates(pipelines, setup.link_s, sizes)
    lay = flow_layout(real, setup.node_s, rates, loads=loads, cpus=sorted(os.sched_getaffinity(0)),
                      at_least=request.dilation or 1.0, transport=transport_cost())  # fmt: skip
    with flow_testbed(lay) as bed:
        yield dataclasses.replace(setup, bed=bed, emulate=False)


def _rate(ends: Sequence[float]) -> float:
    """Outputs per second of a stream that ended at ``ends`` (sorted): ``n - 1`` over the
    time from the first to the last (0 for fewer than two)."""
    if len(ends) < 2 or ends[-1] <= ends[0]:
        return 0.0
    return (len(ends) - 1) / (ends[-1] - ends[0])


def _report(plan: FlowPlan, setup: _FlowSetup, gathered: Sequence[_FlowMeasured], model: Any,
            inputs: Sequence[tuple[torch.Tensor, ...]],
            request: RunRequest) -> FlowRunReport:  # fmt: skip
    target = next(h.rank for h in setup.hops[0] if h.next_rank is None)
    done = gathered[target].done_at
    warmup = setup.warmup
    per = [_rate(sorted(t for i, t in done.items() if i >= warmup and setup.schedule[i] == p))
           for p in range(len(plan.pipelines))]  # fmt: skip
    measured = math.fsum(per)
    dispatched = tuple(Counter(setup.schedule)[p] for p in range(len(plan.pipelines)))
    nodes: list[dict[str, Any]] = []
    links, warnings = [], []
    # on the testbed every time is the run's own, the plan's dilated k times
    k_run = setup.bed.dilation if setup.bed is not None else 1.0
    for k, m in enumerate(gathered):
        v = setup.nodes[k]
        if v in plan.layout:
            a, b = plan.layout[v]
            busy = m.node_busy[warmup:] or m.node_busy
            real = m.node_real[warmup:] or m.node_real
            nodes.append({"id": v, "blocks": [a, b], "planned_s": k_run * setup.node_s[k],
                          "measured_s": statistics.median(busy) if busy else 0.0,
                          "real_s": statistics.median(real) if real else 0.0,
                          "inferences": len(m.node_busy)})  # fmt: skip
            if setup.bed is not None:  # its CPU per inference, the quota first and last set
                cpu = m.node_cpu[warmup:] or m.node_cpu
                nodes[-1].update(cpu_s=statistics.median(cpu) if cpu else 0.0,
                                 quota=setup.bed.quotas[k], quota_last=m.node_quota,
                                 repeats=setup.bed.repeats[k])  # fmt: skip
            late = overrun(setup.node_s[k], real) if setup.emulate else None
            if late is not None:
                warnings.append(late.says(f"node {v!r}: its work", "planned", "plan",
                                          "plan with a slower capacity of the node, or run "
                                          "with --no-emulate"))  # fmt: skip
        for dst, busy in sorted(m.link_busy.items()):
            if setup.bed is not None:  # one clock: from sending to all of it arrived
                busy = link_times(m.link_sent[dst], gathered[dst].link_arrived[k])
            steady = busy[warmup:] or busy
            planned = [k_run * t for t in m.link_planned[dst][warmup:] or m.link_planned[dst]]
            # on the testbed the mean: TCP packs the messages queued behind the shaper into
            # full packets, which arrive together (measured: 17 messages of 88 bytes at once,
            # after a packet's time; the median of their times is that of the 16 behind)
            middle = statistics.fmean if setup.bed is not None else statistics.median
            links.append({"id": f"{v}->{setup.nodes[dst]}", "messages": len(busy),
                          "planned_s": statistics.median(planned) if planned else 0.0,
                          "measured_s": middle(steady) if steady else 0.0})  # fmt: skip
    outputs = [gathered[target].outputs[i] for i in range(setup.inferences)]
    match, worst = _compare(model, inputs, outputs)
    if request.outputs is not None:
        stacked = [torch.stack([out[k] for out in outputs]) for k in range(len(outputs[0]))]
        torch.save(stacked[0] if len(stacked) == 1 else tuple(stacked), request.outputs)
    latency = [gathered[0].latency[i] for i in sorted(gathered[0].latency)][warmup:]
    mode = "testbed" if setup.bed is not None else "emulate" if setup.emulate else "native"
    return FlowRunReport(plan, setup.inferences, warmup, mode, measured, tuple(per), dispatched,
                         tuple(nodes), tuple(links), statistics.median(latency),
                         _percentile(latency, 0.95), match, worst, tuple(warnings),
                         k_run)  # fmt: skip
