"""The :class:`LayerGraph` value: a DNN as a directed acyclic graph of layers.

A layer computes one tensor (``output_bits``) from the tensors of its predecessors; the
model's input is the tensor ``input``. Every layer without a successor is an output, which
must reach the target, and so is every layer with an edge to ``output``. A chain of blocks is
the special case of a path graph.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from inferplan.errors import InvalidProfile

__all__ = ["INPUT", "MAX_PARAMS", "OUTPUT", "LayerGraph", "too_many_params"]

MAX_PARAMS = 2**63 - 1
"""The most parameters a model may have in all (the planners count them in 64-bit integers;
no machine holds that many bytes)."""


def too_many_params() -> str:
    """The message refusing more parameters than :data:`MAX_PARAMS`."""
    return f"parameter counts add up to more than 2**63 - 1 ({MAX_PARAMS:.4g}): check the shapes"

INPUT = "input"
"""The name of the model's input tensor in a layer graph's edges."""
OUTPUT = "output"
"""The model's output in a layer graph's edges: ``[layer, "output"]`` makes a layer that other
layers read an output too (a layer no layer reads is one anyway)."""


@dataclass(frozen=True)
class LayerGraph:
    """A DNN as layers joined by the tensors they read.

    Attributes
    ----------
    layers
        The layers' ids, in file order (``input`` is reserved for the model's input).
    flops
        FLOPs of each layer (``>= 0``: a ReLU or an addition may count none).
    output_bits
        Bits of each layer's output tensor (``> 0``), sent once over a link however many
        layers beyond a cut read it.
    edges
        ``(tensor, layer)`` pairs: ``layer`` reads the output of ``tensor`` (a layer id or
        ``input``); ``layer`` may be ``output``, the model's output.
    input_bits
        Bits of the model's input.
    params
        Parameter count of each layer (zeros when not given).

    Examples
    --------
    >>> g = LayerGraph(("a", "b", "c"), flops=(1.0, 2.0, 3.0), output_bits=(8.0, 8.0, 4.0),
    ...                edges=(("input", "a"), ("a", "b"), ("a", "c"), ("b", "c")),
    ...                input_bits=16.0)
    >>> g.order, g.sinks
    ((0, 1, 2), (2,))
    """

    layers: tuple[str, ...]
    flops: tuple[float, ...]
    output_bits: tuple[float, ...]
    edges: tuple[tuple[str, str], ...]
    input_bits: float
    params: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        layers = tuple(str(v) for v in self.layers)
        n = len(layers)
        if n == 0:
            raise InvalidProfile("must have at least one layer", field="graph.layers")
        index: dict[str, int] = {}
        for k, v in enumerate(layers):
            if v in (INPUT, OUTPUT):
                what = "input" if v == INPUT else "output (in edges)"
                raise InvalidProfile(
                    f"{v!r} names the model's {what}, not a layer", field=f"graph.layers[{k}].id"
                )
            if v in index:
                raise InvalidProfile(f"duplicate layer id {v!r}", field=f"graph.layers[{k}].id")
            index[v] = k
        flops = _numbers(self.flops, n, "flops", positive=False)
        bits = _numbers(self.output_bits, n, "output_bits", positive=True)
        params = tuple(int(p) for p in self.params) or (0,) * n
        if len(params) != n or any(p < 0 for p in params):
            raise InvalidProfile(f"must give {n} non-negative counts", field="graph.params")
        if sum(params) > MAX_PARAMS:
            raise InvalidProfile(too_many_params(), field="graph.params")
        input_bits = float(self.input_bits)
        if not (math.isfinite(input_bits) and input_bits > 0):
            raise InvalidProfile(
                f"must be a positive finite number, got {input_bits!r}", field="input_bits"
            )
        seen: set[tuple[str, str]] = set()
        edges = []
        for k, pair in enumerate(self.edges):
            u, v = (str(x) for x in pair)
            where = f"graph.edges[{k}]"
            if u != INPUT and u not in index:
                raise InvalidProfile(f"unknown tensor {u!r} (a layer id or {INPUT!r})", field=where)
            if v not in index and v != OUTPUT:
                raise InvalidProfile(f"unknown layer {v!r}", field=where)
            if v == OUTPUT and u == INPUT:
                raise InvalidProfile("the model's input is not an output", field=where)
            if u == v:
                raise InvalidProfile(f"layer {v!r} reads its own output", field=where)
            if (u, v) in seen:
                raise InvalidProfile(f"edge {u!r} -> {v!r} given twice", field=where)
            seen.add((u, v))
            edges.append((u, v))
        if not any(u == INPUT for u, _ in edges):
            raise InvalidProfile(f"no layer reads {INPUT!r}", field="graph.edges")
        read = {v for _, v in edges}
        for k, v in enumerate(layers):
            if v not in read:
                raise InvalidProfile(
                    f"layer {v!r} reads no tensor (add an edge from {INPUT!r} or a layer)",
                    field=f"graph.layers[{k}]",
                )
        object.__setattr__(self, "layers", layers)
        object.__setattr__(self, "flops", flops)
        object.__setattr__(self, "output_bits", bits)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "edges", tuple(edges))
        object.__setattr__(self, "input_bits", input_bits)
        if self._topological() is None:
            raise InvalidProfile("the layer graph has a cycle", field="graph.edges")

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @cached_property
    def index(self) -> dict[str, int]:
        """Each layer's position in :attr:`layers`."""
        return {v: k for k, v in enumerate(self.layers)}

    @cached_property
    def predecessors(self) -> tuple[tuple[int, ...], ...]:
        """The layers each layer reads (the input left out), by position."""
        out: list[list[int]] = [[] for _ in self.layers]
        for u, v in self.edges:
            if u != INPUT and v != OUTPUT:
                out[self.index[v]].append(self.index[u])
        return tuple(tuple(sorted(p)) for p in out)

    @cached_property
    def successors(self) -> tuple[tuple[int, ...], ...]:
        """The layers that read each layer's output, by position."""
        out: list[list[int]] = [[] for _ in self.layers]
        for v, preds in enumerate(self.predecessors):
            for u in preds:
                out[u].append(v)
        return tuple(tuple(s) for s in out)

    @cached_property
    def input_readers(self) -> tuple[int, ...]:
        """The layers that read the model's input."""
        return tuple(sorted(self.index[v] for u, v in self.edges if u == INPUT))

    @cached_property
    def sinks(self) -> tuple[int, ...]:
        """The outputs: the layers no layer reads and those with an edge to ``output``."""
        marked = {self.index[u] for u, v in self.edges if v == OUTPUT}
        return tuple(v for v, s in enumerate(self.successors) if not s or v in marked)

    @cached_property
    def order(self) -> tuple[int, ...]:
        """A topological order of the layers, the lowest file position first among those
        ready."""
        order = self._topological()
        assert order is not None  # checked on construction
        return order

    def _topological(self) -> tuple[int, ...] | None:
        indegree = [len(p) for p in self.predecessors]
        ready = [v for v, d in enumerate(indegree) if d == 0]
        heapq.heapify(ready)
        done: list[int] = []
        while ready:
            v = heapq.heappop(ready)
            done.append(v)
            for z in self.successors[v]:
                indegree[z] -= 1
                if indegree[z] == 0:
                    heapq.heappush(ready, z)
        return tuple(done) if len(done) == self.n_layers else None

    @property
    def is_path(self) -> bool:
        """Whether the layers form one chain from the input to the one output."""
        order = self.order
        return self.input_readers == (order[0],) and all(
            self.predecessors[v] == (u,) and self.successors[u] == (v,)
            for u, v in itertools.pairwise(order)
        )

    def boundary_bits(self, done: Sequence[bool]) -> float:
        """Bits that leave a set of layers ``done`` (by position, down-closed): every tensor
        produced there, the input included, that a layer outside it still reads, and every
        output in it."""
        sent = [self.input_bits] if any(not done[v] for v in self.input_readers) else []
        outputs = set(self.sinks)
        for u in range(self.n_layers):
            readers = self.successors[u]
            if done[u] and (u in outputs or any(not done[z] for z in readers)):
                sent.append(self.output_bits[u])
        return math.fsum(sent)

    def merged(self, groups: Sequence[Sequence[str]]) -> LayerGraph:
        """This graph with each group of layers made one layer (named after its first
        member; FLOPs, parameters summed; output the bits the group's members send beyond
        it), so no cut separates them.

        Raises
        ------
        InvalidProfile
            If a layer is in two groups, unknown, or merging makes a cycle.
        """
        owner = list(range(self.n_layers))
        for g, members in enumerate(groups):
            for name in members:
                if name not in self.index:
                    raise InvalidProfile(f"unknown layer {name!r}", field=f"merge[{g}]")
                k = self.index[name]
                if owner[k] != k:
                    raise InvalidProfile(f"layer {name!r} is in two groups", field=f"merge[{g}]")
            head = self.index[members[0]]
            for name in members[1:]:
                owner[self.index[name]] = head
        keep = [k for k in range(self.n_layers) if owner[k] == k]
        members_of = {k: [m for m in range(self.n_layers) if owner[m] == k] for k in keep}
        edges: dict[tuple[str, str], None] = {}
        for u, v in self.edges:
            a = INPUT if u == INPUT else self.layers[owner[self.index[u]]]
            b = OUTPUT if v == OUTPUT else self.layers[owner[self.index[v]]]
            if a != b:
                edges[(a, b)] = None

        outputs = set(self.sinks)

        def sent(k: int) -> float:
            inside = set(members_of[k])
            return math.fsum(
                self.output_bits[m]
                for m in inside
                if m in outputs or any(z not in inside for z in self.successors[m])
            )

        try:
            return LayerGraph(
                layers=tuple(self.layers[k] for k in keep),
                flops=tuple(math.fsum(self.flops[m] for m in members_of[k]) for k in keep),
                output_bits=tuple(sent(k) for k in keep),
                edges=tuple(edges),
                input_bits=self.input_bits,
                params=tuple(sum(self.params[m] for m in members_of[k]) for k in keep),
            )
        except InvalidProfile as exc:
            raise InvalidProfile(f"merging these layers {exc.message}", field="merge") from None

    def to_dict(self) -> dict[str, Any]:
        """The graph in the profile-file format."""
        return {
            "layers": [
                {"id": v, "flops": q, "params": p, "output_bits": d}
                for v, q, p, d in zip(
                    self.layers, self.flops, self.params, self.output_bits, strict=True
                )
            ],
            "edges": [list(e) for e in self.edges],
        }


def _numbers(values: Sequence[float], n: int, name: str, *, positive: bool) -> tuple[float, ...]:
    out = tuple(float(x) for x in values)
    if len(out) != n:
        raise InvalidProfile(f"must give {n} numbers, got {len(out)}", field=f"graph.{name}")
    for k, x in enumerate(out):
        if not (math.isfinite(x) and (x > 0 if positive else x >= 0)):
            what = "positive" if positive else "non-negative"
            raise InvalidProfile(
                f"must be a {what} finite number, got {x!r}", field=f"graph.layers[{k}].{name}"
            )
    return out
