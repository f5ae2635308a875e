"""Capacity cost functions: what it costs to add an amount of compute or bandwidth.

A cost function maps an added capacity ``x >= 0`` (FLOP/s or bit/s) to a price. It must be
non-decreasing with ``f(0) = 0``. The solvers use from it: the vectorised cost, the capacity
actually bought for a requested amount (whole modules, for instance), its piecewise-linear form
when it has one (which unlocks the fast PSG scans) and the most that can be added.

Four kinds ship: :class:`LinearCost` (``price * x``), :class:`ModuleCost` (``price`` per started
module of ``size``), :class:`TieredCost` (piecewise-linear with a marginal price per tier) and
:class:`FunctionCost` (any non-decreasing Python callable, API only). Each may carry a cap on
what can be added; beyond it the cost is ``inf``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from inferplan.arrays import FloatArray

__all__ = [
    "CapacityCost",
    "FunctionCost",
    "LinearCost",
    "ModuleCost",
    "Segments",
    "TieredCost",
    "segments",
    "unit_price",
]


# A request within this relative distance above a whole number of modules counts as that
# number: ``3 * 0.1 / 0.1`` is ``3.0000000000000004`` in floating point and must not buy four.
MODULE_RTOL = 1e-12


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
class Segments:
    """A continuous piecewise-linear cost: on ``[starts[k], starts[k+1]]`` (the last segment up
    to ``cap``) it is ``values[k] + slopes[k] * (x - starts[k])``. Every start lies below the
    cap, except the first (0) when nothing can be added."""

    starts: tuple[float, ...]
    slopes: tuple[float, ...]
    values: tuple[float, ...]
    cap: float


def segments(cost: CapacityCost) -> Segments | None:
    """The piecewise-linear form of ``cost`` if it has one (linear and tiered costs)."""
    if cost.linear_price is not None:
        return Segments((0.0,), (cost.linear_price,), (0.0,), cost.max_amount)
    if isinstance(cost, TieredCost):
        # tiers that start at or beyond the cap sell nothing: the last one kept ends at the cap
        k = max(1, int(np.searchsorted(cost._knots[: len(cost.prices)], cost.max_amount)))
        return Segments(
            tuple(cost._knots[:k]), cost.prices[:k], tuple(cost._values[:k]), cost.max_amount
        )
    return None


def unit_price(cost: CapacityCost) -> float:
    """The highest price per unit of capacity that ``cost`` charges, as far as its kind tells
    (a module's ``price / size``, a tier's highest price; 0 for a callable): what the solvers
    multiply by the capacity a target needs to tell a cost beyond floating point."""
    if cost.linear_price is not None:
        return cost.linear_price
    if isinstance(cost, ModuleCost):
        return cost.unit_price
    if isinstance(cost, TieredCost):
        return max(cost.prices)
    return 0.0


def _capped(amount: FloatArray, cost: FloatArray, cap: float) -> FloatArray:
    if math.isfinite(cap):
        return np.where(amount > cap, np.inf, cost)
    return cost


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
        with np.errstate(over="ignore"):  # an infinite price is refused by the caller
            return _capped(amount, self.price * amount, self.max_amount)

    def purchase(self, amount: float) -> float:
        return amount

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "linear", "price": self.price}
        if math.isfinite(self.max_amount):
            out["max"] = self.max_amount
        return out


@dataclass(frozen=True)
class ModuleCost:
    """Capacity sold in whole modules: ``price`` for every started ``size`` of added capacity.

    ``max_amount`` caps the capacity that can be added, counted in whole modules bought
    (at most ``floor(max_amount / size)`` modules).

    Examples
    --------
    >>> import numpy as np
    >>> cost = ModuleCost(size=10.0, price=3.0)
    >>> cost(np.array([0.0, 0.5, 10.0, 10.5])), cost.purchase(10.5)
    (array([0., 3., 3., 6.]), 20.0)
    """

    size: float
    price: float
    max_amount: float = math.inf

    @property
    def linear_price(self) -> None:
        return None

    @property
    def max_modules(self) -> float:
        """The most modules that can be bought (``inf`` when unbounded, or beyond counting)."""
        if math.isinf(self.max_amount):
            return math.inf
        return float(math.floor(self.max_amount / self.size * (1 + MODULE_RTOL)))

    @property
    def unit_price(self) -> float:
        """The price of a unit of capacity within a module, ``price / size`` (``inf`` beyond
        floating point)."""
        return self.price / self.size if self.price else 0.0

    def modules(self, amount: FloatArray) -> FloatArray:
        """Whole modules needed to add at least each ``amount`` (``inf`` where there are more
        than floating point counts: modules far smaller than the amount)."""
        amount = np.asarray(amount, dtype=np.float64)
        with np.errstate(over="ignore"):
            return np.ceil(np.maximum(amount, 0.0) / self.size * (1 - MODULE_RTOL))

    def __call__(self, amount: FloatArray) -> FloatArray:
        amount = np.asarray(amount, dtype=np.float64)
        count = self.modules(amount)
        with np.errstate(over="ignore", invalid="ignore"):  # costs beyond floating point: inf
            cost = self.price * count
            # Uncountably many modules are each below the amount's precision, so the amount
            # itself is what is bought (priced per unit); free modules cost nothing at all.
            uncounted = np.isinf(count)
            cost = np.where(uncounted, 0.0 if not self.price else self.unit_price * amount, cost)
        beyond = np.where(uncounted, amount > self.max_amount, count > self.max_modules)
        return np.where(beyond, np.inf, cost)

    def purchase(self, amount: float) -> float:
        count = float(self.modules(np.array([amount]))[0])
        return amount if math.isinf(count) else count * self.size

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "modules", "size": self.size, "price": self.price}
        if math.isfinite(self.max_amount):
            out["max"] = self.max_amount
        return out


@dataclass(frozen=True)
class TieredCost:
    """Piecewise-linear cost: marginal price ``prices[k]`` per unit for the added capacity
    between ``upto[k-1]`` and ``upto[k]`` (``upto[-1]`` is 0).

    With as many ``upto`` as ``prices`` nothing can be added beyond the last ``upto``; with one
    ``upto`` fewer the last price applies without bound. ``max_amount`` caps it further.
    Convex (and so on the fast PSG path) when the prices do not decrease.

    Examples
    --------
    >>> import numpy as np
    >>> cost = TieredCost(upto=(10.0,), prices=(1.0, 3.0))
    >>> cost(np.array([5.0, 10.0, 12.0]))
    array([ 5., 10., 16.])
    """

    upto: tuple[float, ...]
    prices: tuple[float, ...]
    max_amount: float = math.inf
    _knots: FloatArray = field(init=False, repr=False, compare=False)
    _values: FloatArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        upto = tuple(float(x) for x in self.upto)
        prices = tuple(float(p) for p in self.prices)
        if len(prices) not in (len(upto), len(upto) + 1) or not prices:
            raise ValueError(
                f"'price' must have as many entries as 'upto' or one more, got {len(prices)} "
                f"prices for {len(upto)} 'upto' values"
            )
        if any(b <= a for a, b in itertools.pairwise((0.0, *upto))):
            raise ValueError(f"'upto' must be positive and strictly increasing, got {list(upto)}")
        if any(not (math.isfinite(p) and p >= 0) for p in prices):
            raise ValueError(f"'price' entries must be non-negative finite numbers, got {prices}")
        cap = min(self.max_amount, upto[-1]) if len(prices) == len(upto) else self.max_amount
        knots = np.array((0.0, *upto))
        widths = np.diff(knots)
        with np.errstate(over="ignore"):  # a cost beyond floating point is inf
            values = np.concatenate(([0.0], np.cumsum(widths * np.array(prices[: len(upto)]))))
        object.__setattr__(self, "upto", upto)
        object.__setattr__(self, "prices", prices)
        object.__setattr__(self, "max_amount", float(cap))
        object.__setattr__(self, "_knots", knots)
        object.__setattr__(self, "_values", values)

    @classmethod
    def from_parts(
        cls,
        upto: tuple[float, ...],
        prices: tuple[float, ...],
        max_amount: float,
        knots: FloatArray,
        values: FloatArray,
    ) -> TieredCost:
        """The tiered cost whose parts were checked and computed already, as the constructor
        checks and computes them (``max_amount`` at most the last ``upto`` when bounded;
        ``knots`` 0 and the ``upto``, ``values`` the cost at each): what cost columns make,
        without checking each cost again."""
        cost = object.__new__(cls)
        parts = {"upto": upto, "prices": prices, "max_amount": max_amount, "_knots": knots,
                 "_values": values}  # fmt: skip
        for name, value in parts.items():
            object.__setattr__(cost, name, value)
        return cost

    @property
    def linear_price(self) -> float | None:
        return self.prices[0] if len(set(self.prices)) == 1 else None

    @property
    def convex(self) -> bool:
        """Whether the marginal prices never decrease."""
        return all(b >= a for a, b in zip(self.prices[:-1], self.prices[1:], strict=True))

    def __call__(self, amount: FloatArray) -> FloatArray:
        amount = np.asarray(amount, dtype=np.float64)
        inside = np.interp(amount, self._knots, self._values)
        with np.errstate(over="ignore", invalid="ignore"):  # a cost beyond floating point is inf
            beyond = self._values[-1] + self.prices[-1] * (amount - self._knots[-1])
        cost = np.where(amount > self._knots[-1], beyond, inside)
        return _capped(amount, cost, self.max_amount)

    def purchase(self, amount: float) -> float:
        return amount

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "tiers", "upto": list(self.upto), "price": list(self.prices)}
        if math.isfinite(self.max_amount) and (
            len(self.prices) > len(self.upto) or self.max_amount < self.upto[-1]
        ):
            out["max"] = self.max_amount
        return out


@dataclass(frozen=True)
class FunctionCost:
    """Any non-decreasing Python callable with ``fn(0) = 0`` (API only: it has no file form).

    ``fn`` receives an array of amounts and returns their costs; a scalar function is
    vectorised with :func:`numpy.vectorize`. PSG prices it on its general ``O(N^2)`` path.

    Examples
    --------
    >>> import numpy as np
    >>> cost = FunctionCost(lambda x: np.sqrt(x), name="sqrt")
    >>> cost(np.array([0.0, 4.0]))
    array([0., 2.])
    """

    fn: Callable[[Any], Any]
    max_amount: float = math.inf
    name: str = "function"

    def __post_init__(self) -> None:
        zero = self(np.zeros(1))[0]
        if zero != 0.0:
            raise ValueError(f"cost function {self.name!r} must be zero at zero, got {zero!r}")

    @property
    def linear_price(self) -> None:
        return None

    def __call__(self, amount: FloatArray) -> FloatArray:
        amount = np.asarray(amount, dtype=np.float64)
        try:
            cost = np.asarray(self.fn(amount), dtype=np.float64)
            if cost.shape != amount.shape:
                raise ValueError
        except (TypeError, ValueError):
            cost = np.asarray(np.vectorize(self.fn, otypes=[np.float64])(amount))
        return _capped(amount, cost, self.max_amount)

    def purchase(self, amount: float) -> float:
        return amount

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "function", "name": self.name}
        if math.isfinite(self.max_amount):
            out["max"] = self.max_amount
        return out
