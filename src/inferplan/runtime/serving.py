"""Serving a decoder LM for real: a serving plan's stages as torch.distributed ranks.

The decoder is a transformers LLaMA-style model built from its config with seeded random
weights (nothing is downloaded). Each stage of the plan runs its contiguous decoder layers
(the embedding with the first stage, the final norm and the LM head with the last) in a rank
of its own, forked from the launcher, talking gloo on 127.0.0.1.

Rank 0 also schedules, as the planner models it (docs/serving.md): requests arrive open-loop
(Poisson at the workload's rate, classes drawn by their shares, seeded); a waiting request's
prefill goes first whenever the decode batch has room; otherwise one decode step moves every
sequence in flight through the stages. Sequences join the batch after their prefill and leave
it when they have their output tokens (continuous batching up to the planned batch). Every
stage keeps its layers' KV cache per sequence and frees it when the sequence leaves. Decoding
is greedy.

With ``emulate``, each stage's step takes at least its planned time
(:func:`~inferplan.runtime.emulate.pace`): a decode step the stage's planned decode time, a
prefill its planned prefill time for the request's class; the links' planned time of a step
is added to the last stage's.

On the testbed (``hosting``, :mod:`inferplan.runtime.testbed.serving`) each rank runs in its
node's network namespace and CPU cgroup; the hidden states go from rank to rank over TCP
between the nodes' addresses, links the kernel shapes, and each stage is paced from its own
start (``pace_each``): the links take their own time. The request then comes dilated (every
time ``k`` times the plan's) and the record is the run's times divided by ``k``.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import multiprocessing as mp
import os
import signal
import socket
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from inferplan.errors import InferplanError

__all__ = [
    "Hosting",
    "ServeRequest",
    "ServeStage",
    "ServingFailed",
    "greedy_reference",
    "request_arrivals",
    "run_serving",
    "split_layers",
    "step_record",
]

_STOP, _PREFILL, _DECODE, _FREE = 0, 1, 2, 3
_HEADER, _TOKENS = 1, 4


class ServingFailed(InferplanError):
    """A serving rank failed or fell silent."""


@dataclass(frozen=True)
class ServeStage:
    """A rank: decoder layers ``first..last - 1``, whether it embeds the tokens and whether it
    runs the final norm and head, and its planned decode and prefill (per class) times."""

    first: int
    last: int
    embed: bool
    head: bool
    decode_s: float = 0.0
    prefill_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class ServeRequest:
    """What to serve: the model ``config`` (a transformers config), the ``stages``, the decode
    ``batch``, the arrival ``rate`` (requests/s), the classes as ``(prompt, output, share)``
    and ``requests`` requests, with a ``seed`` for weights, prompts and arrivals."""

    config: Any
    stages: tuple[ServeStage, ...]
    batch: int
    rate: float
    classes: tuple[tuple[int, int, float], ...]
    requests: int
    seed: int = 0
    emulate: bool = False
    link_decode_s: float = 0.0
    timeout_s: float = 60.0
    reference: bool = True
    pace_each: bool = False


def split_layers(
    blocks: Sequence[tuple[int, int]], layers: int
) -> tuple[tuple[int, int, bool, bool], ...]:
    """The ranks of a plan whose stages run blocks ``[first, last)`` of ``layers + 1`` (the
    layers, then the final norm and head): ``(first layer, last layer, embed, head)`` for each
    stage that runs any block (a stage with none only relays and gets no rank).

    Examples
    --------
    >>> split_layers([(0, 2), (2, 2), (2, 5)], 4)
    ((0, 2, True, False), (2, 4, False, True))
    """
    out = []
    for first, last in blocks:
        if last > first:
            out.append((first, min(last, layers), first == 0, last == layers + 1))
    return tuple(out)


def build_model(config: Any, seed: int) -> Any:
    """The causal LM of ``config`` with weights drawn from ``seed``, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config).eval()  # type: ignore[no-untyped-call]


def request_arrivals(request: ServeRequest) -> list[tuple[float, int, list[int]]]:
    """``(arrival s, class, prompt ids)`` of each request, seeded."""
    rng = np.random.default_rng(request.seed)
    shares = np.array([c[2] for c in request.classes])
    gaps = rng.exponential(1 / request.rate, request.requests)
    kinds = rng.choice(len(shares), size=request.requests, p=shares / shares.sum())
    vocab = int(request.config.vocab_size)
    at = np.cumsum(gaps) - gaps[0]
    return [(float(at[i]), int(kinds[i]),
             rng.integers(0, vocab, request.classes[int(kinds[i])][0]).tolist())
            for i in range(request.requests)]  # fmt: skip


def greedy_reference(model: Any, prompt: Sequence[int], tokens: int) -> list[int]:
    """The unsplit model's greedy decoding of ``tokens`` tokens after ``prompt``."""
    import torch
    from transformers import DynamicCache

    cache = DynamicCache()
    ids = torch.tensor([list(prompt)])
    out: list[int] = []
    with torch.no_grad():
        for _ in range(tokens):
            logits = model(input_ids=ids, cache=cache, use_cache=True).logits
            nxt = int(logits[0, -1].argmax())
            out.append(nxt)
            ids = torch.tensor([[nxt]])
    return out


class _Stage:
    """A rank's layers and its KV caches, one per sequence."""

    def __init__(self, model: Any, stage: ServeStage) -> None:
        self.inner, self.head_mod, self.stage = model.model, model.lm_head, stage
        self.caches: dict[int, Any] = {}
        self.wire: Any = _GlooWire()
        self.lengths: dict[int, int] = {}
        # per step: (op, sequences, compute s, compute and pacing s, step s to the last send)
        self.log: list[tuple[int, int, float, float, float]] = []

    def free(self, seq: int) -> None:
        """Drop a finished sequence's KV cache."""
        self.caches.pop(seq, None)
        self.lengths.pop(seq, None)

    def run(self, seq: int, x: Any) -> Any:
        """Token ids (first stage) or hidden states ``[1, L, H]`` through the layers; the
        next token's id at the last stage."""
        import torch
        from transformers import DynamicCache

        cache = self.caches.setdefault(seq, DynamicCache())
        h = self.inner.embed_tokens(x) if self.stage.embed else x
        past = self.lengths.get(seq, 0)
        self.lengths[seq] = past + int(h.shape[1])
        pid = torch.arange(past, past + h.shape[1])[None]
        pe = self.inner.rotary_emb(h, pid)
        for i in range(self.stage.first, self.stage.last):
            h = self.inner.layers[i](h, position_ids=pid, cache=cache, use_cache=True,
                                     position_embeddings=pe)  # fmt: skip
        if self.stage.head:
            return self.head_mod(self.inner.norm(h[:, -1:])).argmax(-1)
        return h


def _recv(t: Any, src: int, tag: int, timeout_s: float) -> None:
    import torch.distributed as dist

    try:
        work = dist.irecv(t, src, tag=tag)
        if work is not None:
            work.wait(datetime.timedelta(seconds=timeout_s))
    except RuntimeError as exc:
        raise TimeoutError(f"no message from stage {src} for {timeout_s:g} s: {exc}") from None


def _step(
    rank: int,
    world: int,
    worker: _Stage,
    request: ServeRequest,
    op: int,
    seqs: list[int],
    xs: list[Any],
    kind: int,
    begun: float,
) -> list[int]:
    """One step at ``rank``: the sequences through its layers, paced when emulating; sends on
    to the next rank; returns the tokens at rank 0 (from the last stage).

    ``begun`` is when rank 0 began the step (``time.monotonic``, one clock for every rank of
    the machine). Emulating, a stage's step ends no earlier than ``begun`` plus the planned
    times of the stages up to it (the links' with the last stage's decode step): the step
    keeps the plan's schedule, and the real sends between stages take from the planned time
    of the links and stages after them rather than adding to it."""
    import torch
    import torch.distributed as dist

    from inferplan.runtime.emulate import pace

    started = time.monotonic()
    with torch.no_grad():
        outs = [worker.run(s, x) for s, x in zip(seqs, xs, strict=True)]
    computed = time.monotonic()
    if request.emulate:
        planned = math.fsum(
            st.decode_s if op == _DECODE else (st.prefill_s[kind] if st.prefill_s else 0.0)
            for st in request.stages[(rank if request.pace_each else 0) : rank + 1]
        )
        if worker.stage.head and op == _DECODE:
            planned += request.link_decode_s
        pace(started if request.pace_each else begun, planned)
    paced = time.monotonic()

    def record() -> None:
        worker.log.append((op, len(seqs), computed - started, paced - started,
                           time.monotonic() - started))  # fmt: skip

    if worker.stage.head:
        tokens = torch.cat([o.reshape(1) for o in outs]).to(torch.int64)
        if rank != 0:
            dist.send(tokens, 0, tag=_TOKENS)
            record()
            return []
        record()
        return [int(t) for t in tokens]
    worker.wire.send(rank + 1, request, op, seqs, kind, begun, torch.cat(outs))
    record()
    if rank == 0:
        tokens = torch.zeros(len(seqs), dtype=torch.int64)
        _recv(tokens, world - 1, _TOKENS, request.timeout_s)
        return [int(t) for t in tokens]
    return []


_HEAD = 5  # a message's header: op, sequences, tokens each, class, begun (ns)


def _message_size(request: ServeRequest) -> int:
    """A message's float64s: the header, a sequence id per slot of the batch, and the hidden
    states of a decode step (batch x 1 token) or of a prefill (1 x the longest prompt)."""
    longest = max(c[0] for c in request.classes)
    hidden = int(request.config.hidden_size)
    return _HEAD + request.batch + max(request.batch, longest) * hidden


def _header(request: ServeRequest, op: int, seqs: list[int], length: int, kind: int,
            begun: float, size: int) -> Any:  # fmt: skip
    """A float64 message of ``size`` that starts with the header and the sequences' ids (ids,
    counts and nanoseconds below 2**53 are exact in float64)."""
    import torch

    message = torch.zeros(size, dtype=torch.float64)
    message[:_HEAD] = torch.tensor([op, len(seqs), length, kind, round(begun * 1e9)],
                                   dtype=torch.float64)  # fmt: skip
    if seqs:
        message[_HEAD : _HEAD + len(seqs)] = torch.tensor(seqs, dtype=torch.float64)
    return message


class _GlooWire:
    """Messages between stages through ``torch.distributed``: what to do, the sequences and
    their hidden states, all in one float64 tensor of :func:`_message_size` (float32 hidden
    states are exact in float64): one send per hop, since every send waits for the receiver,
    which a busy machine schedules late."""

    def send(self, dst: int, request: ServeRequest, op: int, seqs: list[int], kind: int = 0,
             begun: float = 0.0, data: Any = None) -> None:  # fmt: skip
        import torch
        import torch.distributed as dist

        length = 0 if data is None else int(data.shape[1])
        message = _header(request, op, seqs, length, kind, begun, _message_size(request))
        if data is not None:
            flat = data.reshape(-1).to(torch.float64)
            start = _HEAD + request.batch
            message[start : start + flat.numel()] = flat
        dist.send(message, dst, tag=_HEADER)

    def recv(self, src: int, request: ServeRequest) -> tuple[list[int], Any]:
        """The header's five numbers and the sequences' ids, and their hidden states
        ``[n, length, hidden]`` (float32; None for a message without)."""
        import torch

        message = torch.zeros(_message_size(request), dtype=torch.float64)
        _recv(message, src, _HEADER, request.timeout_s)
        head = [int(v) for v in message[: _HEAD + int(message[1])]]
        n, length = head[1], head[2]
        if not length:
            return head, None
        start, hidden = _HEAD + request.batch, int(request.config.hidden_size)
        data = message[start : start + n * length * hidden].reshape(n, length, hidden)
        return head, data.to(torch.float32)


def _follower(rank: int, world: int, worker: _Stage, request: ServeRequest) -> None:
    while True:
        head, data = worker.wire.recv(rank - 1, request)
        op, n, _, kind, begun_ns = head[:_HEAD]
        ids = head[_HEAD:]
        if op in (_STOP, _FREE):
            if rank + 1 < world:
                worker.wire.send(rank + 1, request, op, ids)
            for s in ids:
                worker.free(s)
            if op == _STOP:
                return
            continue
        _step(rank, world, worker, request, op, ids, [data[i : i + 1] for i in range(n)], kind,
              begun_ns / 1e9)  # fmt: skip


def _scheduler(world: int, worker: _Stage, request: ServeRequest) -> dict[str, Any]:
    """Rank 0: arrivals, prefills first while the batch has room, decode steps, the record."""
    import torch

    arrivals = request_arrivals(request)
    outputs: dict[int, list[int]] = {i: [] for i in range(len(arrivals))}
    times: dict[int, list[float]] = {i: [] for i in range(len(arrivals))}
    active: list[int] = []
    waiting = 0  # the next request not yet prefilled
    in_flight: list[int] = []
    # (op, sequences in flight, s from its start to its tokens): a decode step moves those
    # sequences, a prefill interrupts them
    walls: list[tuple[int, int, float]] = []
    t0 = time.monotonic()
    deadline = t0 + request.timeout_s
    scheduled = -math.inf  # emulating: when the last step ends on the plan's schedule
    decode_planned = math.fsum(st.decode_s for st in request.stages) + request.link_decode_s

    def begin(ready: float, planned: float) -> tuple[float, float]:
        """The moment now and the step's start on the schedule: a step that follows another
        at once starts when that one ends on the schedule (a late wake-up delays one step,
        not every later one), one after a wait when it is ready; never later than now."""
        nonlocal scheduled
        now = time.monotonic()
        start = (min(now, max(ready, scheduled)) if request.emulate and not request.pace_each
                 else now)  # fmt: skip
        scheduled = start + planned
        return now, start

    while waiting < len(arrivals) or active:
        now = time.monotonic() - t0
        if time.monotonic() > deadline:
            raise TimeoutError(f"serving did not finish in {request.timeout_s:g} s")
        if waiting < len(arrivals) and arrivals[waiting][0] <= now and len(active) < request.batch:
            _, kind, prompt = arrivals[waiting]
            seq = waiting
            waiting += 1
            planned = math.fsum(st.prefill_s[kind] if st.prefill_s else 0.0
                                for st in request.stages)  # fmt: skip
            began, start = begin(t0 + arrivals[seq][0], planned)
            tok = _step(0, world, worker, request, _PREFILL, [seq], [torch.tensor([prompt])],
                        kind, start)[0]  # fmt: skip
            walls.append((_PREFILL, len(active), time.monotonic() - began))
            outputs[seq].append(tok)
            times[seq].append(time.monotonic() - t0)
            active.append(seq)
        elif active:
            in_flight.append(len(active))
            xs = [torch.tensor([[outputs[s][-1]]]) for s in active]
            began, start = begin(-math.inf, decode_planned)
            toks = _step(0, world, worker, request, _DECODE, active, xs, 0, start)
            walls.append((_DECODE, len(active), time.monotonic() - began))
            stamp = time.monotonic() - t0
            for s, tok in zip(active, toks, strict=True):
                outputs[s].append(tok)
                times[s].append(stamp)
        elif waiting < len(arrivals):
            time.sleep(max(0.0, arrivals[waiting][0] - now))
            continue
        done = [s for s in active if len(outputs[s]) >= request.classes[arrivals[s][1]][1]]
        if done:
            active = [s for s in active if s not in done]
            for s in done:
                worker.free(s)
            if world > 1:
                worker.wire.send(1, request, _FREE, done)
    if world > 1:
        worker.wire.send(1, request, _STOP, [])
    return {"arrivals": [(a, k, p) for a, k, p in arrivals], "outputs": outputs,
            "times": times, "in_flight": in_flight, "walls": walls}  # fmt: skip


class Hosting(Protocol):
    """Where the ranks run (the testbed, :mod:`inferplan.runtime.testbed.serving`): ``enter``
    runs first in each forked rank, and the rank then waits until the launcher has passed its
    process id to ``admit``; ``env`` is the ranks' environment, ``wire`` a rank's messages to
    the next stage (with ``start()``, once every rank listens, and ``stop()``), ``dilation``
    how many times the plan's time the run takes."""

    env: dict[str, str]
    dilation: float

    def enter(self) -> None: ...

    def admit(self, pid: int) -> None: ...

    def wire(self, rank: int, world: int, request: ServeRequest) -> Any: ...


def _rank_main(rank: int, world: int, port: int, request: ServeRequest, conn: Any,
               hosting: Hosting | None, admitted: Any) -> None:  # fmt: skip
    import torch
    import torch.distributed as dist

    try:
        os.setpgid(0, 0)
        wire = None
        if hosting is not None:
            hosting.enter()
            if not admitted.wait(request.timeout_s):
                raise TimeoutError("the launcher did not admit the rank to the testbed")
        torch.set_num_threads(1)
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        if hosting is not None:
            os.environ.update(hosting.env)
            wire = hosting.wire(rank, world, request)
        dist.init_process_group("gloo", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=request.timeout_s))  # fmt: skip
        worker = _Stage(build_model(request.config, request.seed), request.stages[rank])
        if wire is not None:
            dist.barrier()  # every rank listens
            wire.start()
            worker.wire = wire
        try:
            if rank == 0:
                result = _scheduler(world, worker, request)
            else:
                _follower(rank, world, worker, request)
                result = {}
        finally:
            if wire is not None:
                wire.stop()
        result["log"] = worker.log
        dist.destroy_process_group()
        conn.send(("ok", result))
    except BaseException as exc:
        conn.send(("error", f"stage {rank}: {type(exc).__name__}: {exc}"))
    finally:
        conn.close()
        os._exit(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(request: ServeRequest, hosting: Hosting | None = None) -> dict[str, Any]:
    ctx = mp.get_context("fork")
    world, port = len(request.stages), _free_port()
    pipes, procs = [], []
    admitted = ctx.Event()
    for rank in range(world):
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_rank_main, daemon=True,
                        args=(rank, world, port, request, child, hosting, admitted))  # fmt: skip
        p.start()
        child.close()
        pipes.append(parent)
        procs.append(p)
        if hosting is not None and p.pid is not None:
            hosting.admit(p.pid)
    admitted.set()
    results: list[Any] = [None] * world
    deadline = time.monotonic() + request.timeout_s + 30
    try:
        for rank, conn in enumerate(pipes):
            left = deadline - time.monotonic()
            if not conn.poll(max(0.0, left)):
                raise ServingFailed(f"stage {rank} did not finish in {request.timeout_s:g} s")
            try:
                status, value = conn.recv()
            except EOFError:
                raise ServingFailed(f"stage {rank} died without a word") from None
            if status != "ok":
                raise ServingFailed(str(value))
            results[rank] = value
    finally:
        for p in procs:
            p.join(timeout=2)
            if p.is_alive() and p.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.join(timeout=2)
    return {**results[0], "logs": [r["log"] for r in results]}


def _median_p95(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    ordered = sorted(values)
    return statistics.median(ordered), ordered[
        min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)
    ]


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def step_record(raw: dict[str, Any], span: float) -> dict[str, Any]:
    """What the steps took: at rank 0 the decode steps' and prefills' wall time (from the
    step's start to its tokens back), the sequences per decode step, the sequences in flight
    a prefill interrupts, the share of ``span`` spent in prefills and ``tpot_from_steps``,
    the mean time per output token these steps make (each decode step's time counted once
    per sequence it moves, each prefill's once per sequence it holds up, over the sequences
    moved: what the measured TPOT is, but for the scheduler's gaps); per stage the mean
    compute, compute with pacing and whole step (to its last send) of its decode steps and
    prefills; and ``send_s``, the time a decode step's stages spent in their sends, summed
    over the stages (emulating, the schedule absorbs it as long as the stages after a send
    have planned time to spare)."""
    walls = raw["walls"]
    decode = [w for op, _, w in walls if op == _DECODE]
    prefill = [w for op, _, w in walls if op == _PREFILL]
    stages = []
    for log in raw["logs"]:
        row: dict[str, float] = {}
        for name, op in (("decode", _DECODE), ("prefill", _PREFILL)):
            steps = [entry for entry in log if entry[0] == op]
            row[f"{name}_compute_s"] = _mean([e[2] for e in steps])
            row[f"{name}_paced_s"] = _mean([e[3] for e in steps])
            row[f"{name}_step_s"] = _mean([e[4] for e in steps])
        stages.append(row)
    sends = math.fsum(row["decode_step_s"] - row["decode_paced_s"] for row in stages)
    return {
        "decode_steps": len(decode), "decode_step_s": _mean(decode),
        "decode_batch": _mean([n for op, n, _ in walls if op == _DECODE]),
        "prefills": len(prefill), "prefill_s": _mean(prefill),
        "prefill_in_flight": _mean([n for op, n, _ in walls if op == _PREFILL]),
        "tpot_from_steps": math.fsum(n * w for _, n, w in walls)
        / max(1, sum(n for op, n, _ in walls if op == _DECODE)),
        "prefill_busy": math.fsum(prefill) / span if span > 0 else math.nan,
        "send_s": sends if decode else math.nan, "stages": stages,
    }  # fmt: skip


def _undilated(raw: dict[str, Any], k: float) -> dict[str, Any]:
    """A run's record with every time divided by ``k`` (the testbed's dilation)."""
    if k == 1.0:
        return raw
    return {**raw,
            "arrivals": [(a / k, c, p) for a, c, p in raw["arrivals"]],
            "times": {s: [t / k for t in ts] for s, ts in raw["times"].items()},
            "walls": [(op, n, w / k) for op, n, w in raw["walls"]],
            "logs": [[(op, n, a / k, b / k, c / k) for op, n, a, b, c in log]
                     for log in raw["logs"]]}  # fmt: skip


def run_serving(request: ServeRequest, hosting: Hosting | None = None) -> dict[str, Any]:
    """Serve ``request.requests`` requests through the stages; the measured TTFT and TPOT
    (median and p95 over the requests), tokens/s, the decode batches seen, whether every
    generated token equals the unsplit model's greedy decoding, the arrival rate the run's
    requests came at and, under ``steps``, what its steps took (:func:`step_record`).

    With ``hosting`` (the testbed), the ranks run where it puts them and every time of the
    record is the run's over its ``dilation``."""
    raw = _undilated(_launch(request, hosting), hosting.dilation if hosting else 1.0)
    arrivals, outputs, times = raw["arrivals"], raw["outputs"], raw["times"]
    ttft = [times[i][0] - arrivals[i][0] for i in range(len(arrivals))]
    tpot = [(times[i][-1] - times[i][0]) / (len(times[i]) - 1)
            for i in range(len(arrivals)) if len(times[i]) > 1]  # fmt: skip
    span = max(t[-1] for t in times.values()) - arrivals[0][0]
    tokens = sum(len(o) for o in outputs.values())
    match = None
    if request.reference:
        model = build_model(request.config, request.seed)
        match = all(greedy_reference(model, arrivals[i][2], len(outputs[i])) == outputs[i]
                    for i in range(len(arrivals)))  # fmt: skip
    in_flight = raw["in_flight"]
    ttft_m, ttft_p = _median_p95(ttft)
    tpot_m, tpot_p = _median_p95(tpot)
    # the mean over output tokens after each request's first (what the planner's TPOT predicts)
    gaps = [len(times[i]) - 1 for i in range(len(arrivals))]
    tpot_mean = (math.fsum(times[i][-1] - times[i][0] for i in range(len(arrivals)))
                 / sum(gaps)) if sum(gaps) else math.nan  # fmt: skip
    ttft_mean = _mean(ttft)
    return {"ttft": ttft_m, "ttft_p95": ttft_p, "tpot": tpot_m, "tpot_p95": tpot_p,
            "ttft_mean": ttft_mean, "tpot_mean": tpot_mean,
            "tokens_per_s": tokens / span if span > 0 else math.nan, "tokens": tokens,
            "requests": len(arrivals), "tokens_match": match,
            "max_in_flight": max(in_flight, default=0),
            "mean_in_flight": statistics.fmean(in_flight) if in_flight else 0.0,
            "arrival_rate": ((len(arrivals) - 1) / (arrivals[-1][0] - arrivals[0][0])
                             if len(arrivals) > 1 and arrivals[-1][0] > arrivals[0][0]
                             else math.nan),
            "steps": step_record(raw, span)}  # fmt: skip
