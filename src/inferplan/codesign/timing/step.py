"""Step time models: how long a node takes to run one step of a serving stage (by batch).

A :class:`StepWork` is what one step of a stage asks of its node: FLOPs, bytes moved through
its memory (the weights it reads, the KV cache it reads or writes, its activations in and out),
its layers and the tokens or sequences it handles. A time model maps it to seconds:

- :class:`Roofline` (the default): ``max(FLOPs / capacity, bytes / memory_bandwidth)``;
- :class:`MeasuredTable`: seconds per layer measured by batch (decode: sequences; prefill:
  tokens), as Helix's ``decode_bs2time`` / ``prompt_bs2time`` profiles; linear between the
  measured batches, the stage's time that per layer times its layers.

Both satisfy :class:`StepTimeModel`, the small interface the serving planner
(:mod:`inferplan.codesign.serving.planner`) calls; a catalog's GPU type holds one
(:class:`~inferplan.codesign.serving.catalog.GpuType`), a node type's measured table. The
co-design planners' models, by cuts rather than by batch, are :mod:`.stage`'s.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from inferplan.errors import InvalidArgument

__all__ = ["MeasuredTable", "Roofline", "StepTimeModel", "StepWork"]


@dataclass(frozen=True)
class StepWork:
    """One step of a stage: ``phase``, FLOPs, bytes moved, layers held and its batch (the
    sequences of a decode step, the tokens of a prefill)."""

    phase: Literal["prefill", "decode"]
    flops: float
    bytes_moved: float
    layers: int
    batch: float


class StepTimeModel(Protocol):
    """Seconds a node takes for one step of its stage."""

    def seconds(self, work: StepWork) -> float: ...


@dataclass(frozen=True)
class Roofline:
    """``max(FLOPs / flops, bytes / memory_bandwidth)``: FLOP/s and bytes/s of the node.

    Examples
    --------
    >>> Roofline(1e12, 1e9).seconds(StepWork("decode", 1e9, 4e6, 1, 1))  # memory-bound
    0.004
    """

    flops: float
    memory_bandwidth: float

    def seconds(self, work: StepWork) -> float:
        return max(work.flops / self.flops, work.bytes_moved / self.memory_bandwidth)


def _interpolate(table: tuple[tuple[float, float], ...], x: float) -> float:
    xs = [row[0] for row in table]
    k = bisect.bisect_left(xs, x)
    if k < len(xs) and xs[k] == x:
        return table[k][1]
    if k == 0 or k == len(xs):
        raise InvalidArgument(f"batch {x:g} is outside the measured batches "
                              f"{xs[0]:g}..{xs[-1]:g}", field="batch")  # fmt: skip
    (x0, y0), (x1, y1) = table[k - 1], table[k]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


@dataclass(frozen=True)
class MeasuredTable:
    """Seconds per layer by batch, measured for each phase on one node type.

    Examples
    --------
    >>> t = MeasuredTable.of(decode={1: 0.001, 8: 0.002}, prefill={128: 0.01})
    >>> t.seconds(StepWork("decode", 0.0, 0.0, layers=10, batch=4.5))
    0.015
    """

    decode: tuple[tuple[float, float], ...]
    prefill: tuple[tuple[float, float], ...]

    @classmethod
    def of(cls, *, decode: Mapping[float, float], prefill: Mapping[float, float]) -> MeasuredTable:
        """A table from ``{batch: seconds per layer}`` of each phase."""
        rows = []
        for name, table in (("decode", decode), ("prefill", prefill)):
            if not table:
                raise InvalidArgument("must give at least one batch", field=name)
            for batch, secs in table.items():
                if not (batch > 0 and secs > 0):
                    raise InvalidArgument(f"batches and seconds must be positive, got "
                                          f"{batch!r}: {secs!r}", field=name)  # fmt: skip
            rows.append(tuple(sorted((float(b), float(s)) for b, s in table.items())))
        return cls(rows[0], rows[1])

    def seconds(self, work: StepWork) -> float:
        table = self.decode if work.phase == "decode" else self.prefill
        return work.layers * _interpolate(table, work.batch)
