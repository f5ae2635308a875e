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
from typing import Any

import numpy as np

from inferplan.errors import InferplanError

__all__ = [
    "ServeRequest",
    "ServeStage",
    "ServingFailed",
    "greedy_reference",
    "run_serving",
    "split_layers",
]

_STOP, _PREFILL, _DECODE, _FREE = 0, 1, 2, 3
_HEADER, _IDS, _DATA, _TOKENS = 1, 2, 3, 4


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


def _arrivals(request: ServeRequest) -> list[tuple[float, int, list[int]]]:
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
        self.lengths: dict[int, int] = {}

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
) -> list[int]:
    """One step at ``rank``: the sequences through its layers, paced when emulating; sends on
    to the next rank; returns the tokens at rank 0 (from the last stage)."""
    import torch
    import torch.distributed as dist

    from inferplan.runtime.emulate import pace

    started = time.monotonic()
    with torch.no_grad():
        outs = [worker.run(s, x) for s, x in zip(seqs, xs, strict=True)]
    if request.emulate:
        st = worker.stage
        planned = st.decode_s if op == _DECODE else (st.prefill_s[kind] if st.prefill_s else 0)
        if st.head and op == _DECODE:
            planned += request.link_decode_s
        pace(started, planned)
    if worker.stage.head:
        tokens = torch.cat([o.reshape(1) for o in outs]).to(torch.int64)
        if rank != 0:
            dist.send(tokens, 0, tag=_TOKENS)
            return []
        return [int(t) for t in tokens]
    _send_header(rank + 1, op, seqs, outs[0].shape[1], kind)
    dist.send(torch.cat(outs).contiguous(), rank + 1, tag=_DATA)
    if rank == 0:
        tokens = torch.zeros(len(seqs), dtype=torch.int64)
        _recv(tokens, world - 1, _TOKENS, request.timeout_s)
        return [int(t) for t in tokens]
    return []


def _send_header(dst: int, op: int, seqs: list[int], length: int, kind: int) -> None:
    import torch
    import torch.distributed as dist

    dist.send(torch.tensor([op, len(seqs), length, kind], dtype=torch.int64), dst, tag=_HEADER)
    if seqs:
        dist.send(torch.tensor(seqs, dtype=torch.int64), dst, tag=_IDS)


def _follower(rank: int, world: int, worker: _Stage, request: ServeRequest) -> None:
    import torch

    hidden = int(request.config.hidden_size)
    while True:
        header = torch.zeros(4, dtype=torch.int64)
        _recv(header, rank - 1, _HEADER, request.timeout_s)
        op, n, length, kind = (int(v) for v in header)
        seqs = torch.zeros(n, dtype=torch.int64)
        if n:
            _recv(seqs, rank - 1, _IDS, request.timeout_s)
        ids = [int(s) for s in seqs]
        if op in (_STOP, _FREE):
            if rank + 1 < world:
                _send_header(rank + 1, op, ids, 0, 0)
            for s in ids:
                worker.free(s)
            if op == _STOP:
                return
            continue
        data = torch.zeros(n, length, hidden)
        _recv(data, rank - 1, _DATA, request.timeout_s)
        _step(rank, world, worker, request, op, ids, [data[i : i + 1] for i in range(n)], kind)


def _scheduler(world: int, worker: _Stage, request: ServeRequest) -> dict[str, Any]:
    """Rank 0: arrivals, prefills first while the batch has room, decode steps, the record."""
    import torch

    arrivals = _arrivals(request)
    outputs: dict[int, list[int]] = {i: [] for i in range(len(arrivals))}
    times: dict[int, list[float]] = {i: [] for i in range(len(arrivals))}
    active: list[int] = []
    waiting = 0  # the next request not yet prefilled
    in_flight: list[int] = []
    t0 = time.monotonic()
    deadline = t0 + request.timeout_s
    while waiting < len(arrivals) or active:
        now = time.monotonic() - t0
        if time.monotonic() > deadline:
            raise TimeoutError(f"serving did not finish in {request.timeout_s:g} s")
        if waiting < len(arrivals) and arrivals[waiting][0] <= now and len(active) < request.batch:
            _, kind, prompt = arrivals[waiting]
            seq = waiting
            waiting += 1
            tok = _step(0, world, worker, request, _PREFILL, [seq], [torch.tensor([prompt])],
                        kind)[0]  # fmt: skip
            outputs[seq].append(tok)
            times[seq].append(time.monotonic() - t0)
            active.append(seq)
        elif active:
            in_flight.append(len(active))
            xs = [torch.tensor([[outputs[s][-1]]]) for s in active]
            toks = _step(0, world, worker, request, _DECODE, active, xs, 0)
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
                _send_header(1, _FREE, done, 0, 0)
    if world > 1:
        _send_header(1, _STOP, [], 0, 0)
    return {"arrivals": [(a, k, p) for a, k, p in arrivals], "outputs": outputs,
            "times": times, "in_flight": in_flight}  # fmt: skip


def _rank_main(rank: int, world: int, port: int, request: ServeRequest, conn: Any) -> None:
    import torch
    import torch.distributed as dist

    try:
        os.setpgid(0, 0)
        torch.set_num_threads(1)
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=request.timeout_s))  # fmt: skip
        worker = _Stage(build_model(request.config, request.seed), request.stages[rank])
        if rank == 0:
            result = _scheduler(world, worker, request)
        else:
            _follower(rank, world, worker, request)
            result = {}
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


def _launch(request: ServeRequest) -> dict[str, Any]:
    ctx = mp.get_context("fork")
    world, port = len(request.stages), _free_port()
    pipes, procs = [], []
    for rank in range(world):
        parent, child = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_rank_main, args=(rank, world, port, request, child), daemon=True)
        p.start()
        child.close()
        pipes.append(parent)
        procs.append(p)
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
    return dict(results[0])


def _median_p95(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    ordered = sorted(values)
    return statistics.median(ordered), ordered[
        min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)
    ]


def run_serving(request: ServeRequest) -> dict[str, Any]:
    """Serve ``request.requests`` requests through the stages; the measured TTFT and TPOT
    (median and p95 over the requests), tokens/s, the decode batches seen and whether every
    generated token equals the unsplit model's greedy decoding."""
    raw = _launch(request)
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
    return {"ttft": ttft_m, "ttft_p95": ttft_p, "tpot": tpot_m, "tpot_p95": tpot_p,
            "tokens_per_s": tokens / span if span > 0 else math.nan, "tokens": tokens,
            "requests": len(arrivals), "tokens_match": match,
            "max_in_flight": max(in_flight, default=0),
            "mean_in_flight": statistics.fmean(in_flight) if in_flight else 0.0}  # fmt: skip
