"""A serving plan served on the testbed (:mod:`inferplan.runtime.testbed.linux`): each serving
rank in its node's network namespace address and CPU cgroup, the hidden states over TCP links
the kernel shapes, as a co-design plan runs there (:mod:`inferplan.runtime.testbed.run`).

The launcher (:func:`serving_testbed`) times each rank's decode step at the plan's batch on
this machine, one thread (``t_v`` CPU seconds), against the plan's ``D_v``; node ``v`` then
needs ``t_v / D_v`` of a core, and the run is dilated by ``k``
(:func:`~inferplan.runtime.testbed.linux.dilation`, through
:func:`~inferplan.runtime.testbed.run.layout`): each rank's compute runs under its CFS quota, the
link between two ranks is shaped at ``B / k``, where ``B`` is the rate at which the plan's
links between their nodes move the bits of a step (``1 / B`` the sum of their ``1 / capacity``),
and every planned time of the request is ``k`` times the plan's. Each stage is still paced to
its own planned step (a prefill, or a decode step shorter here than planned, keeps the plan's
time), from its own start, so the links add their own time. The links the ranks do not cross
(the gateways' ends, carrying token ids) are paced as planned with the last stage's decode
step. The tokens go back to rank 0 over the control connection (a few bytes a sequence, never
shaped).

Refused, in one line, before anything is created: a machine without a testbed
(:func:`~inferplan.runtime.testbed.linux.require`, naming what it lacks), and links between
ranks with a delay where the kernel has no netem.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from inferplan.runtime.serving import (
    _DECODE,
    _HEAD,
    _PREFILL,
    ServeRequest,
    _header,
    _Stage,
    build_model,
)
from inferplan.runtime.testbed.linux import Testbed, require, transport_cost
from inferplan.runtime.testbed.run import Layout, Placement, SocketLinks, layout, placed

__all__ = ["ServingBed", "serving_testbed", "stage_decode_seconds"]

_TIMED_STEPS = 5  # decode steps a rank's time here is the median of


def stage_decode_seconds(request: ServeRequest) -> tuple[float, ...]:
    """CPU seconds (one thread) each stage's decode step takes here at the request's batch,
    each sequence after a prefill of the first class's prompt: the median of a few steps."""
    import torch

    model = build_model(request.config, request.seed)
    prompt = request.classes[0][0]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = []
    try:
        with torch.no_grad():
            for stage in request.stages:
                worker = _Stage(model, stage)
                hidden = () if stage.embed else (int(request.config.hidden_size),)
                dtype = torch.int64 if stage.embed else torch.float32
                for seq in range(request.batch):
                    worker.run(seq, torch.zeros((1, prompt, *hidden), dtype=dtype))
                steps = []
                for _ in range(_TIMED_STEPS):
                    started = time.thread_time()
                    for seq in range(request.batch):
                        worker.run(seq, torch.zeros((1, 1, *hidden), dtype=dtype))
                    steps.append(time.thread_time() - started)
                out.append(statistics.median(steps))
    finally:
        torch.set_num_threads(threads)
    return tuple(out)


class _RankWire:
    """A rank's messages to the next stage over the testbed's links: the header and the ids
    as float64, then the hidden states' float32 bytes, only as many as the step has."""

    def __init__(self, links: SocketLinks) -> None:
        self.links = links

    def start(self) -> None:
        """Connect to the neighbours (every rank listens already), then hold the compute to
        the rank's quota."""
        self.links.connect()
        self.links.hold()

    def stop(self) -> None:
        self.links.release()
        self.links.close()

    def send(self, dst: int, request: ServeRequest, op: int, seqs: list[int], kind: int = 0,
             begun: float = 0.0, data: Any = None) -> None:  # fmt: skip
        length = 0 if data is None else int(data.shape[1])
        head = _header(request, op, seqs, length, kind, begun, _HEAD + request.batch)
        self.links.send([head] if data is None else [head, data.float()])

    def recv(self, src: int, request: ServeRequest) -> tuple[list[int], Any]:
        from inferplan.runtime.split import TensorSpec

        (message,) = self.links.recv([TensorSpec((_HEAD + request.batch,), "float64")])
        head = [int(v) for v in message[: _HEAD + int(message[1])]]
        n, length = head[1], head[2]
        if head[0] not in (_PREFILL, _DECODE):
            return head, None
        hidden = int(request.config.hidden_size)
        (data,) = self.links.recv([TensorSpec((n, length, hidden), "float32")])
        return head, data


@dataclass
class ServingBed:
    """Where the serving ranks run on a set-up testbed (a
    :class:`~inferplan.runtime.serving.Hosting`)."""

    placement: Placement
    layout: Layout
    enter: Callable[[], None]
    admit: Callable[[int], None]
    env: dict[str, str]
    dilation: float

    def wire(self, rank: int, world: int, request: ServeRequest) -> _RankWire:
        return _RankWire(SocketLinks(self.placement, rank, world, request.timeout_s,
                                     planned_s=request.stages[rank].decode_s, inferences=0))

    def summary(self) -> dict[str, Any]:
        """What the run was given: the dilation, each rank's quota and core, the links' rates."""
        lay = self.layout
        return {"dilation": lay.dilation, "quotas": list(lay.quotas), "cpus": list(lay.cpus),
                "link_rates_bps": [link.rate_bps for link in lay.links]}  # fmt: skip


def dilated(request: ServeRequest, k: float, unrealised_s: float) -> ServeRequest:
    """``request`` with every planned time ``k`` times over (the arrivals ``k`` times slower),
    each stage paced from its own start, the links the ranks do not cross (``unrealised_s`` of
    a decode step) paced with the last stage."""
    stages = tuple(dataclasses.replace(s, decode_s=s.decode_s * k,
                                       prefill_s=tuple(p * k for p in s.prefill_s))
                   for s in request.stages)  # fmt: skip
    return dataclasses.replace(request, stages=stages, rate=request.rate / k, emulate=True,
                               pace_each=True, link_decode_s=max(0.0, unrealised_s) * k,
                               timeout_s=request.timeout_s * k)  # fmt: skip


@contextlib.contextmanager
def serving_testbed(
    request: ServeRequest,
    rates_bps: Sequence[float],
    delays_s: Sequence[float],
    unrealised_s: float,
    *,
    at_least: float = 1.0,
) -> Iterator[tuple[ServeRequest, ServingBed]]:
    """Set up the testbed of a serving run: ``rates_bps`` and ``delays_s`` of the links
    between consecutive ranks, ``unrealised_s`` the planned decode time of the plan's other
    links; yields the dilated request and the :class:`ServingBed` to run it on, and tears
    everything down on leaving.

    Raises
    ------
    TestbedUnavailable
        Naming what the machine lacks, before anything is created.
    """
    require(delays=any(d > 0 for d in delays_s))
    real = stage_decode_seconds(request)
    lay = layout(real, [s.decode_s for s in request.stages], list(rates_bps), list(delays_s),
                 cpus=sorted(os.sched_getaffinity(0)), at_least=at_least,
                 transport=transport_cost())  # fmt: skip
    with Testbed(lay.hosts, lay.links, period_s=lay.period_s) as bed:
        env = {"GLOO_SOCKET_IFNAME": "lo"}
        yield (dilated(request, lay.dilation, unrealised_s),
               ServingBed(placed(lay, bed), lay, bed.preexec(), bed.admit, env, lay.dilation))
