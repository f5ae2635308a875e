"""The :class:`Profile` value: a DNN cut into an ordered sequence of blocks."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from inferplan.errors import InvalidProfile
from inferplan.profiles.graph import MAX_PARAMS, LayerGraph, too_many_params

__all__ = ["Profile"]


@dataclass(frozen=True)
class Profile:
    """A DNN as ``N`` ordered blocks.

    Attributes
    ----------
    name
        A label for the model.
    flops
        ``Q_1..Q_N``: floating-point operations of each block (FLOPs, 2 per multiply-accumulate).
    activation_bits
        ``D_0..D_N``: bits of the activation after the first ``n`` blocks; ``D_0`` is the raw
        input and ``D_N`` the output.
    blocks
        Names of the blocks (``block1..blockN`` when not given).
    params
        Parameter count of each block (zeros when not given).
    seconds
        Measured seconds of each block on one machine (``profile --measure``), or empty.
    bytes_per_param
        Bytes of one parameter in memory: 4 for FP32 (the default), 2 for FP16/BF16.
    state_bytes
        Bytes each block keeps from one inference to the next besides its parameters (a
        decoder's KV cache), zeros when not given. With the parameters they are what a node
        running the block holds (see :func:`~inferplan.profiles.memory.memory_need`).
    graph
        The model's layer graph, when known (:class:`~inferplan.profiles.graph.LayerGraph`):
        the planners may then cut it at any ideal, not only between blocks. Its total FLOPs,
        input and output bits must be the blocks'; :meth:`from_graph` makes the blocks from
        it.

    Examples
    --------
    >>> p = Profile("tiny", flops=(2e6, 1e6), activation_bits=(800.0, 400.0, 32.0))
    >>> p.n_blocks, p.blocks
    (2, ('block1', 'block2'))
    """

    name: str
    flops: tuple[float, ...]
    activation_bits: tuple[float, ...]
    blocks: tuple[str, ...] = field(default=())
    params: tuple[int, ...] = field(default=())
    seconds: tuple[float, ...] = field(default=())
    bytes_per_param: float = 4.0
    state_bytes: tuple[float, ...] = field(default=())
    graph: LayerGraph | None = None

    def __post_init__(self) -> None:
        flops = tuple(float(q) for q in self.flops)
        bits = tuple(float(d) for d in self.activation_bits)
        if len(flops) == 0:
            raise InvalidProfile("must have at least one block", field="flops")
        if len(bits) != len(flops) + 1:
            raise InvalidProfile(
                f"must have len(flops) + 1 = {len(flops) + 1} entries (D_0..D_N), got {len(bits)}",
                field="activation_bits",
            )
        for name, values in (("flops", flops), ("activation_bits", bits)):
            for k, value in enumerate(values):
                if not (math.isfinite(value) and value > 0):
                    raise InvalidProfile(
                        f"must be a positive finite number, got {value!r}", field=f"{name}[{k}]"
                    )
        if not math.isfinite(sum(flops)):
            raise InvalidProfile("the total work overflows floating point", field="flops")
        blocks = tuple(self.blocks) or tuple(f"block{k + 1}" for k in range(len(flops)))
        if len(blocks) != len(flops):
            raise InvalidProfile(
                f"must name each of the {len(flops)} blocks, got {len(blocks)} names",
                field="blocks",
            )
        params = tuple(int(p) for p in self.params) or (0,) * len(flops)
        if len(params) != len(flops):
            raise InvalidProfile(
                f"must give one count per block ({len(flops)}), got {len(params)}", field="params"
            )
        if any(p < 0 for p in params):
            raise InvalidProfile("parameter counts must be non-negative", field="params")
        seconds = tuple(float(t) for t in self.seconds)
        if seconds and len(seconds) != len(flops):
            raise InvalidProfile(
                f"must give one time per block ({len(flops)}), got {len(seconds)}", field="seconds"
            )
        for k, t in enumerate(seconds):
            if not (math.isfinite(t) and t > 0):
                raise InvalidProfile(
                    f"must be a positive finite number, got {t!r}", field=f"seconds[{k}]"
                )
        object.__setattr__(self, "seconds", seconds)
        bpp = self.bytes_per_param
        if (
            isinstance(bpp, bool)
            or not isinstance(bpp, int | float)
            or not (math.isfinite(bpp) and bpp > 0)
        ):
            raise InvalidProfile(f"must be a positive finite number, got {bpp!r}",
                                 field="bytes_per_param")  # fmt: skip
        state = tuple(float(b) for b in self.state_bytes) or (0.0,) * len(flops)
        if len(state) != len(flops):
            raise InvalidProfile(
                f"must give one size per block ({len(flops)}), got {len(state)}",
                field="state_bytes",
            )
        for k, b in enumerate(state):
            if not (math.isfinite(b) and b >= 0):
                raise InvalidProfile(
                    f"must be a non-negative finite number, got {b!r}", field=f"state_bytes[{k}]"
                )
        object.__setattr__(self, "bytes_per_param", float(bpp))
        object.__setattr__(self, "state_bytes", state)
        if sum(params) > MAX_PARAMS:
            raise InvalidProfile(too_many_params(), field="params")
        if not math.isfinite(sum(params) * float(bpp) + sum(state)):  # all the bytes held
            raise InvalidProfile(
                f"the model's memory ({sum(params)} parameters at {float(bpp):g} bytes each, "
                "and its state) is beyond floating point: check the units",
                field="bytes_per_param",
            )
        object.__setattr__(self, "flops", flops)
        object.__setattr__(self, "activation_bits", bits)
        object.__setattr__(self, "blocks", blocks)
        object.__setattr__(self, "params", params)
        if self.graph is not None:
            self._check_graph(self.graph)

    def _check_graph(self, graph: LayerGraph) -> None:
        """The graph and the blocks must describe one model."""
        out = math.fsum(graph.output_bits[v] for v in graph.sinks)
        for what, mine, theirs in (
            ("total FLOPs", self.total_flops, math.fsum(graph.flops)),
            ("input bits (activation_bits[0])", self.activation_bits[0], graph.input_bits),
            ("output bits (activation_bits[-1])", self.activation_bits[-1], out),
        ):
            if not math.isclose(mine, theirs, rel_tol=1e-9):
                raise InvalidProfile(
                    f"the layer graph's {what} are {theirs:.6g}, the blocks' {mine:.6g}",
                    field="graph",
                )

    @classmethod
    def from_graph(
        cls,
        name: str,
        graph: LayerGraph,
        *,
        bytes_per_param: float = 4.0,
        state_bytes: tuple[float, ...] = (),
    ) -> Profile:
        """The profile whose blocks are ``graph``'s layers in its topological order (a layer
        without FLOPs joins the next one that has some, trailing ones the last), with the
        graph beside them; ``bytes_per_param`` and ``state_bytes`` (one per block) as for
        the class.

        Examples
        --------
        >>> g = LayerGraph(("a", "relu", "b"), flops=(4.0, 0.0, 2.0),
        ...                output_bits=(8.0, 8.0, 2.0),
        ...                edges=(("input", "a"), ("a", "relu"), ("relu", "b")), input_bits=16.0)
        >>> p = Profile.from_graph("net", g)
        >>> p.blocks, p.activation_bits
        (('a', 'b'), (16.0, 8.0, 2.0))
        """
        order = graph.order
        ends = [k for k, v in enumerate(order) if graph.flops[v] > 0]
        if not ends:
            raise InvalidProfile("no layer has FLOPs", field="graph.layers")
        ends[-1] = len(order) - 1
        done = [False] * graph.n_layers
        flops, bits, names, params = [], [graph.input_bits], [], []
        start = 0
        for end in ends:
            group = order[start : end + 1]
            for v in group:
                done[v] = True
            flops.append(math.fsum(graph.flops[v] for v in group))
            params.append(sum(graph.params[v] for v in group))
            bits.append(graph.boundary_bits(done))
            names.append(graph.layers[max(group, key=lambda v: graph.flops[v])])
            start = end + 1
        return cls(name, tuple(flops), tuple(bits), tuple(names), tuple(params), graph=graph,
                   bytes_per_param=bytes_per_param, state_bytes=state_bytes)  # fmt: skip

    @property
    def n_blocks(self) -> int:
        """``N``, the number of blocks."""
        return len(self.flops)

    @property
    def total_flops(self) -> float:
        """``S_N``, the FLOPs of one inference."""
        return math.fsum(self.flops)

    @property
    def resident_bytes(self) -> tuple[float, ...]:
        """Bytes each block holds on the node that runs it: its parameters
        (``params * bytes_per_param``) and its :attr:`state_bytes`."""
        return tuple(p * self.bytes_per_param + b
                     for p, b in zip(self.params, self.state_bytes, strict=True))  # fmt: skip

    def prefix_flops(self) -> npt.NDArray[np.float64]:
        """``S_0..S_N`` with ``S_0 = 0`` and ``S_j = Q_1 + ... + Q_j``."""
        return np.concatenate(([0.0], np.cumsum(np.asarray(self.flops, dtype=np.float64))))

    def to_dict(self) -> dict[str, Any]:
        """The profile in the profile-file format (with ``seconds`` and the effective
        ``flops_per_s`` of each block when measured)."""
        out: dict[str, Any] = {
            "name": self.name,
            "blocks": list(self.blocks),
            "flops": list(self.flops),
            "activation_bits": list(self.activation_bits),
            "params": list(self.params),
            "bytes_per_param": self.bytes_per_param,
        }
        if any(self.state_bytes):
            out["state_bytes"] = list(self.state_bytes)
        if self.seconds:
            out["seconds"] = list(self.seconds)
            out["flops_per_s"] = [q / t for q, t in zip(self.flops, self.seconds, strict=True)]
        if self.graph is not None:
            out["input_bits"] = self.graph.input_bits
            out["graph"] = self.graph.to_dict()
        return out
