"""GPUs from a price list: the hardware a node of an LLM service may be given.

A :class:`GpuType` is one unit's FLOP/s, memory bandwidth (bytes/s), memory (bytes) and price
per hour; ``tp_efficiency`` maps each count ``k`` of units that may work as one node (tensor
parallelism) to the fraction of ``k`` units' FLOP/s and bandwidth they reach together
(``{1: 1.0}`` by default: one unit per node). ``k`` units hold ``k`` times the memory and cost
``k`` times the price. ``step_times`` maps a unit count to the seconds its node takes per
step, measured (a :class:`~inferplan.codesign.timing.step.MeasuredTable`: per layer held, by
decode batch and by prefill tokens); a count without one is timed by the roofline of its
FLOP/s and bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from inferplan.errors import InvalidArgument

if TYPE_CHECKING:
    from inferplan.codesign.timing.step import StepTimeModel

__all__ = ["Catalog", "GpuType", "Hardware"]


@dataclass(frozen=True)
class Hardware:
    """What one node runs on: FLOP/s, memory bandwidth (bytes/s), memory (bytes), $/h, and a
    label (``2xA100``, or the node's id when the hardware is the network's). ``time_model``,
    when given, times its steps instead of the roofline of its FLOP/s and bandwidth (e.g. a
    :class:`~inferplan.codesign.timing.step.MeasuredTable`)."""

    label: str
    flops: float
    memory_bandwidth: float
    memory: float
    price_per_hour: float = 0.0
    gpu: str | None = None
    units: int = 0
    time_model: StepTimeModel | None = field(default=None, compare=False)


def _positive(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"must be a number, got {value!r}", field=where)
    if not (math.isfinite(value) and value > 0):
        raise InvalidArgument(f"must be a positive finite number, got {value!r}", field=where)
    return float(value)


@dataclass(frozen=True)
class GpuType:
    """One GPU type of a catalog (see the module's docstring)."""

    name: str
    flops: float
    memory_bandwidth: float
    memory: float
    price_per_hour: float
    tp_efficiency: Mapping[int, float] = field(default_factory=lambda: {1: 1.0})
    step_times: Mapping[int, StepTimeModel] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("flops", "memory_bandwidth", "memory", "price_per_hour"):
            _positive(getattr(self, name), name)
        if not self.tp_efficiency:
            raise InvalidArgument("must list at least one unit count", field="tp_efficiency")
        for k, eff in self.tp_efficiency.items():
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise InvalidArgument(f"unit counts must be positive integers, got {k!r}",
                                      field="tp_efficiency")  # fmt: skip
            if not (isinstance(eff, int | float) and 0 < eff <= 1):
                raise InvalidArgument(f"must be in (0, 1], got {eff!r}",
                                      field=f"tp_efficiency.{k}")  # fmt: skip
        for k in self.step_times:
            if k not in self.tp_efficiency:
                raise InvalidArgument(f"times {k} units, but tp_efficiency lists "
                                      f"{sorted(self.tp_efficiency)}: add {k} there",
                                      field=f"step_times.{k}")  # fmt: skip

    def hardware(self, units: int) -> Hardware:
        """``units`` of this type as one node."""
        eff = self.tp_efficiency[units]
        return Hardware(f"{units}x{self.name}", units * eff * self.flops,
                        units * eff * self.memory_bandwidth, units * self.memory,
                        units * self.price_per_hour, self.name, units,
                        self.step_times.get(units))  # fmt: skip


@dataclass(frozen=True)
class Catalog:
    """The GPU types on sale, by name.

    Examples
    --------
    >>> c = Catalog((GpuType("L4", 121e12, 300e9, 24e9, 0.8, {1: 1.0, 2: 0.9}),))
    >>> [h.label for h in c.options()], c.options()[1].price_per_hour
    (['1xL4', '2xL4'], 1.6)
    """

    types: tuple[GpuType, ...]

    def __post_init__(self) -> None:
        if not self.types:
            raise InvalidArgument("must list at least one GPU type", field="gpus")
        names = [t.name for t in self.types]
        for name in names:
            if names.count(name) > 1:
                raise InvalidArgument(f"GPU type {name!r} is listed twice", field="gpus")

    def options(self) -> list[Hardware]:
        """Every node the catalog can make: each type at each of its unit counts."""
        return [t.hardware(k) for t in self.types for k in sorted(t.tp_efficiency)]
