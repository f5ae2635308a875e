"""A co-design plan carried out: the model split at the plan's cuts, one ``torch.distributed``
process per path node, ``K`` inputs streamed through them as a pipeline, measured beside the
plan's prediction.

Every path node is a process (rank ``l`` runs ``path[l]``); a node that computes runs its
stage module (:meth:`~inferplan.runtime.split.TracedModel.plan_stages`: its blocks, or its
layers in a plan cut at ideals of the layer graph), a node that only forwards relays the
tensors. Each link carries every tensor its boundary holds, in a fixed order.
Ranks talk point to point (``send`` / ``recv``) through ``torch.distributed`` (gloo on CPU,
NCCL on GPUs). Rank 0, the source, is also the coordinator: it builds the model once (seeded),
splits it, hands each rank exactly its stage module, feeds the inputs, and at the end gathers
the measurements and outputs and checks them against the unsplit model.

Inside a rank three activities overlap, as the pipeline model assumes: receiving (a thread that
always has a ``recv`` posted), computing (the main thread), and sending over the outgoing link
(a thread). With ``emulate`` each node stage serves an inference for at least its planned
``Q / (C + x)`` and each link for at least ``D / (B + y)``
(:func:`~inferplan.runtime.emulate.planned_times`), sleeping on the schedule a server of that
capacity keeps (:class:`~inferplan.runtime.emulate.Server`).
The source keeps at most one inference in flight per stage (node or link) plus one for the
acknowledgement on its way back, enough to keep every stage busy (closed loop: the pipeline
kept full, so inferences queue and the latency is about the inferences in flight times the
interval, by Little's law); or, open loop (``open_loop``), it feeds one input every target
interval of the plan, as a camera would, and the latency is the plan's. The last rank
acknowledges each output to the source, which times the latency on its own clock (so latency
needs no synchronised clocks across machines). Emulated links also hold their data for their
propagation delay (the link is free for the next transfer meanwhile).

:func:`run_plan` launches the ranks itself on ``127.0.0.1``; :func:`run_stage` is one rank,
the entry point under ``torchrun`` (``inferplan run`` calls it when started by ``torchrun``).
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import functools
import gc
import math
import os
import pickle
import queue
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn, Protocol

import torch
import torch.distributed as dist

from inferplan.codesign.plan import Plan
from inferplan.codesign.planfile import check_plan
from inferplan.codesign.provision import provision
from inferplan.errors import InferplanError, InvalidArgument
from inferplan.network.network import Network
from inferplan.profiles.cuts import BlockSpec, Granularity
from inferplan.profiles.from_torch import load_module_factory, profile_module
from inferplan.profiles.ideals import CutKind
from inferplan.profiles.profile import Profile
from inferplan.runtime.checks import LAUNCHER_ENV, check_count, check_run, under_launcher
from inferplan.runtime.emulate import (
    Overrun,
    Queueing,
    Server,
    overrun,
    pace,
    planned_latency,
    planned_times,
)
from inferplan.runtime.examples import check_inferences
from inferplan.runtime.measure import build_model, load_inputs, measure_nodes, stream_inputs
from inferplan.runtime.ranks import Rank, die_with_parent, stop_ranks
from inferplan.runtime.split import PlanStage, TensorSpec, TracedModel, run_layer, trace_model
from inferplan.runtime.testbed.linux import require as require_testbed
from inferplan.runtime.testbed.run import Hosting, Placement, SocketLinks, hosting, link_times
from inferplan.units import listed

__all__ = [
    "RunReport",
    "RunRequest",
    "StageCancelled",
    "StageFailed",
    "StageMemory",
    "StageReport",
    "resolve",
    "run_plan",
    "run_stage",
    "under_launcher",
]

Shape = tuple[int, ...]
Progress = Callable[[int], None]
Inputs = tuple[torch.Tensor, ...]  # one inference's input tensors

DATA, ACK = 1, 2  # message tags: activations go down the path, acknowledgements to the source
DEFAULT_INFERENCES = 40
_RUN_DIR = "INFERPLAN_RUN_DIR"  # set by run_plan for the ranks it launches
_TIMEOUT = "INFERPLAN_TIMEOUT_S"  # and the run's timeout, which ranks but 0 have no request for


class StageFailed(InferplanError):
    """A stage raised, died or hung: the whole run was stopped."""


class StageCancelled(InferplanError):
    """This rank stopped because the coordinator (rank 0) could not start the run."""


@dataclass(frozen=True)
class RunRequest:
    """What to run: a model, a network, and a plan or a target to plan for.

    Attributes
    ----------
    network
        The network the plan runs on (capacities give the planned stage times).
    model
        The PyTorch model as ``module.path:factory`` (or ``file.py:factory``).
    input_shapes, input_dtypes, blocks, dtype, granularity
        As for ``inferplan profile``: they define the profile, its blocks and valid cuts, and
        its layer graph.
    plan
        The plan to carry out, or ``None`` to plan for ``interval`` with ``method``.
    interval, method
        The target interval (s) and the planner, when ``plan`` is ``None``.
    cuts, max_ideals
        Where the planner may cut the model, as for
        :func:`~inferplan.codesign.provision.provision` (``None``: at the ideals of the
        profile's layer graph when it has one within the limits, else between blocks); a
        plan file says it itself.
    inferences
        ``K``, the number of inputs streamed (default: those in ``inputs``, else 40).
    warmup
        Inferences before the steady state that the interval and stage times are measured on.
    inputs, outputs
        A ``.pt`` file with one tensor whose first dimension indexes the inputs; where to save
        the outputs, stacked in input order.
    emulate
        Pace stages to the plan's capacities; ``None``: when every rank runs on one machine.
    testbed, dilation
        Run on the kernel-shaped testbed (:mod:`inferplan.runtime.testbed.run`) instead of
        pacing, its time dilated by at least ``dilation`` (``None``: as little as fits).
    seed
        Seeds the model's weights and the random inputs.
    open_loop
        Feed one input every target interval of the plan (its throughput; dilated on the
        testbed), as a camera would, instead of keeping the pipeline full: the measured
        latency is then comparable with the plan's.
    timeout_s
        How long a rank waits for a peer (and the launcher for any progress) before giving up.
    """

    network: Network
    model: str
    input_shapes: tuple[Shape, ...]
    input_dtypes: tuple[str | None, ...] = ()
    blocks: BlockSpec = None
    dtype: str = "float32"
    granularity: Granularity = "blocks"
    plan: Plan | None = None
    interval: float | None = None
    method: str = "psg"
    cuts: CutKind | None = None
    max_ideals: int | None = None
    inferences: int | None = None
    warmup: int = 5
    inputs: str | None = None
    outputs: str | None = None
    emulate: bool | None = None
    seed: int = 0
    timeout_s: float = 60.0
    testbed: bool = False
    dilation: float | None = None
    open_loop: bool = False
    plan_source: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Resolved:
    """A request checked and planned: its profile, plan, stage times, the propagation delay
    of each path link, the plan's latency and the number of inputs."""

    request: RunRequest
    profile: Profile
    plan: Plan
    node_s: tuple[float, ...]
    link_s: tuple[float, ...]
    inferences: int
    delay_s: tuple[float, ...] = ()
    latency_s: float = 0.0


@dataclass(frozen=True)
class StageReport:
    """One stage of the pipeline: a node's compute or a link's transfer, per inference.

    ``blocks`` is ``(first cut, last cut)`` of a node's blocks (equal for a node that only
    forwards) in a plan cut between blocks; ``layers`` names the layers a node computes in a
    plan cut at ideals (none for a node that only forwards). ``profiled_s`` (runs at the
    machine's own speed only) is what timing the node's work on this machine before the run
    gives (:func:`~inferplan.runtime.measure.measure_nodes`). ``real_s`` (nodes) is the
    median time of the node's work alone, before any pacing: when it exceeds ``predicted_s``
    emulation cannot hold the plan (see :attr:`RunReport.warnings`). On the testbed a node's
    ``quota`` is the share of a core its compute thread was held to and ``cpu_s`` the CPU
    seconds that thread took per inference (medians after the warm-up; the quota follows the
    CPU, see docs/testbed.md), so ``cpu_s / quota`` is the time the kernel's quota promises.
    """

    kind: str
    id: str
    predicted_s: float
    measured_s: float
    blocks: tuple[int, int] | None = None
    layers: tuple[str, ...] | None = None
    profiled_s: float | None = None
    real_s: float | None = None
    cpu_s: float | None = None
    quota: float | None = None
    memory: StageMemory | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "id": self.id}
        if self.blocks is not None:
            out["blocks"] = list(self.blocks)
        if self.layers is not None:
            out["layers"] = list(self.layers)
        out["predicted_s"] = self.predicted_s
        out["measured_s"] = self.measured_s
        if self.profiled_s is not None:
            out["profiled_s"] = self.profiled_s
        if self.real_s is not None:
            out["real_s"] = self.real_s
        if self.cpu_s is not None:
            out["cpu_s"] = self.cpu_s
            out["quota"] = self.quota
        if self.memory is not None:
            out["memory"] = self.memory.to_dict()
        return out


@dataclass(frozen=True)
class StageMemory:
    """A node stage's memory: the bytes of its stage module's state dict (weights and
    buffers), the rank's peak resident memory (the whole process: interpreter, torch and
    buffers included), and the plan's need for the node (``None`` for a plan file without
    it)."""

    state_dict_bytes: int
    peak_rss_bytes: int
    planned_need_bytes: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"state_dict_bytes": self.state_dict_bytes, "peak_rss_bytes": self.peak_rss_bytes,
                "planned_need_bytes": self.planned_need_bytes}  # fmt: skip


@dataclass(frozen=True)
class RunReport:
    """A run measured beside its plan (``to_dict()`` is ``inferplan run --json``).

    ``mode`` is ``"emulate"`` (stages paced to the plan), ``"native"`` (this machine's speed)
    or ``"testbed"`` (the kernel holds each stage to its capacity, dilated by ``dilation``: the
    predicted and measured seconds are the run's own, the plan's are ``dilation`` times fewer).
    ``predicted_latency_s`` is the plan's latency (dilated likewise), ``feed_interval_s`` the
    seconds between inputs fed open loop (``None``: the pipeline was kept full), ``queueing``
    whether inferences waited, from the run's numbers.
    """

    plan: Plan
    inferences: int
    warmup: int
    emulated: bool
    predicted_interval: float
    measured_interval: float
    latency_median_s: float
    latency_p95_s: float
    stages: tuple[StageReport, ...]
    outputs_match: bool
    max_abs_diff: float
    mode: str = "native"
    dilation: float = 1.0
    profile: Profile | None = None
    """The model's profile the plan was made or checked for (for the plan report)."""
    warnings: tuple[str, ...] = ()
    """What in the run cannot hold the plan: an emulated node whose real work took longer
    than its planned time in more than a few percent of the inferences, named with both
    times and what to change (:func:`~inferplan.runtime.emulate.overrun`)."""
    predicted_latency_s: float = 0.0
    feed_interval_s: float | None = None
    queueing: Queueing | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_dict(),
            "inferences": self.inferences,
            "warmup": self.warmup,
            "emulated": self.emulated,
            "mode": self.mode,
            "dilation": self.dilation,
            "predicted_interval": self.predicted_interval,
            "measured_interval": self.measured_interval,
            "latency_s": {
                "median": self.latency_median_s,
                "p95": self.latency_p95_s,
                "predicted": self.predicted_latency_s,
            },
            "feed_interval_s": self.feed_interval_s,
            "queueing": None
            if self.queueing is None
            else {
                "queued": self.queueing.queued,
                "in_flight": self.queueing.in_flight,
                "little_s": self.queueing.little_s,
                "idle_latency_s": self.queueing.idle_s,
                "says": self.queueing.says(),
            },
            "stages": [s.to_dict() for s in self.stages],
            "outputs_match": self.outputs_match,
            "max_abs_diff": self.max_abs_diff,
            "warnings": list(self.warnings),
        }


def overrun_warning(label: str, node: str, late: Overrun) -> str:
    """What a run says about a stage that cannot hold its planned time, and what to change."""
    return late.says(f"{label}: its work", "planned", "plan",
                     f"plan with a slower capacity of node {node!r} (or a profile measured on "
                     "this machine, profile --measure), or run with --no-emulate")  # fmt: skip


# --------------------------------------------------------------------------- checking


def _profile(request: RunRequest, model: Any) -> Profile:
    return profile_module(model, request.input_shapes, blocks=request.blocks, dtype=request.dtype,
                          granularity=request.granularity,
                          input_dtypes=request.input_dtypes, tracer="fx",
                          name=request.model.rpartition(":")[2]).profile  # fmt: skip


def _load_inputs(request: RunRequest) -> torch.Tensor | None:
    """The inputs file's tensor, checked against the (single) input's shape and dtype."""
    if request.inputs is None:
        return None
    where = request.inputs
    if len(request.input_shapes) != 1:
        raise InvalidArgument("an inputs file holds one tensor: it needs a model with one input",
                              source=where)  # fmt: skip
    kind = next(iter(request.input_dtypes), None) or request.dtype
    return load_inputs(where, request.input_shapes[0], dtype=kind)


def _inputs(request: RunRequest, count: int, data: torch.Tensor | None) -> Iterator[Inputs]:
    """The run's ``count`` inputs, one at a time: the inputs file's rows (``data``), or seeded
    random inputs made as they are asked for. Calling it again gives the same inputs again."""
    if data is not None:
        return ((t,) for t in data[:count])
    return stream_inputs(request.input_shapes, count, seed=request.seed, dtype=request.dtype,
                         input_dtypes=request.input_dtypes)  # fmt: skip


def input_count(request: RunRequest, data: torch.Tensor | None) -> int:
    """How many inferences ``request`` streams: those of its inputs file's tensor ``data``
    (refused if ``inferences`` says otherwise), else ``inferences``, else
    :data:`DEFAULT_INFERENCES`; checked against the warm-up."""
    count = request.inferences
    if data is not None:
        if count is not None and count != data.shape[0]:
            raise InvalidArgument(f"{count} inferences asked for but the inputs file holds "
                                  f"{data.shape[0]} inputs", field="inferences")  # fmt: skip
        count = int(data.shape[0])
    count = DEFAULT_INFERENCES if count is None else count
    check_count(count, request.warmup)
    return count


def resolve(request: RunRequest, *, profile: Profile | None = None) -> Resolved:
    """Check ``request`` and plan it: profile the model (on the meta device, unless its
    ``profile`` is given), read or make the plan, and count the inputs. Raises
    :class:`InferplanError` subclasses for bad input."""
    check_run(network=request.network, model=request.model, plan=request.plan,
              plan_source=request.plan_source, inferences=request.inferences,
              warmup=request.warmup, inputs=request.inputs, outputs=request.outputs,
              timeout_s=request.timeout_s, emulate=request.emulate, testbed=request.testbed,
              dilation=request.dilation, interval=request.interval,
              open_loop=request.open_loop)  # fmt: skip
    if profile is None:
        profile = _profile(request, load_module_factory(request.model))
    if request.plan is not None:
        check_plan(request.network, profile, request.plan, source=request.plan_source)
        plan = request.plan
    else:
        plan = provision(request.network, profile, interval=request.interval,
                         method=request.method, cuts=request.cuts,
                         max_ideals=request.max_ideals)  # fmt: skip
    node_s, link_s = planned_times(request.network, profile, plan)
    latency, delays = planned_latency(request.network, profile, plan)
    count = input_count(request, _load_inputs(request))
    _check_memory(count, profile, len(plan.path))
    return Resolved(request, profile, plan, node_s, link_s, count, delays, latency)


# What a rank keeps of each inference besides its outputs: its times (a dozen Python floats
# in lists, 32 bytes each with the list's pointer), measured for the report.
_KEPT_PER_INFERENCE = 400


def _check_memory(count: int, profile: Profile, ranks: int) -> None:
    """Refuse ``count`` inferences whose outputs (kept to be compared with the unsplit model's
    at the end; the inputs are streamed, made again for the comparison) and each rank's
    times of them would not fit in this machine's memory (or the address space a process may
    take), before any process starts."""
    check_inferences(count, profile.activation_bits[-1] / 8 + ranks * _KEPT_PER_INFERENCE,
                     "outputs and measured times")  # fmt: skip


# --------------------------------------------------------------------------- the ranks


@dataclass(frozen=True)
class _Role:
    """What one rank does: its node, what it computes (``blocks``, the first and last cut of
    a plan cut between blocks; ``layers``, of one cut at ideals), whether it computes at all,
    the tensors it receives, planned times."""

    rank: int
    node: str
    blocks: tuple[int, int] | None
    layers: tuple[str, ...] | None
    computes: bool
    receives: tuple[TensorSpec, ...]
    node_s: float
    link_s: float | None  # the link to the next rank; None for the last
    label: str
    delay_s: float = 0.0  # that link's propagation delay


def _stage_label(plan: Plan, rank: int) -> str:
    """Stage ``rank`` of ``plan`` as messages name it: its node and what it computes."""
    if plan.cuts == "graph":
        names = plan.layers[rank]
        held = f"layers {listed(names, shown=3)}" if names else "forwarding"
    else:
        first, last = plan.cut_indices[rank - 1] if rank else 0, plan.cut_indices[rank]
        held = f"blocks {first + 1}..{last}" if last > first else "forwarding"
    return f"stage {rank} (node {plan.path[rank]!r}, {held})"


@dataclass(frozen=True)
class _Setup:
    """Rank 0's broadcast: every rank's role and the run's shape."""

    roles: tuple[_Role, ...]
    inferences: int
    warmup: int
    emulate: bool | None
    timeout_s: float
    error: str | None = None
    testbed: bool = False
    dilation: float = 1.0  # on the testbed; 1 elsewhere
    feed_s: float | None = None  # open loop: the run's seconds between inputs


@dataclass
class _Measured:
    """What a rank measured (monotonic seconds on its own clock)."""

    node_busy: list[float] = field(default_factory=list)
    node_real: list[float] = field(default_factory=list)  # the stage's work alone, unpaced
    node_cpu: list[float] = field(default_factory=list)  # CPU seconds of the compute thread
    node_quota: list[float | None] = field(default_factory=list)  # the compute's, each inference
    link_busy: list[float] = field(default_factory=list)
    arrived_at: list[float] = field(default_factory=list)  # the data of each inference, here
    sent_at: list[float] = field(default_factory=list)  # when its sending started
    done_at: list[float] = field(default_factory=list)
    outputs: list[tuple[torch.Tensor, ...]] = field(default_factory=list)
    state_dict_bytes: int = 0
    peak_rss_bytes: int = 0


def _roles(stages: Sequence[PlanStage], resolved: Resolved) -> tuple[_Role, ...]:
    plan = resolved.plan
    roles = []
    for k, (node, done, stage) in enumerate(zip(plan.path, plan.cut_indices, stages, strict=True)):
        chain = plan.cuts == "chain"
        blocks = (plan.cut_indices[k - 1] if k else 0, done) if chain else None
        link = resolved.link_s[k] if k < len(plan.path) - 1 else None
        delay = resolved.delay_s[k] if k < len(plan.path) - 1 else 0.0
        roles.append(_Role(k, node, blocks, None if chain else tuple(plan.layers[k]),
                           stage.module is not None, stage.receives_specs, resolved.node_s[k],
                           link, _stage_label(plan, k), delay))  # fmt: skip
    return tuple(roles)


def _leaves(value: Any) -> tuple[torch.Tensor, ...]:
    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(t for item in value for t in _leaves(item))
    if isinstance(value, dict):
        return tuple(t for item in value.values() for t in _leaves(item))
    return ()


def _compare(model: Any, inputs: Iterable[Inputs],
             outputs: Sequence[Inputs]) -> tuple[bool, float]:  # fmt: skip
    """Whether the pipeline's outputs equal the unsplit model's (float32 tolerances)."""
    match, worst = True, 0.0
    with torch.inference_mode():
        for args, got in zip(inputs, outputs, strict=True):
            want = _leaves(model(*args))
            if len(want) != len(got):
                return False, math.inf
            for a, b in zip(got, want, strict=True):
                if a.shape != b.shape or a.dtype != b.dtype:
                    return False, math.inf
                # NaN where the unsplit model has NaN is equal (no difference); NaN on one
                # side only is a difference without bound
                both = torch.isnan(a.double()) & torch.isnan(b.double())
                diff = (a.double() - b.double()).abs().masked_fill(both, 0.0).nan_to_num(math.inf)
                worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
                match = match and torch.allclose(a.double(), b.double(), rtol=1.3e-6, atol=1e-5,
                                                 equal_nan=True)  # fmt: skip
    return match, worst


def _fail(label: str, exc: BaseException) -> NoReturn:
    """Report a stage's failure as one line and end the process at once: its peers may be
    blocked in a transfer that would never return."""
    cause = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    line = f"{label} failed: {cause}"
    run_dir = os.environ.get(_RUN_DIR)
    if run_dir:
        with contextlib.suppress(OSError):
            Path(run_dir, f"error-{os.environ.get('RANK', '0')}.txt").write_text(line)
    print(f"error: {line}", file=sys.stderr, flush=True)
    os._exit(1)


def _thread(label: str, target: Callable[[], None]) -> threading.Thread:
    def guarded() -> None:
        try:
            target()
        except BaseException as exc:  # any failure ends the stage (and so the run)
            _fail(label, exc)

    thread = threading.Thread(target=guarded, daemon=True)
    thread.start()
    return thread


def _wait_for(tensor: torch.Tensor, src: int, tag: int, timeout_s: float) -> None:
    """``recv`` from rank ``src``; a timeout says which stage fell silent."""
    try:
        dist.recv(tensor, src, tag=tag)
    except RuntimeError as exc:
        if "timed out" not in str(exc).lower():
            raise
        what = "data" if tag == DATA else "acknowledgement"
        raise TimeoutError(f"no {what} from stage {src} for {timeout_s:g} s") from None


class Links(Protocol):
    """A rank's data path: the activations from the previous rank and to the next; how the
    rank's compute thread is held (:meth:`hold`, called once the rank's other threads are
    running, so that they stay unheld) and how it is held as it goes (:meth:`warm`, given its
    CPU seconds of each inference so far, after each; returns the share of a core it is held
    to from then on, None: not held); ``repeats``: how many times the rank runs
    its blocks per inference (on the testbed, more than once where they take less than the
    kernel's quota granularity)."""

    @property
    def repeats(self) -> int: ...

    def recv(self, specs: Sequence[TensorSpec]) -> tuple[torch.Tensor, ...]: ...

    def send(self, values: Sequence[torch.Tensor]) -> None: ...

    def hold(self) -> None: ...

    def warm(self, cpu_s: Sequence[float]) -> float | None: ...


@dataclass(frozen=True)
class _GlooLinks:
    """The data path through ``torch.distributed`` point-to-point messages."""

    rank: int
    timeout_s: float
    repeats: int = 1

    def recv(self, specs: Sequence[TensorSpec]) -> tuple[torch.Tensor, ...]:
        tensors = tuple(torch.empty(s.shape, dtype=s.torch_dtype) for s in specs)
        for t in tensors:
            _wait_for(t, self.rank - 1, DATA, self.timeout_s)
        return tensors

    def send(self, values: Sequence[torch.Tensor]) -> None:
        for t in values:
            dist.send(t.contiguous(), self.rank + 1, tag=DATA)

    def hold(self) -> None:
        pass

    def warm(self, cpu_s: Sequence[float]) -> float | None:
        return None


def _pipeline(role: _Role, setup: _Setup, stage: torch.nn.Module | None, emulate: bool,
              inputs: Iterator[Inputs], progress: Progress | None,
              links: Links) -> tuple[_Measured, list[float], list[int]]:  # fmt: skip
    """Run this rank's part of the pipeline; rank 0 also returns each inference's latency and
    how many inferences were in the pipeline as each one entered (itself included)."""
    rank, world, count = role.rank, len(setup.roles), setup.inferences
    last = rank == world - 1
    mine = _Measured()
    # items carry the time they arrived, when the stage could have started on them
    inbox: queue.Queue[tuple[float, tuple[torch.Tensor, ...]]] = queue.Queue()
    outbox: queue.Queue[tuple[float, tuple[torch.Tensor, ...]]] = queue.Queue()
    started_at = [0.0] * count
    latency = [0.0] * count
    inside = [0] * count
    acked = [0]
    # in flight: one inference per stage (world nodes, world - 1 links) and one acknowledgement
    window = threading.Semaphore(2 * world)
    threads = []

    def acknowledged(i: int) -> None:
        latency[i] = time.monotonic() - started_at[i]
        acked[0] += 1
        window.release()
        if progress is not None:
            progress(i + 1)

    if rank == 0:

        def feed() -> None:
            first = time.monotonic()
            for i in range(count):
                if setup.feed_s is None:
                    if i == setup.warmup and setup.testbed:
                        # the measured inferences start from an empty pipeline: a queue that
                        # built up while the warm-up set the quotas would drain into their
                        # interval, shortening it (docs/testbed.md)
                        _drain(window, 2 * world, setup.timeout_s)
                    window.acquire()
                args = next(inputs)  # made (or read) when there is room for it in flight
                if setup.feed_s is not None:  # a camera's frames: on a fixed schedule
                    pace(first, i * setup.feed_s)
                started_at[i] = time.monotonic()
                inside[i] = i + 1 - acked[0]
                inbox.put((started_at[i], args))

        def acks() -> None:
            index = torch.zeros(1, dtype=torch.int64)
            for i in range(count):
                _wait_for(index, world - 1, ACK, setup.timeout_s)
                if int(index) != i:
                    raise RuntimeError(f"acknowledgement {int(index)} arrived for inference {i}")
                acknowledged(i)

        if progress is not None:
            progress(0)  # every rank is ready: the stream starts
        threads.append(_thread(role.label, feed))
        if world > 1:
            threads.append(_thread(role.label, acks))
    else:
        # an emulated link's data arrives its propagation delay after the transfer (the
        # testbed's kernel delays it itself, a real network by its own)
        delay = setup.roles[rank - 1].delay_s if emulate else 0.0

        def receive() -> None:
            for _ in range(count):
                values = links.recv(role.receives)
                mine.arrived_at.append(time.monotonic())
                inbox.put((mine.arrived_at[-1] + delay, values))

        threads.append(_thread(role.label, receive))
    if not last:
        link_label = f"link {role.node!r} -> {setup.roles[rank + 1].node!r}"

        def send() -> None:
            link = Server(role.link_s if emulate else None)
            for _ in range(count):
                arrived, values = outbox.get()
                start = link.start(arrived)
                if emulate:  # the data leaves when the emulated transfer is over
                    link.finish(start)
                mine.sent_at.append(time.monotonic())
                links.send(values)
                if not emulate:
                    link.finish(start)
                mine.link_busy.append(time.monotonic() - start)

        threads.append(_thread(link_label, send))
    else:
        # the last node answers the source from a thread of its own, as every other node hands
        # its result to its sender: the compute thread, held on the testbed, only computes

        def answer() -> None:
            for i in range(count):
                values = outbox.get()[1]
                mine.outputs.append(tuple(t.clone() for t in values))
                if world > 1:
                    dist.send(torch.tensor([i], dtype=torch.int64), 0, tag=ACK)
                else:
                    acknowledged(i)

        threads.append(_thread(role.label, answer))

    node = Server(role.node_s if emulate else None)
    links.hold()
    quota = links.warm(())
    with torch.inference_mode():
        for _ in range(count):
            arrived, values = inbox.get()
            mine.node_quota.append(quota)
            start = node.start(arrived)
            computing = time.monotonic()
            cpu = time.thread_time()  # what this thread does per inference, waits excluded
            if stage is not None:
                values = run_layer(stage, values, links.repeats)
            mine.node_real.append(time.monotonic() - computing)
            now = node.finish(start)
            mine.node_busy.append(now - start)
            if last:
                mine.done_at.append(now)
            outbox.put((now, values))
            mine.node_cpu.append(time.thread_time() - cpu)
            if stage is not None:
                quota = links.warm(mine.node_cpu)
    for thread in threads:
        thread.join()
    return mine, latency, inside


def _drain(window: threading.Semaphore, size: int, timeout_s: float) -> None:
    """Wait until every one of the ``size`` places in flight is free (the pipeline empty)."""
    taken = 0
    try:
        for taken in range(size):
            if not window.acquire(timeout=timeout_s):
                raise TimeoutError(f"the pipeline did not empty in {timeout_s:g} s "
                                   f"({size - taken} inferences still in it)")  # fmt: skip
        taken = size
    finally:
        for _ in range(taken):
            window.release()


def _median_quota(quotas: Sequence[float | None], warmup: int) -> float | None:
    """The median share of a core the compute was held to after the warm-up (None: not
    held)."""
    held = [q for q in quotas if q is not None]
    return _median_after(held, warmup) if held else None


def _median_after(values: Sequence[float], warmup: int) -> float:
    steady = list(values[warmup:]) or list(values)
    return statistics.median(steady)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    low, high = math.floor(k), math.ceil(k)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


@dataclass(frozen=True)
class Built:
    """The model built with its real weights (seeded), traced once, and the request checked
    and planned with that trace's profile: what rank 0 needs to start a run.
    :func:`run_plan` makes it before any rank starts, and a rank forked from it inherits it."""

    model: Any
    traced: TracedModel
    resolved: Resolved


def build(request: RunRequest) -> Built:
    """Build, trace and plan ``request`` (one trace: the model with its real weights is
    profiled, checked and planned). Raises as :func:`resolve`."""
    check_run(network=request.network, model=request.model, plan=request.plan,
              plan_source=request.plan_source, inferences=request.inferences,
              warmup=request.warmup, inputs=request.inputs, outputs=request.outputs,
              timeout_s=request.timeout_s, emulate=request.emulate, testbed=request.testbed,
              dilation=request.dilation, interval=request.interval,
              open_loop=request.open_loop)  # fmt: skip
    model = build_model(request.model, seed=request.seed, dtype=request.dtype)
    traced = trace_model(model, request.input_shapes, blocks=request.blocks,
                         granularity=request.granularity,
                         dtype=request.dtype, input_dtypes=request.input_dtypes,
                         name=request.model.rpartition(":")[2])  # fmt: skip
    return Built(model, traced, resolve(request, profile=traced.profile))


def _setup_rank0(request: RunRequest, world: int, placement: Placement | None,
                 built: Built | None) -> tuple[_Setup, Any, list[Any], Any]:  # fmt: skip
    built = built or build(request)
    model, traced, resolved = built.model, built.traced, built.resolved
    if world != len(resolved.plan.path):
        raise InvalidArgument(f"the plan's path has {len(resolved.plan.path)} nodes: start that "
                              f"many processes, not {world}", field="processes")  # fmt: skip
    stages = traced.plan_stages(resolved.plan)
    roles = _roles(stages, resolved)
    modules = [s.module for s in stages]
    dilation = 1.0 if placement is None else placement.dilation
    feed = dilation * resolved.plan.target_interval if request.open_loop else None
    setup = _Setup(roles, resolved.inferences, request.warmup,
                   request.emulate if placement is None else False, request.timeout_s,
                   testbed=placement is not None, dilation=dilation, feed_s=feed)  # fmt: skip
    return setup, model, modules, (resolved, traced)


def rank_threads(local: int, *, testbed: bool) -> int:
    """The intra-op threads of a rank, one of ``local`` ranks on this machine: its share of
    the cores; on the testbed one, the speed its blocks were timed at."""
    return 1 if testbed else max(1, (os.cpu_count() or 1) // local)


def run_stage(
    request: RunRequest | None, *, progress: Progress | None = None, timeout_s: float = 60.0,
    built: Built | None = None,
) -> RunReport | None:  # fmt: skip
    """Run this process as one rank of the pipeline (``torch.distributed`` env: ``RANK``,
    ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, as ``torchrun`` sets them).

    Rank 0 needs the ``request`` (the others may pass ``None``: rank 0 sends them their part)
    and returns the :class:`RunReport`; the other ranks return ``None``. ``timeout_s`` bounds
    every wait for a peer where there is no ``request`` to take it from. Rank 0 builds the
    model unless it is given as ``built`` (by :func:`build`). On one machine use
    :func:`run_plan`, which starts the ranks itself.

    Raises
    ------
    InferplanError
        On rank 0, for bad input (the same checks as :func:`resolve`).
    StageCancelled
        On the other ranks, when rank 0 could not start the run.
    """
    missing = [name for name in LAUNCHER_ENV if name not in os.environ]
    if missing:
        raise InvalidArgument(f"not started by torchrun: {', '.join(missing)} not set",
                              field="environment")  # fmt: skip
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = request.timeout_s if request is not None else timeout_s
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    run_dir = os.environ.get(_RUN_DIR)
    placement = Placement.load(Path(run_dir)) if run_dir else None
    torch.set_num_threads(rank_threads(local, testbed=placement is not None))
    label = f"stage {rank}"
    if run_dir:  # tells the launcher this rank is at the rendezvous, then that it joined
        Path(run_dir, f"joining-{rank}").touch()
    try:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    except Exception as exc:  # rendezvous failures surface as many kinds of error
        _fail(label, exc)
    if run_dir:
        Path(run_dir, f"joined-{rank}").touch()
    try:
        return _run_rank(request, rank, world, progress, placement, built, timeout)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _run_rank(request: RunRequest | None, rank: int, world: int, progress: Progress | None,
              placement: Placement | None, built: Built | None,
              timeout: float) -> RunReport | None:  # fmt: skip
    error: InferplanError | None = None
    header: list[Any] = [None]
    modules: list[Any] = [None] * world
    if rank == 0:
        assert request is not None
        try:
            setup, model, modules, (resolved, traced) = _setup_rank0(request, world, placement,
                                                                     built)  # fmt: skip
            header = [setup]
        except InferplanError as exc:
            error = exc
            header = [_Setup((), 0, 0, None, 0.0, error=str(exc))]
    try:  # the others wait here while rank 0 builds and plans: within the run's timeout
        dist.broadcast_object_list(header, src=0)
    except RuntimeError as exc:
        if rank == 0 or "timed out" not in str(exc).lower():
            raise
        raise TimeoutError(f"nothing from stage 0 for {timeout:g} s after every stage joined "
                           "(--timeout): it was busy or stalled") from None
    setup = header[0]
    if setup.error is not None:
        if error is not None:
            raise error
        raise StageCancelled(setup.error)
    mine: list[Any] = [None]
    dist.scatter_object_list(mine, modules if rank == 0 else None, src=0)
    stage = mine[0]
    role = setup.roles[rank]
    hosts: list[Any] = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    emulate = setup.emulate if setup.emulate is not None else len(set(hosts)) == 1
    try:
        inputs: Callable[[], Iterator[Inputs]] = functools.partial(iter, ())  # none on ranks > 0
        profiled: tuple[float, ...] = ()
        if request is not None and rank == 0:
            inputs = functools.partial(_inputs, request, setup.inferences, _load_inputs(request))
            if not emulate and placement is None:
                profiled = measure_nodes(traced, resolved.plan, next(inputs()))
        links: Links = _GlooLinks(rank, setup.timeout_s)
        if placement is not None:
            links = bed = SocketLinks(placement, rank, world, setup.timeout_s,
                                      planned_s=setup.dilation * role.node_s,
                                      inferences=setup.inferences)  # fmt: skip
            dist.barrier()  # every rank listens
            bed.connect()
        dist.barrier()
        measured, latency, inside = _pipeline(role, setup, stage, emulate, inputs(), progress,
                                              links)  # fmt: skip
        if placement is not None:
            bed.release()
            bed.close()
    except BaseException as exc:  # a stage that raises ends the run
        _fail(role.label, exc)
    if stage is not None:
        measured.state_dict_bytes = sum(
            t.numel() * t.element_size() for t in stage.state_dict().values()
        )
    measured.peak_rss_bytes = _peak_rss_bytes()
    gathered: list[Any] = [None] * world if rank == 0 else []
    dist.gather_object(measured, gathered if rank == 0 else None, dst=0)
    if rank != 0:
        return None
    report = _report(resolved, setup, emulate, gathered, (latency, inside), profiled, model,
                     inputs)  # fmt: skip
    return report


def _report(resolved: Resolved, setup: _Setup, emulate: bool, gathered: list[_Measured],
            timed: tuple[list[float], list[int]], profiled: tuple[float, ...], model: Any,
            inputs: Callable[[], Iterator[Inputs]]) -> RunReport:  # fmt: skip
    warmup, k, testbed = setup.warmup, setup.dilation, setup.testbed
    latency, inside = timed
    stages: list[StageReport] = []
    warnings: list[str] = []
    needs: list[float | None] = [m.need for m in resolved.plan.memory] or [None] * len(setup.roles)
    for role, measured, need in zip(setup.roles, gathered, needs, strict=True):
        real = measured.node_real[warmup:] or measured.node_real
        stages.append(StageReport(
            "node", role.node, k * role.node_s, _median_after(measured.node_busy, warmup),
            blocks=role.blocks, layers=role.layers,
            profiled_s=profiled[role.rank] if profiled else None,
            real_s=statistics.median(real) if real and role.computes else None,
            cpu_s=_median_after(measured.node_cpu, warmup) if testbed else None,
            quota=_median_quota(measured.node_quota, warmup) if testbed else None,
            memory=StageMemory(measured.state_dict_bytes, measured.peak_rss_bytes, need),
        ))  # fmt: skip
        late = overrun(role.node_s, real) if emulate and role.computes else None
        if late is not None:
            warnings.append(overrun_warning(role.label, role.node, late))
        if role.link_s is not None:
            nxt = setup.roles[role.rank + 1].node
            # on one clock (the testbed's one machine) a link's time is the receiver's view:
            # the sender's buffers hide how long the kernel took to pass the data on. TCP
            # hands over two messages that arrived together at once, which splits their
            # time unevenly: the mean, whose sum is the link's busy time, is the measure there
            if testbed:
                busy = link_times(measured.sent_at, gathered[role.rank + 1].arrived_at)
                took = statistics.fmean(busy[warmup:] or busy)
            else:
                took = _median_after(measured.link_busy, warmup)
            stages.append(StageReport("link", f"{role.node}->{nxt}", k * role.link_s, took))
    done = gathered[-1].done_at
    interval = (done[-1] - done[warmup]) / (len(done) - 1 - warmup)
    outputs = gathered[-1].outputs
    match, worst = _compare(model, inputs(), outputs)  # the inputs made again, one at a time
    request = resolved.request
    if request.outputs is not None:
        stacked = [torch.stack([out[k] for out in outputs]) for k in range(len(outputs[0]))]
        torch.save(stacked[0] if len(stacked) == 1 else tuple(stacked), request.outputs)
    steady = latency[warmup:]
    median = statistics.median(steady)
    # the propagation delays the run imposed: emulated, or the testbed kernel's
    imposed = k * math.fsum(resolved.delay_s) if emulate or testbed else 0.0
    queueing = Queueing(median, math.fsum(s.measured_s for s in stages) + imposed, interval,
                        statistics.fmean(inside[warmup:]), k * resolved.latency_s,
                        setup.feed_s)  # fmt: skip
    return RunReport(
        plan=resolved.plan,
        inferences=setup.inferences,
        warmup=warmup,
        emulated=emulate,
        predicted_interval=max(s.predicted_s for s in stages),
        measured_interval=interval,
        latency_median_s=median,
        latency_p95_s=_percentile(steady, 0.95),
        stages=tuple(stages),
        outputs_match=match,
        max_abs_diff=worst,
        mode="testbed" if testbed else "emulate" if emulate else "native",
        dilation=k,
        profile=resolved.profile,
        warnings=tuple(warnings),
        predicted_latency_s=k * resolved.latency_s,
        feed_interval_s=setup.feed_s,
        queueing=queueing,
    )


# --------------------------------------------------------------------------- local launch


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Forked:
    """A rank forked from the launcher, watched as a ``subprocess.Popen`` is (its
    ``returncode`` is ``-N`` after signal ``N``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"rank {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        return code


def _peak_rss_bytes() -> int:
    """This process's peak resident memory since it started or last reset it
    (:func:`_reset_peak_rss`): Linux's ``VmHWM``, else ``ru_maxrss`` (which counts the
    launcher's pages of a forked rank too)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        status = Path("/proc/self/status").read_text()
        return int(status.split("VmHWM:")[1].split()[0]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _reset_peak_rss() -> None:
    """Start the peak resident memory afresh from what this process holds now (Linux)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def launched_rank(run_dir: Path, request: RunRequest | None, *, built: Built | None = None
                  ) -> int:  # fmt: skip
    """One rank that :func:`run_plan` started (``RANK`` in the environment): run it, append
    ``s`` to ``RUN_DIR/progress`` when the stream starts and ``.`` per inference done, and
    write ``RUN_DIR/result.pkl`` (rank 0); a failure leaves one line in
    ``RUN_DIR/error-RANK.txt``. The process is named ``inferplan-rRANK``. Returns the exit
    status."""
    rank = int(os.environ.get("RANK", "0"))
    with contextlib.suppress(Exception):  # PR_SET_NAME: ps and top show which rank it is
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(15, f"inferplan-r{rank}".encode())
    with open(run_dir / "progress", "ab", buffering=0) as ticks:

        def tick(done: int) -> None:
            ticks.write(b"." if done else b"s")

        try:
            report = run_stage(request, progress=tick, built=built,
                               timeout_s=float(os.environ.get(_TIMEOUT, "60")))  # fmt: skip
        except StageCancelled:
            return 2
        except InferplanError as exc:
            (run_dir / f"error-{rank}.txt").write_text(f"stage {rank}: {exc}")
            return 2
    if report is not None:
        partial = run_dir / "result.pkl.part"
        partial.write_bytes(pickle.dumps(report))
        partial.rename(run_dir / "result.pkl")
    return 0


def fork_rank(log_path: Path, prepare: Callable[[], None], body: Callable[[], int]) -> _Forked:
    """A rank as a child of this process, which has torch and the model loaded: it starts at
    once, in a session of its own, ``prepare()`` first, its output to ``log_path``, the
    signals as a fresh interpreter takes them; it ends with ``body()``'s exit status (1 and
    the traceback in its log if it raised)."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice
        with contextlib.suppress(Exception):
            stream.flush()
    pid = os.fork()
    if pid:
        os.close(log)
        return _Forked(pid)
    code = 1
    try:
        os.setsid()
        prepare()
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        # streams of their own: the launcher's may be mid-write in another thread
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        # the signals as a fresh interpreter takes them, not as the launcher traps them
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        code = body()
    except BaseException:  # reported in the rank's log, which the launcher reads
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _fork(rank: int, env: dict[str, str], run_dir: Path, prepare: Callable[[], None],
          request: RunRequest, built: list[Built]) -> _Forked:  # fmt: skip
    """Rank ``rank`` forked (:func:`fork_rank`). Rank 0 takes ``built``; the others drop it
    (they get their stage from rank 0, as under torchrun), so that only what a rank holds
    counts as its memory."""

    def body() -> int:
        os.environ.update(env)
        os.environ.pop("TORCHELASTIC_RUN_ID", None)
        mine = built[0] if rank == 0 else None
        built.clear()
        gc.collect()
        gc.freeze()  # what the launcher left is never collected here: its pages stay shared
        _reset_peak_rss()
        return launched_rank(run_dir, request if rank == 0 else None, built=mine)

    return fork_rank(run_dir / f"log-{rank}.txt", prepare, body)


def run_plan(request: RunRequest, *, progress: Progress | None = None) -> RunReport:
    """Carry out ``request`` on this machine: one process per path node on ``127.0.0.1``
    (with ``request.testbed``, in the testbed's namespace, each on its node's address, see
    :mod:`inferplan.runtime.testbed.run`).

    Checks, builds and plans the request first (:func:`build`: the model built with its
    weights and traced once; bad input raises before any process starts), then starts the
    ranks, shows ``progress`` (inferences done), and stops every rank if one fails, hangs for
    ``timeout_s`` or the caller is interrupted (the testbed is torn down on every one of these
    ways out).

    The ranks are forked from this process, which has torch and the model loaded, when each
    computes on one thread (:func:`rank_threads`: as many ranks as cores or more, or the
    testbed): they start at once, and rank 0 runs the model built here. A forked child keeps
    none of its parent's OpenMP threads, which one thread never needs; a rank of several
    threads would wait for them for ever, so it is started afresh
    (``python -m inferplan.runtime.stage``) instead, importing torch and building the model
    again.

    Raises
    ------
    InferplanError
        For bad input (see :func:`resolve`).
    StageFailed
        If a stage raised, died or hung; the message names the stage and the cause.
    """
    if request.testbed:
        require_testbed()  # before anything is read or created
    first = build(request)
    resolved = first.resolved
    fixed = replace(
        request,
        plan=resolved.plan,
        inferences=resolved.inferences,
        inputs=str(Path(request.inputs).resolve()) if request.inputs else None,
        outputs=str(Path(request.outputs).resolve()) if request.outputs else None,
    )
    resolved = replace(resolved, request=fixed)
    built = [replace(first, resolved=resolved)]  # dropped once the ranks hold what they need
    del first
    world = len(resolved.plan.path)
    fork = rank_threads(world, testbed=request.testbed) == 1
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="inferplan-run-"))
        run_dir = Path(tmp)
        if not fork:
            (run_dir / "request.pkl").write_bytes(pickle.dumps(fixed))
            built.clear()
        host = Hosting({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())})
        if request.testbed:
            host = stack.enter_context(hosting(resolved, run_dir))
        env = {_RUN_DIR: tmp, **host.env, "WORLD_SIZE": str(world),
               "LOCAL_WORLD_SIZE": str(world),
               _TIMEOUT: repr(resolved.request.timeout_s)}  # fmt: skip
        enter = host.preexec

        def prepare() -> None:
            die_with_parent()
            if enter is not None:
                enter()

        procs: list[Rank] = []
        try:
            for rank in range(world):
                ranked = {**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}
                if fork:
                    procs.append(_fork(rank, ranked, run_dir, prepare, fixed, built))
                else:
                    started = {**os.environ, **ranked}
                    started.pop("TORCHELASTIC_RUN_ID", None)
                    with open(run_dir / f"log-{rank}.txt", "wb") as log:
                        procs.append(subprocess.Popen(
                            [sys.executable, "-m", "inferplan.runtime.stage", str(run_dir)],
                            env=started, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=prepare,
                        ))  # fmt: skip
                host.place(rank, procs[-1].pid)
            built.clear()  # the ranks have it: the launcher holds no model while they run
            _watch(procs, resolved, run_dir, progress)
        finally:
            stop_ranks(procs)
        result = run_dir / "result.pkl"
        report: RunReport = pickle.loads(result.read_bytes())
        return report


def _watch(procs: Sequence[Rank], resolved: Resolved, run_dir: Path,
           progress: Progress | None) -> None:  # fmt: skip
    """Wait for every rank; raise StageFailed on the first failure, a rank that does not join
    within the timeout of the first one to reach the rendezvous, or a stall."""
    timeout = resolved.request.timeout_s
    done, last_change = 0, math.inf  # the clock runs once the stream has started
    progress_file = run_dir / "progress"
    arrived, joined = math.inf, False  # when the first rank reached the rendezvous
    while True:
        if not joined:
            joined = len(list(run_dir.glob("joined-*"))) == len(procs)
            if arrived == math.inf and any(run_dir.glob("joining-*")):
                arrived = time.monotonic()
            if not joined and time.monotonic() - arrived > timeout:
                ranks = range(len(procs))
                # the ranks that never came are the cause; the others wait for them
                absent = [k for k in ranks if not (run_dir / f"joining-{k}").exists()] or [
                    k for k in ranks if not (run_dir / f"joined-{k}").exists()
                ]
                raise StageFailed(f"{_label(resolved, absent[0])} did not join the run within "
                                  f"{timeout:g} s of the first stage ({len(procs) - len(absent)} "
                                  f"of {len(procs)} stages were there)")  # fmt: skip
        codes = [p.poll() for p in procs]
        failed = [k for k, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            raise StageFailed(_failure(procs, failed, run_dir, resolved))
        if all(c == 0 for c in codes):
            if not (run_dir / "result.pkl").exists():
                raise StageFailed("the run ended without a result from stage 0")
            return
        with contextlib.suppress(OSError):
            ticks = progress_file.read_bytes()  # "s" when the stream starts, "." per inference
            if ticks and last_change == math.inf:
                last_change = time.monotonic()
            if ticks.count(b".") != done:
                done, last_change = ticks.count(b"."), time.monotonic()
                if progress is not None:
                    progress(done)
        if time.monotonic() - last_change > timeout:
            raise StageFailed(f"no inference completed for {timeout:g} s: a stage hung "
                              f"({done} of {resolved.inferences} done)")  # fmt: skip
        time.sleep(0.05)


def _label(resolved: Resolved, k: int) -> str:
    return _stage_label(resolved.plan, k)


def _failure(procs: Sequence[Rank], failed: list[int], run_dir: Path, resolved: Resolved) -> str:
    """One line naming the stage that failed first and its cause. A rank killed by a signal
    is the cause (its peers then fail on the broken connection); otherwise the first report."""
    time.sleep(0.2)  # let the stages that fail in turn finish writing their reports
    for p in procs:
        p.poll()
    label = functools.partial(_label, resolved)
    died = [k for k, p in enumerate(procs) if p.returncode is not None and p.returncode < 0]
    if died:
        code = procs[died[0]].returncode
        assert code is not None
        return f"{label(died[0])} died: {signal.Signals(-code).name}"
    reports = sorted(run_dir.glob("error-*.txt"), key=lambda f: f.stat().st_mtime_ns)
    if reports:
        return reports[0].read_text().strip()
    k = failed[0]
    log = (run_dir / f"log-{k}.txt").read_text(errors="replace").strip().splitlines()
    return f"{label(k)} failed: {log[-1] if log else f'exit code {procs[k].returncode}'}"
