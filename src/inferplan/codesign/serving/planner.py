"""The serving planner: one path, its layer partition, the decode batch and the hardware.

The model (docs/serving.md states it with its choices):

- The path's nodes run contiguous ranges of the decoder's blocks (a node may run none and
  only relay); each stage's step takes its node's time model
  (:class:`~inferplan.codesign.timing.step.Roofline` of the node's hardware, or the
  hardware's own ``time_model``) and each link
  of the path ``bits / bandwidth + delay`` for the activations crossing it.
- A decode step moves the whole batch of ``b`` sequences through the path once: its time ``D``
  is the sum of the stages' and links' times at the steady state's mean context per sequence
  (:attr:`~inferplan.codesign.serving.workload.Workload.mean_context`). A prefill of a class-``k``
  prompt takes ``T_k`` the same way.
- Prefills take priority over decode steps (neither preempts the other). With Poisson arrivals
  at rate ``lambda``: ``rho_p = lambda sum_k s_k T_k``; the batch is full at most
  ``lambda O-bar D / (1 - rho_p) <= b`` (Little's law), which is the rate condition
  ``rho_p + lambda O-bar D / b <= 1``; a prefill waits ``W = R / (1 - rho_p)`` (the M/G/1
  non-preemptive priority queue, the decode steps counted as a Poisson stream of their own:
  ``R = lambda sum_k s_k T_k^2 / 2 + lambda O-bar D^2 / (2 b)``) and the predicted TTFT of
  class ``k`` is ``W + T_k``; the predicted TPOT, the mean over the output tokens after each
  sequence's first, is ``D / (1 - rho_p)`` plus the prefills of the requests that arrived
  while the sequence waited and ran its own (:func:`mean_tpot`).
- A node's memory holds its blocks' weights and the KV cache of ``b`` sequences at the
  workload's longest context for its layers.

Every quantity a constraint reads (``D``, each ``T_k``) is a sum over the path's stages and
links, and every constraint and the cost are monotone in them, so a label-setting search over
(node, blocks done) that keeps the Pareto-optimal labels of ``($/h, D, T_1..T_K)`` is exact for
the given batch; the planner runs it for each candidate batch, which makes the plan optimal over
those batches (``status: optimal``, the certificate being the exhausted search).
"""

from __future__ import annotations

import graphlib
import itertools
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, overload

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.codesign.serving import replicas
from inferplan.codesign.serving.catalog import Catalog, Hardware
from inferplan.codesign.serving.decoder import Decoder
from inferplan.codesign.serving.replicas import (
    DEFAULT_TIME_LIMIT,
    TIE,
    Column,
    Pool,
    gap,
    pack,
    path_network,
    relaxed_bound,
    simple_paths,
)
from inferplan.codesign.serving.workload import Workload
from inferplan.codesign.timing.step import Roofline, StepWork
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.network import Network

__all__ = [
    "DEFAULT_BATCHES",
    "OBJECTIVES",
    "ReplicaPlan",
    "ServingPlan",
    "ServingStage",
    "mean_tpot",
    "network_hardware",
    "plan_serving",
]

OBJECTIVES = ("cost", "goodput")
"""``cost``: the least $/h serving the workload's rate within its bounds; ``goodput``: the
most requests/s within the bounds on the network's own hardware."""

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""The decode batches the planner tries unless told."""

Objective = Literal["cost", "goodput"]


@dataclass(frozen=True)
class ServingStage:
    """A node of the plan's path: its blocks ``first..last - 1`` (none when equal), the
    decoder layers among them, its hardware, weights and KV-cache bytes."""

    node: str
    first: int
    last: int
    layers: int
    hardware: Hardware | None
    weights_bytes: float
    kv_cache_bytes: float
    decode_s: float
    prefill_s: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        hw = self.hardware
        return {
            "node": self.node, "blocks": [self.first, self.last], "layers": self.layers,
            "hardware": None if hw is None else hw.label,
            "gpu": None if hw is None else hw.gpu, "units": 0 if hw is None else hw.units,
            "price_per_hour": 0.0 if hw is None else hw.price_per_hour,
            "memory": None if hw is None else hw.memory,
            "weights_bytes": self.weights_bytes, "kv_cache_bytes": self.kv_cache_bytes,
            "decode_step_s": self.decode_s, "prefill_s": list(self.prefill_s),
        }  # fmt: skip


@dataclass(frozen=True)
class ServingPlan:
    """A serving plan and what it is predicted to do (see the module's docstring)."""

    objective: str
    status: str
    path: tuple[str, ...]
    stages: tuple[ServingStage, ...]
    batch: int
    requests_per_s: float
    max_requests_per_s: float
    tokens_per_s: float
    ttft_s: tuple[float, ...]
    tpot_s: float
    decode_step_s: float
    price_per_hour: float
    binding: str
    batches: tuple[int, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "objective": self.objective, "status": self.status, "path": list(self.path),
            "batch": self.batch, "requests_per_s": self.requests_per_s,
            "max_requests_per_s": self.max_requests_per_s, "tokens_per_s": self.tokens_per_s,
            "ttft_s": list(self.ttft_s), "ttft_max_s": max(self.ttft_s), "tpot_s": self.tpot_s,
            "decode_step_s": self.decode_step_s, "price_per_hour": self.price_per_hour,
            "binding": self.binding, "batches": list(self.batches),
            "stages": [s.to_dict() for s in self.stages if s.hardware is not None],
        }  # fmt: skip


def network_hardware(network: Network) -> dict[str, Hardware]:
    """Each node's own hardware: its ``capacity`` (FLOP/s), ``memory_bandwidth`` and
    ``memory`` (unlimited where not given), at no price."""
    return {
        v: Hardware(v, float(network.node_capacity[k]), float(network.node_memory_bandwidth[k]),
                    float(network.node_memory[k]))
        for k, v in enumerate(network.node_ids)
    }  # fmt: skip


# -- the queueing model: the rate a label's sums allow -------------------------------------


@dataclass(frozen=True)
class _Moments:
    """What the queueing model reads of a path's sums, per request/s of arrivals: ``busy``
    the prefill seconds (``rho_p = rate busy``), ``residual`` the residual (``R = rate
    residual``), ``gaps`` the output tokens after the first (``O-bar - 1``), ``joining`` the
    share of requests with such tokens and ``own`` their ``sum s_k (T_k - D)``."""

    decode: float
    busy: float
    residual: float
    gaps: float
    joining: float
    own: float


def _moments(workload: Workload, batch: int, decode: float, prefill: Sequence[float]
             ) -> _Moments:  # fmt: skip
    shares = [c.share for c in workload.classes]
    outputs = [c.output_tokens for c in workload.classes]
    busy = math.fsum(s * t for s, t in zip(shares, prefill, strict=True))
    e2 = math.fsum(s * t * t for s, t in zip(shares, prefill, strict=True))
    later = [(s, t) for s, t, o in zip(shares, prefill, outputs, strict=True) if o > 1]
    return _Moments(
        decode, busy, e2 / 2 + workload.mean_output_tokens * decode * decode / (2 * batch),
        math.fsum(s * (o - 1) for s, o in zip(shares, outputs, strict=True)),
        math.fsum(s for s, _ in later), math.fsum(s * (t - decode) for s, t in later),
    )  # fmt: skip


def _tpot(m: _Moments, rate: float, wait: float) -> float:
    """The mean time per output token after each sequence's first at ``rate``, a prefill
    waiting ``wait`` s on the mean (:func:`mean_tpot`)."""
    rho = rate * m.busy
    if m.gaps <= 0:  # no class has a token after its first: the step stretched alone
        return m.decode / (1 - rho)
    return (m.gaps * m.decode + rho * (m.joining * wait + m.own)) / (m.gaps * (1 - rho))


def mean_tpot(workload: Workload, decode: float, prefill: Sequence[float], rate: float,
              wait: float) -> float:  # fmt: skip
    """The mean time per output token after each sequence's first (over the tokens, as a
    run measures it: the sum over requests of last token less first over the sum of their
    tokens after the first) at ``rate`` requests/s, a prefill waiting ``wait`` s on the mean.

    A class-``k`` sequence's tokens after its first take its ``O_k - 1`` decode steps and
    every prefill run between them. Those are the prefills queued when its own ends, those
    of the ``rate (wait + T_k)`` requests on the mean that arrived while it waited and ran
    (``rho_p (wait + T_k)`` seconds), and those arriving before its last step starts, at
    ``rho_p`` seconds a second (prefills go first while the batch has room). So its last
    token comes ``((O_k - 1) D + rho_p (wait + T_k - D)) / (1 - rho_p)`` after its first
    on the mean, and per token over the classes with ``O_k > 1``::

        D / (1 - rho_p) + rho_p sum_k s_k (wait + T_k - D) / ((O-bar - 1) (1 - rho_p))

    the second term being a sequence's own wait's prefills, which ``D / (1 - rho_p)`` leaves
    out; ``D / (1 - rho_p)`` when no class has tokens after its first. It holds while the
    batch has room (a full batch defers prefills).

    >>> from inferplan.codesign.serving import RequestClass, Workload
    >>> work = Workload(1.0, (RequestClass(8, 2, 1.0),))
    >>> round(mean_tpot(work, 0.01, [0.1], 5.0, 0.05), 6)  # rho_p 0.5: 0.02 + 0.5 * 0.14 / 0.5
    0.16
    """
    return _tpot(_moments(workload, 1, decode, prefill), rate, wait)


def rate_limits(workload: Workload, batch: int, decode: float, prefill: Sequence[float]
                ) -> dict[str, float]:  # fmt: skip
    """The most requests/s each condition allows a path whose decode step takes ``decode``
    and whose prefills take ``prefill`` (one per class): ``rate`` (the batch and the
    prefills keep up), ``TPOT`` (:func:`predictions`' TPOT, increasing in the rate, at most
    the bound) and ``TTFT``."""
    m = _moments(workload, batch, decode, prefill)
    out = workload.mean_output_tokens
    limits = {"rate": 1 / (m.busy + out * decode / batch)}
    if workload.tpot_s is not None:
        limits["TPOT"] = _tpot_limit(m, workload.tpot_s)
    if workload.ttft_s is not None:
        room = workload.ttft_s - max(prefill)
        limits["TTFT"] = room / (m.residual + room * m.busy) if room >= 0 else -1.0
    return limits


def _tpot_limit(m: _Moments, bound: float) -> float:
    """The rate at which :func:`_tpot` at the model's wait ``W = rate residual / (1 - rho_p)``
    reaches ``bound``: with ``x`` the rate and ``e = busy``, clearing ``(1 - e x)^2`` from
    ``_tpot = bound`` leaves ``A x^2 + B x + C = 0`` with ``C = g (D - bound)``, ``B = e (2 g
    bound - g D + own)`` and ``A = e (joining residual - e (own + g bound))``, whose root in
    ``(0, 1 / e)`` is the one the TPOT (increasing from ``D`` at no rate to infinity at
    ``rho_p = 1``) crosses the bound at; negative when ``D`` exceeds the bound."""
    d, e, g = m.decode, m.busy, m.gaps
    if d >= bound or g <= 0:
        return (1 - d / bound) / e if e > 0 else (math.inf if d <= bound else -1.0)
    if e <= 0:
        return math.inf
    c = g * (d - bound)
    b = e * (2 * g * bound - g * d + m.own)
    a = e * (m.joining * m.residual - e * (m.own + g * bound))
    return -2 * c / (b + math.sqrt(max(0.0, b * b - 4 * a * c)))


def predictions(workload: Workload, batch: int, decode: float, prefill: Sequence[float],
                rate: float) -> tuple[float, tuple[float, ...]]:  # fmt: skip
    """The predicted TPOT (:func:`mean_tpot` at the model's wait) and each class's TTFT at
    ``rate`` requests/s."""
    m = _moments(workload, batch, decode, prefill)
    wait = rate * m.residual / (1 - rate * m.busy)
    return _tpot(m, rate, wait), tuple(wait + t for t in prefill)


# -- stages and links ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Model:
    decoder: Decoder
    workload: Workload
    batch: int

    @property
    def n_blocks(self) -> int:
        return self.decoder.layers + 1

    def memory(self, first: int, last: int) -> float:
        d = self.decoder
        layers = min(last, d.layers) - min(first, d.layers)
        kv = layers * self.batch * self.workload.max_context * d.kv_bytes_per_token_layer
        return d.weights_bytes(first, last) + kv

    def kv_bytes(self, first: int, last: int) -> float:
        return self.memory(first, last) - self.decoder.weights_bytes(first, last)

    def works(self, first: int, last: int) -> list[StepWork]:
        """The decode step's and each class's prefill work of blocks ``first..last - 1``."""
        d, w, b = self.decoder, self.workload, self.batch
        layers = min(last, d.layers) - min(first, d.layers)
        head = 1 if last > d.layers else 0
        ctx = b * w.mean_context
        decode = StepWork(
            "decode", layers * d.decode_layer_flops(b, ctx) + head * b * d.head_flops,
            layers * (d.layer_bytes + d.kv_bytes_per_token_layer * ctx)
            + head * d.head_read_bytes + 2 * b * d.hidden_bytes, layers, b)  # fmt: skip
        works = [decode]
        for c in w.classes:
            p = c.prompt_tokens
            works.append(StepWork(
                "prefill", layers * d.prefill_layer_flops(p) + head * d.head_flops,
                layers * (d.layer_bytes + d.kv_bytes_per_token_layer * p)
                + head * d.head_read_bytes + 2 * p * d.hidden_bytes, layers, p))  # fmt: skip
        return works

    def link_times(self, cut: int, capacity: float, delay: float) -> FloatArray:
        d = self.decoder
        bits = [d.cut_bits(cut, self.batch, self.batch)]
        bits += [d.cut_bits(cut, c.prompt_tokens, 1) for c in self.workload.classes]
        return np.array([x / capacity + delay for x in bits])


def _pareto(rows: FloatArray) -> np.ndarray:
    """Indices of the rows no other row dominates (``<=`` everywhere), one of each set of
    equal rows: the least remaining row (in lexicographic order) is never dominated by
    another, so it is kept and every row it dominates dropped, until none remain."""
    if len(rows) <= 1:
        return np.arange(len(rows))
    order = np.lexsort(rows.T[::-1])
    left = rows[order]
    kept: list[int] = []
    while len(order):
        kept.append(int(order[0]))
        alive = ~(left[0] <= left).all(axis=1)
        order, left = order[alive], left[alive]
    return np.array(kept, dtype=np.intp)


@dataclass
class _Labels:
    """Labels of the search, one per stage placed: its vector and (parent, node, first,
    last, hardware index; -1 for none)."""

    vectors: list[FloatArray] = field(default_factory=list)
    steps: list[tuple[int, str, int, int, int]] = field(default_factory=list)

    def add(self, vectors: FloatArray, parents: np.ndarray, node: str, first: np.ndarray,
            last: int, hw: np.ndarray) -> np.ndarray:  # fmt: skip
        start = len(self.steps)
        self.vectors.extend(vectors)
        self.steps.extend(zip(parents.tolist(), [node] * len(parents), first.tolist(),
                              [last] * len(parents), hw.tolist(), strict=True))  # fmt: skip
        return np.arange(start, len(self.steps))


def _order(network: Network) -> list[str]:
    on_path = set(network.on_path_nodes())
    graph: dict[str, set[str]] = {v: set() for v in on_path}
    for link in network.links:
        if link.source in on_path and link.target in on_path:
            graph[link.target].add(link.source)
    try:
        return list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError:
        raise InvalidArgument("serving plans need a network without cycles between its "
                              "source and target", field="network") from None  # fmt: skip


def _search(network: Network, model: _Model, options: Mapping[str, Sequence[Hardware]],
            objective: Objective, incumbent: float, memory: bool, whole: bool = False
            ) -> tuple[_Labels, list[int]]:  # fmt: skip
    """The Pareto labels of complete paths for one batch: ``[cost, D, T_1..T_K]``; with
    ``whole``, of the paths whose one node runs every block (a first incumbent)."""
    w, b, n = model.workload, model.batch, model.n_blocks
    shares = np.array([c.share for c in w.classes])
    out = w.mean_output_tokens
    labels = _Labels()
    costed = objective == "cost"
    q = 2 + len(w.classes)
    # a lower bound on the $/h of blocks last..n-1: their memory at the cheapest $/byte
    per_byte = min((hw.price_per_hour / hw.memory for hws in options.values() for hw in hws),
                   default=0.0) if costed and memory else 0.0  # fmt: skip
    rest = np.array([model.memory(last, n) * per_byte for last in range(n + 1)])
    # each stage's Pareto-optimal memory-feasible hardware, by its layers and whether it
    # holds the embedding and the head; then, for each first block, every stage from it
    shapes: dict[tuple[int, int, bool, bool], tuple[FloatArray, np.ndarray]] = {}
    starts: dict[tuple[int, int], tuple[FloatArray, np.ndarray, np.ndarray]] = {}

    def shape(hws: Sequence[Hardware], first: int, last: int) -> tuple[FloatArray, np.ndarray]:
        layers = min(last, model.decoder.layers) - min(first, model.decoder.layers)
        key = (id(hws), layers, first == 0, last == n)
        if key not in shapes:
            need, works = model.memory(first, last), model.works(first, last)
            rows, ids = [], []
            for h, hw in enumerate(hws):
                if memory and need > hw.memory:
                    continue
                time = hw.time_model or Roofline(hw.flops, hw.memory_bandwidth)
                rows.append([hw.price_per_hour if costed else 0.0,
                             *(time.seconds(work) for work in works)])  # fmt: skip
                ids.append(h)
            vecs = np.array(rows).reshape(-1, q)
            keep = _pareto(vecs)
            shapes[key] = (vecs[keep], np.array(ids, dtype=np.intp)[keep])
        return shapes[key]

    def stages_from(hws: Sequence[Hardware], first: int
                    ) -> tuple[FloatArray, np.ndarray, np.ndarray]:  # fmt: skip
        key = (id(hws), first)
        if key not in starts:
            parts = [(*shape(hws, first, last), last) for last in range(first + 1, n + 1)]
            starts[key] = (
                np.concatenate([p[0] for p in parts]).reshape(-1, q),
                np.concatenate([p[1] for p in parts]).astype(np.intp),
                np.concatenate([np.full(len(p[0]), p[2]) for p in parts]).astype(np.intp),
            )
        return starts[key]

    def viable(vecs: FloatArray, last: int | np.ndarray) -> np.ndarray:
        d, tp = vecs[:, 1], vecs[:, 2:]
        ok = np.ones(len(vecs), dtype=bool)
        if w.tpot_s is not None:
            ok &= d <= w.tpot_s
        if w.ttft_s is not None:
            ok &= tp.max(axis=1) <= w.ttft_s
        if costed:
            ok &= w.requests_per_s * (tp @ shares + out * d / b) <= 1
            ok &= vecs[:, 0] + rest[last] <= incumbent
        return ok

    root = labels.add(np.zeros((1, q)), np.array([-1]), "", np.array([0]), 0, np.array([-1]))
    arriving: dict[tuple[str, int], list[tuple[FloatArray, np.ndarray]]] = {
        (network.source, 0): [(np.zeros((1, q)), root)]}  # fmt: skip
    out_links: dict[str, list[tuple[str, float, float]]] = {}
    for link in network.links:
        out_links.setdefault(link.source, []).append((link.target, link.capacity, link.delay_s))
    finals: list[int] = []
    link_cache: dict[tuple[int, float, float], FloatArray] = {}
    for v in _order(network):
        hws = options.get(v, ())
        # every label leaving v: [vector | parent, first block, last block, hardware]
        out_vecs: list[FloatArray] = []
        out_meta: list[np.ndarray] = []
        for a in range(n + 1):
            got = arriving.pop((v, a), [])
            if not got:
                continue
            vecs = np.concatenate([g[0] for g in got])
            parents = np.concatenate([g[1] for g in got])
            keep = _pareto(vecs)
            vecs, parents = vecs[keep], parents[keep]
            m = len(vecs)
            out_vecs.append(vecs)  # a relay: no blocks
            out_meta.append(np.column_stack([parents, np.full(m, a), np.full(m, a),
                                             np.full(m, -1)]))  # fmt: skip
            if a == n or (whole and a > 0):
                continue
            table, hw_ids, lasts = stages_from(hws, a)
            if whole:
                table, hw_ids, lasts = table[lasts == n], hw_ids[lasts == n], lasts[lasts == n]
            if not len(table):
                continue
            cand = (vecs[:, None, :] + table[None, :, :]).reshape(-1, q)
            cand_last = np.tile(lasts, m)
            ok = viable(cand, cand_last)
            out_vecs.append(cand[ok])
            out_meta.append(np.column_stack([np.repeat(parents, len(table))[ok],
                                             np.full(int(ok.sum()), a), cand_last[ok],
                                             np.tile(hw_ids, m)[ok]]))  # fmt: skip
        if not out_vecs:
            continue
        all_vecs, meta = np.concatenate(out_vecs), np.concatenate(out_meta)
        order = np.argsort(meta[:, 2], kind="stable")
        all_vecs, meta = all_vecs[order], meta[order]
        bounds = np.flatnonzero(np.diff(meta[:, 2])) + 1
        for vecs, rows in zip(np.split(all_vecs, bounds), np.split(meta, bounds), strict=True):
            if not len(vecs):
                continue
            last = int(rows[0, 2])
            keep = _pareto(vecs)
            vecs, rows = vecs[keep], rows[keep]
            ids = labels.add(vecs, rows[:, 0], v, rows[:, 1], last, rows[:, 3])
            if v == network.target and last == n:
                finals.extend(ids.tolist())
            for z, capacity, delay in out_links.get(v, ()):
                key = (last, capacity, delay)
                if key not in link_cache:
                    link_cache[key] = np.concatenate(
                        ([0.0], model.link_times(last, capacity, delay))
                    )
                total = vecs + link_cache[key]
                ok = viable(total, last)
                if ok.any():
                    arriving.setdefault((z, last), []).append((total[ok], ids[ok]))
    return labels, finals


def _stages(labels: _Labels, label: int, model: _Model,
            options: Mapping[str, Sequence[Hardware]]) -> tuple[ServingStage, ...]:  # fmt: skip
    """The path's nodes from the last label back to the root, with what each runs."""
    stages: list[ServingStage] = []
    d = model.decoder
    while label >= 0:
        parent, node, first, last, h = labels.steps[label]
        if node:
            hw = options[node][h] if h >= 0 else None
            secs = [0.0] * (1 + len(model.workload.classes))
            if hw is not None:
                time = hw.time_model or Roofline(hw.flops, hw.memory_bandwidth)
                secs = [time.seconds(work) for work in model.works(first, last)]
            layers = min(last, d.layers) - min(first, d.layers)
            stages.append(ServingStage(
                node, first, last, layers, hw, d.weights_bytes(first, last),
                model.kv_bytes(first, last), secs[0], tuple(secs[1:])))  # fmt: skip
        label = parent
    return tuple(reversed(stages))


_Best = tuple[float, int, _Labels, int, dict[str, float]]


def _best(network: Network, decoder: Decoder, workload: Workload,
          options: Mapping[str, Sequence[Hardware]], objective: Objective,
          batches: Sequence[int], *, memory: bool) -> _Best | None:  # fmt: skip
    """The best label over the batches: (score, batch, labels, label, rate limits)."""
    best: _Best | None = None
    # the plans on one node first: their least $/h bounds every search that follows
    passes = [True, False] if objective == "cost" else [False]
    for whole, b in itertools.product(passes, sorted(set(batches))):
        model = _Model(decoder, workload, b)
        incumbent = best[0] if best is not None and objective == "cost" else math.inf
        labels, finals = _search(network, model, options, objective, incumbent, memory, whole)
        for label in finals:
            vec = labels.vectors[label]
            limits = rate_limits(workload, b, float(vec[1]), [float(t) for t in vec[2:]])
            cap = min(limits.values())
            if objective == "cost":
                if cap < workload.requests_per_s:
                    continue
                score = float(vec[0])
            else:
                if cap <= 0:
                    continue
                score = -cap
            if best is None or score < best[0]:
                best = (score, b, labels, label, limits)
    return best


_TINY_RATE = 1e-300


def _infeasible(network: Network, decoder: Decoder, workload: Workload,
                options: Mapping[str, Sequence[Hardware]], objective: Objective,
                batches: Sequence[int]) -> Infeasible:  # fmt: skip
    """The error of a workload no plan serves, naming each condition whose lifting alone lets
    a plan serve it (``KV memory``, ``TPOT``, ``TTFT``, ``rate``), or all of them together."""
    lifted = {
        "KV memory": (workload, False),
        "TPOT": (replace(workload, tpot_s=None), True),
        "TTFT": (replace(workload, ttft_s=None), True),
    }
    if objective == "cost":
        lifted["rate"] = (replace(workload, requests_per_s=_TINY_RATE), True)
    binding = [name for name, (w, memory) in lifted.items()
               if (name != "TPOT" or workload.tpot_s is not None)
               and (name != "TTFT" or workload.ttft_s is not None)
               and _best(network, decoder, w, options, objective, batches, memory=memory)
               is not None]  # fmt: skip
    said = ", ".join(binding) if binding else "no single condition, several bind together"
    wanted = (f"{workload.requests_per_s:g} requests/s" if objective == "cost"
              else "any request rate")  # fmt: skip
    return Infeasible(
        f"no plan serves {wanted} within the bounds at batches "
        f"{', '.join(map(str, sorted(set(batches))))}; binding (lifting it alone lets a plan "
        f"serve): {said}", details={"binding": binding or ["several together"]})  # fmt: skip


@overload
def plan_serving(
    network: Network,
    decoder: Decoder,
    workload: Workload,
    *,
    catalog: Catalog | None = ...,
    hardware: Mapping[str, Hardware] | None = ...,
    objective: Objective = ...,
    batches: Sequence[int] = ...,
    pipelines: Literal[1] = ...,
    time_limit: float | None = ...,
) -> ServingPlan: ...
@overload
def plan_serving(
    network: Network,
    decoder: Decoder,
    workload: Workload,
    *,
    catalog: Catalog | None = ...,
    hardware: Mapping[str, Hardware] | None = ...,
    objective: Objective = ...,
    batches: Sequence[int] = ...,
    pipelines: Literal["any"],
    time_limit: float | None = ...,
) -> ReplicaPlan: ...
def plan_serving(
    network: Network,
    decoder: Decoder,
    workload: Workload,
    *,
    catalog: Catalog | None = None,
    hardware: Mapping[str, Hardware] | None = None,
    objective: Objective = "cost",
    batches: Sequence[int] = DEFAULT_BATCHES,
    pipelines: Literal[1, "any"] = 1,
    time_limit: float | None = None,
) -> ServingPlan | ReplicaPlan:
    """The serving plan of ``decoder`` for ``workload`` on ``network``.

    Parameters
    ----------
    network
        The path's topology and links (bandwidth, delay).
    decoder, workload
        The model and its requests.
    catalog
        With ``objective="cost"``: the GPUs any node of the network may be given.
    hardware
        With ``objective="goodput"``: each node's hardware (nodes not named run nothing);
        the network's own (:func:`network_hardware`) when not given.
    objective
        ``"cost"``: the least $/h serving ``workload.requests_per_s`` within the bounds;
        ``"goodput"``: the most requests/s within the bounds on ``hardware``.
    batches
        The decode batches to try.
    pipelines
        ``1``: one path (the plan above); ``"any"``: node-disjoint replicas, each a path
        with its own partition, batch and hardware, the rate split among them
        (a :class:`ReplicaPlan`; docs/serving.md, "Many pipelines").
    time_limit
        With ``pipelines="any"``: the seconds its search may take
        (:data:`~inferplan.codesign.serving.replicas.DEFAULT_TIME_LIMIT` when not given).

    Raises
    ------
    InvalidArgument
        For a class longer than the model's context, a missing catalog or hardware, bad batches.
    Infeasible
        When no plan meets the workload; the message and ``details["binding"]`` name what
        binds (``KV memory``, ``TPOT``, ``TTFT``, ``rate``).
    """
    workload.check_context(decoder.max_context)
    if objective not in OBJECTIVES:
        raise InvalidArgument(f"must be one of {', '.join(OBJECTIVES)}, got {objective!r}",
                              field="objective")  # fmt: skip
    if not batches or any(isinstance(b, bool) or not isinstance(b, int) or b < 1
                          for b in batches):  # fmt: skip
        raise InvalidArgument("must be positive integers", field="batches")
    if pipelines not in (1, "any") or isinstance(pipelines, bool):
        raise InvalidArgument(f"must be 1 or 'any', got {pipelines!r}", field="pipelines")
    if time_limit is not None and pipelines != "any":
        raise InvalidArgument("only with pipelines='any'", field="time_limit")
    if objective == "cost":
        if catalog is None:
            raise InvalidArgument("the cost objective needs a GPU catalog", field="catalog")
        choice = catalog.options()
        options: Mapping[str, Sequence[Hardware]] = {v: choice for v in network.node_ids}
    else:
        if hardware is None:
            hardware = network_hardware(network)
        options = {v: [hw] for v, hw in hardware.items()}
    if pipelines == "any":
        return _plan_replicas(
            network,
            decoder,
            workload,
            options,
            objective,
            batches,
            DEFAULT_TIME_LIMIT if time_limit is None else time_limit,
        )
    best = _best(network, decoder, workload, options, objective, batches, memory=True)
    if best is None:
        raise _infeasible(network, decoder, workload, options, objective, batches)
    _, b, labels, label, limits = best
    model = _Model(decoder, workload, b)
    vec = labels.vectors[label]
    cap = min(limits.values())
    rate = workload.requests_per_s if objective == "cost" else cap
    decode, prefill = float(vec[1]), [float(t) for t in vec[2:]]
    tpot, ttft = predictions(workload, b, decode, prefill, rate)
    stages = _stages(labels, label, model, options)
    return ServingPlan(
        objective=objective, status="optimal", path=tuple(st.node for st in stages), stages=stages,
        batch=b, requests_per_s=rate, max_requests_per_s=cap,
        tokens_per_s=rate * workload.mean_output_tokens, ttft_s=ttft, tpot_s=tpot,
        decode_step_s=decode,
        price_per_hour=math.fsum(s.hardware.price_per_hour for s in stages if s.hardware),
        binding=min(limits, key=lambda k: limits[k]), batches=tuple(sorted(set(batches))),
    )  # fmt: skip


# -- many pipelines (replicas): the columns and the search over them (replicas.py) ----------


@dataclass(frozen=True)
class ReplicaPlan:
    """Replicas of a service (docs/serving.md, "Many pipelines"): each a :class:`ServingPlan`
    at its share of the rate (``requests_per_s``; ``max_requests_per_s`` its most), with the
    totals and the certificate: ``status`` ``optimal`` or ``time_limit``; ``bound`` the least
    $/h (cost) or the most requests/s (goodput) any plan can have, as proven (``None`` when
    none was), ``gap`` relative to it; ``paths_searched`` of the network's ``paths`` simple
    source-target paths searched one by one."""

    objective: str
    status: str
    replicas: tuple[ServingPlan, ...]
    requests_per_s: float
    tokens_per_s: float
    price_per_hour: float
    bound: float | None
    gap: float | None
    paths_searched: int
    paths: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "objective": self.objective, "status": self.status, "pipelines": len(self.replicas),
            "requests_per_s": self.requests_per_s, "tokens_per_s": self.tokens_per_s,
            "price_per_hour": self.price_per_hour, "bound": self.bound, "gap": self.gap,
            "paths_searched": self.paths_searched, "paths": self.paths,
            "replicas": [r.to_dict() for r in self.replicas],
        }  # fmt: skip


@dataclass(frozen=True)
class _Replica(Column):
    """A column of a many-pipeline plan: one path's plan at one batch."""

    batch: int
    stages: tuple[ServingStage, ...]
    decode: float
    prefill: tuple[float, ...]
    limits: Mapping[str, float]


def _replica_columns(network: Network, decoder: Decoder, workload: Workload,
                     options: Mapping[str, Sequence[Hardware]], objective: Objective,
                     batch: int, incumbent: float, whole: bool = False,
                     floor: float = _TINY_RATE) -> Iterator[_Replica]:  # fmt: skip
    """The columns of one search (one batch) on ``network``: each complete label serving
    some rate within the bounds, with the nodes it holds (all but the source and the target,
    and those of them where it runs blocks); with ``floor``, only those whose rate condition
    holds at ``floor`` requests/s (the others serve less)."""
    model = _Model(decoder, replace(workload, requests_per_s=floor), batch)
    labels, finals = _search(network, model, options, objective, incumbent, True, whole)
    ends = {network.source, network.target}
    for label in finals:
        vec = labels.vectors[label]
        decode, prefill = float(vec[1]), tuple(float(t) for t in vec[2:])
        limits = rate_limits(workload, batch, decode, prefill)
        cap = min(limits.values())
        if cap <= 0:
            continue
        stages = _stages(labels, label, model, options)
        holds = frozenset(s.node for s in stages if s.node not in ends or s.hardware)
        cost = math.fsum(s.hardware.price_per_hour for s in stages if s.hardware)
        yield _Replica(cost, cap, holds, batch, stages, decode, prefill, limits)


def _moved(col: _Replica, path: Sequence[str], placed: Sequence[int], network: Network,
           decoder: Decoder, workload: Workload, options: Mapping[str, Sequence[Hardware]],
           hops: Mapping[tuple[str, str], Sequence[Any]]) -> _Replica | None:  # fmt: skip
    """The same stages (blocks and hardware, in order) on another path, at its positions
    ``placed``, the other nodes relaying, timed on that path's links; None where a node
    cannot have the hardware or the plan serves no rate there."""
    runs = [st for st in col.stages if st.hardware is not None]
    model = _Model(decoder, workload, col.batch)
    times = np.zeros(1 + len(workload.classes))
    relay = (0.0,) * len(workload.classes)
    stages: list[ServingStage] = []
    done, at = 0, dict(zip(placed, runs, strict=True))
    for k, v in enumerate(path):
        stage = at.get(k)
        if stage is None:
            stages.append(ServingStage(v, done, done, 0, None, 0.0, 0.0, 0.0, relay))
        else:
            if stage.hardware not in options.get(v, ()):
                return None
            times += [stage.decode_s, *stage.prefill_s]
            stages.append(replace(stage, node=v))
            done = stage.last
        if k + 1 < len(path):
            link = hops[v, path[k + 1]][0]
            times += model.link_times(done, link.capacity, link.delay_s)
    decode, prefill = float(times[0]), tuple(float(t) for t in times[1:])
    limits = rate_limits(workload, col.batch, decode, prefill)
    cap = min(limits.values())
    if cap <= 0:
        return None
    ends = {network.source, network.target}
    holds = frozenset(s.node for s in stages if s.node not in ends or s.hardware)
    return _Replica(col.cost, cap, holds, col.batch, tuple(stages), decode, prefill, limits)


def _replica_plan(col: _Replica, rate: float, workload: Workload, objective: str,
                  batches: tuple[int, ...]) -> ServingPlan:  # fmt: skip
    tpot, ttft = predictions(workload, col.batch, col.decode, col.prefill, rate)
    return ServingPlan(
        objective=objective, status="optimal", path=tuple(s.node for s in col.stages),
        stages=col.stages, batch=col.batch, requests_per_s=rate, max_requests_per_s=col.cap,
        tokens_per_s=rate * workload.mean_output_tokens, ttft_s=ttft, tpot_s=tpot,
        decode_step_s=col.decode, price_per_hour=col.cost,
        binding=min(col.limits, key=lambda k: col.limits[k]), batches=batches,
    )  # fmt: skip


def _plan_replicas(network: Network, decoder: Decoder, workload: Workload,
                   options: Mapping[str, Sequence[Hardware]], objective: Objective,
                   batches: Sequence[int], time_limit: float) -> ReplicaPlan:  # fmt: skip
    """``plan_serving(pipelines="any")``: the columns of every simple path (for ``cost``,
    first those of the whole network, whose relaxed packing bounds the plan), then the
    packing MILP (:mod:`~inferplan.codesign.serving.replicas`)."""
    if not (time_limit > 0 and math.isfinite(time_limit)):
        raise InvalidArgument(f"must be positive seconds, got {time_limit!r}",
                              field="time_limit")  # fmt: skip
    start = time.monotonic()

    def left() -> float:
        return time_limit - (time.monotonic() - start)

    batches = tuple(sorted(set(batches)))
    rate = workload.requests_per_s
    costed = objective == "cost"
    paths = simple_paths(network)
    pool: Pool[_Replica] = Pool()
    # the chosen columns, their $/h (cost) or requests/s (goodput), whether HiGHS proved
    # them the best of the pool, and the bound it proved
    best: tuple[list[_Replica], float, bool, float] | None = None
    lower = 0.0  # cost: a proven lower bound on every plan's $/h
    done = timed_out = False

    def repack() -> None:
        nonlocal best
        packed = pack(pool.columns(), objective, rate, max(left(), 1.0))
        if packed is not None:
            chosen, proven, optimal = packed
            value = math.fsum(c.cost if costed else c.cap for c in chosen)
            best = (chosen, value, optimal, proven)

    def met() -> bool:
        return best is not None and costed and best[1] <= lower * (1 + TIE) + 1e-12

    def incumbent() -> float:
        return best[1] * (1 + TIE) if best is not None and costed else math.inf

    order = paths
    if costed:
        # plans on one node first (cheap), then the whole network's search: its columns are
        # plans too, and, its paths sharing nodes, they bound every plan from below
        for b in batches:
            for col in _replica_columns(network, decoder, workload, options, objective, b,
                                        math.inf, whole=True):  # fmt: skip
                pool.add(col)
        repack()

        def frontier(floor: float) -> list[_Replica] | None:
            """The whole network's columns serving at least ``floor`` (None: out of time)."""
            found: list[_Replica] = []
            for b in batches:
                if left() <= 0:
                    return None
                for col in _replica_columns(network, decoder, workload, options, objective, b,
                                            incumbent(), floor=floor):  # fmt: skip
                    found.append(col)
                    pool.add(col)
            return found

        hops: dict[tuple[str, str], list[Any]] = {}
        for link in network.links:
            hops.setdefault((link.source, link.target), []).append(link)
        moved: set[int] = set()

        def spread() -> None:
            """The stages of each column found so far that no other betters (least $/h, most
            requests/s, whichever nodes), on every path at every choice of its nodes to run
            them: plans too (a search keeps one of plans alike on paths alike)."""
            cols = pool.columns()
            ahead = [c for c in cols if id(c) not in moved
                     and not any(o.cost <= c.cost and o.cap > c.cap for o in cols)]  # fmt: skip
            moved.update(id(c) for c in cols)
            for col in ahead:
                runs = sum(1 for st in col.stages if st.hardware is not None)
                for path in paths:
                    for placed in itertools.combinations(range(len(path)), runs):
                        other = _moved(col, path, placed, network, decoder, workload, options,
                                       hops)  # fmt: skip
                        if other is not None and pool.add(other):
                            moved.add(id(other))

        spread()
        repack()
        # first the columns serving at least a share of the rate (a search that prunes as
        # the one-path one does), and one column standing for every other: none serves that
        # share, none costs less than the whole model's memory at the cheapest $/byte
        floor = rate / replicas.BOUND_SHARE
        some = frontier(floor)
        if some is not None:
            per_byte = min((hw.price_per_hour / hw.memory for hws in options.values()
                            for hw in hws), default=0.0)  # fmt: skip
            least = per_byte * _Model(decoder, workload, batches[0]).memory(0, decoder.layers + 1)
            others = Column(least, floor, frozenset())
            relaxed = relaxed_bound([*some, *pool.columns(), others], rate, max(left(), 1.0))
            lower = min(relaxed, math.inf if best is None else best[1])
        spread()
        repack()
        done = met()
        if not done:  # then every column
            every = frontier(_TINY_RATE)
            if every is None:
                timed_out = True
            else:
                relaxed = relaxed_bound(every + pool.columns(), rate, max(left(), 1.0))
                if relaxed == math.inf:  # no replica serves any rate within the bounds
                    raise _infeasible(network, decoder, workload, options, objective, batches)
                lower = max(lower, min(relaxed, math.inf if best is None else best[1]))
            spread()
            repack()
            done = met()
        seen = {tuple(s.node for s in c.stages) for c in pool.columns()}
        order = [p for p in paths if p in seen] + [p for p in paths if p not in seen]
    searched = 0
    for path in order:
        if done or timed_out:
            break
        sub = path_network(network, path)
        # a search keeps a label only if no other is better, whichever nodes either holds: a
        # search per set of ends that may run blocks keeps those that hold fewer
        ends = [v for v in (network.source, network.target) if options.get(v)]
        grew = False
        for b, k in itertools.product(batches, range(len(ends) + 1)):
            if left() <= 0:
                timed_out = True
                break
            for allowed in itertools.combinations(ends, k):
                sub_options = {v: options.get(v, ()) for v in path
                               if v not in ends or v in allowed}  # fmt: skip
                for col in _replica_columns(sub, decoder, workload, sub_options, objective, b,
                                            incumbent()):  # fmt: skip
                    grew |= pool.add(col)
        else:
            searched += 1
        if grew and costed:
            repack()
            done = met()
    if not costed and not timed_out:
        repack()
    exhausted = done or (searched == len(paths) and not timed_out)
    if best is None:
        if exhausted:
            raise _no_replicas(network, decoder, workload, options, objective, batches, pool)
        return ReplicaPlan(objective, "time_limit", (), 0.0, 0.0, 0.0,
                           lower if costed else None, None, searched, len(paths))  # fmt: skip
    chosen, value, optimal, proven = best
    status = "optimal" if exhausted and (done or optimal) else "time_limit"
    bound: float | None
    if status == "optimal":
        bound = value
    elif costed:
        bound = max(lower, proven) if exhausted else lower
    else:
        bound = proven if exhausted else None
    total = math.fsum(c.cap for c in chosen)
    shares = [min(c.cap, rate * c.cap / total) if costed else c.cap for c in chosen]
    served = math.fsum(shares)
    return ReplicaPlan(
        objective, status,
        tuple(_replica_plan(c, r, workload, objective, batches)
              for c, r in zip(chosen, shares, strict=True)),
        served, served * workload.mean_output_tokens, math.fsum(c.cost for c in chosen), bound,
        0.0 if status == "optimal" else gap(objective, value, bound), searched, len(paths),
    )  # fmt: skip


def _no_replicas(network: Network, decoder: Decoder, workload: Workload,
                 options: Mapping[str, Sequence[Hardware]], objective: Objective,
                 batches: Sequence[int], pool: Pool[_Replica]) -> Infeasible:  # fmt: skip
    """Why no replicas serve the workload: what binds every single one (as for one path), or
    the rate, with the most requests/s disjoint replicas serve within the bounds."""
    if objective == "goodput" or not pool.columns():
        return _infeasible(network, decoder, workload, options, objective, batches)
    most = pack(pool.columns(), "goodput", 0.0, 10.0)
    served = 0.0 if most is None else math.fsum(c.cap for c in most[0])
    return Infeasible(
        f"no set of disjoint pipelines serves {workload.requests_per_s:g} requests/s within "
        f"the bounds at batches {', '.join(map(str, sorted(set(batches))))}: they serve at "
        f"most {served:.6g} requests/s; binding: rate", details={"binding": ["rate"]})  # fmt: skip
