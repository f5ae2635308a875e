"""Capacity cost functions: what it costs to add an amount of compute or bandwidth.

A cost function maps an added capacity ``x >= 0`` (FLOP/s or bit/s) to a price. It must be
non-decreasing with ``f(0) = 0``. The solvers use three things from it: the vectorised cost, the
capacity actually bought for a requested amount (whole modules, for instance), and whether it is
linear (which unlocks the linear-time PSG scan).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["CapacityCost", "LinearCost", "cost_from_dict"]

FloatArray = npt.NDArray[np.float64]


@runtime_checkable
class CapacityCost(Protocol):
    """The interface every capacity cost function provides."""

    @property
    def linear_price(self) -> float | None:
        """The unit price if the cost is ``price * x`` up to :attr:`max_amount`, else ``None``."""

    @property
    def max_amount(self) -> float:
        """The most capacity that can be added (``inf`` when unbounded)."""

    def __call__(self, amount: FloatArray) -> FloatArray:
        """Cost of adding each ``amount`` (``inf`` beyond :attr:`max_amount`)."""

    def purchase(self, amount: float) -> float:
        """The capacity actually bought to obtain at least ``amount`` (e.g. whole modules)."""

    def to_dict(self) -> dict[str, Any]:
        """The cost in the network-file format."""


@dataclass(frozen=True)
class LinearCost:
    """``price`` per unit of added capacity, optionally capped at ``max_amount``.

    Examples
    --------
    >>> import numpy as np
    >>> LinearCost(2.0)(np.array([0.0, 1.5]))
    array([0., 3.])
    """

    price: float
    max_amount: float = math.inf

    @property
    def linear_price(self) -> float:
        return self.price

    def __call__(self, amount: FloatArray) -> FloatArray:
        amount = np.asarray(amount, dtype=np.float64)
        cost = self.price * amount
        if math.isfinite(self.max_amount):
            cost = np.where(amount > self.max_amount, np.inf, cost)
        return cost

    def purchase(self, amount: float) -> float:
        return amount

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "linear", "price": self.price}
        if math.isfinite(self.max_amount):
            out["max"] = self.max_amount
        return out


def cost_from_dict(data: dict[str, Any]) -> CapacityCost:
    """Build a cost function from its network-file form, e.g. ``{"kind": "linear", "price": 2}``.

    Raises
    ------
    ValueError
        With a message naming the problem; the file loader adds the file and field.
    """
    kind = data.get("kind")
    if kind == "linear":
        unknown = set(data) - {"kind", "price", "max"}
        if unknown:
            raise ValueError(f"unknown field(s) {sorted(unknown)} for a linear cost")
        price = _number(data, "price", minimum=0.0)
        cap = _number(data, "max", minimum=0.0, default=math.inf)
        return LinearCost(price, cap)
    raise ValueError(f"unknown cost kind {kind!r} (known: linear)")


def _number(data: dict[str, Any], key: str, *, minimum: float, default: float | None = None) -> float:
    if key not in data:
        if default is None:
            raise ValueError(f"missing field {key!r}")
        return default
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"{key!r} must be a number, got {value!r}")
    if value < minimum or (value == math.inf and default != math.inf):
        raise ValueError(f"{key!r} must be a finite number >= {minimum:g}, got {value!r}")
    return float(value)
