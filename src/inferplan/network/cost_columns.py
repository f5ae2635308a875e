"""Cost functions of many elements kept as columns, and checked column-wise.

A network file may give half a million elements a cost function. :class:`CostColumns` keeps
those of one kind of element (nodes or links) as arrays, one entry per element that has one: its
kind, size, price and cap, and the tiers of a tiered cost in compressed rows. The
:class:`~inferplan.network.costs.CapacityCost` object of an element is made when it is looked
up; the solvers' pricing arrays (unit prices and caps, piecewise-linear pieces) are built from
the columns with numpy. Cost functions given as objects (through the API) stay objects.

:class:`RawCosts` holds the cost objects of a file as they were read (from listed JSON/YAML
elements or from table columns), and :func:`check` finds, column-wise, the elements whose
cost the file format refuses: exactly those the element-by-element validation refuses.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from inferplan.arrays import FloatArray, IntArray
from inferplan.network.costs import (
    CapacityCost,
    LinearCost,
    ModuleCost,
    Segments,
    TieredCost,
    segments,
)

__all__ = ["CODES", "KINDS", "CostColumns", "Pieces", "RawCosts", "check", "numbers"]

KINDS = ("linear", "modules", "tiers")
"""The kinds of cost a file holds, coded ``1, 2, 3`` in :attr:`CostColumns.kind`."""
LINEAR, MODULES, TIERS = 1, 2, 3
CODES = {name: code for code, name in enumerate(KINDS, start=1)}
"""The code of each kind's name."""

_NONE: IntArray = np.zeros(0, dtype=np.int64)


def numbers(values: Sequence[object]) -> FloatArray:
    """``values`` as floats, NaN (which no check accepts) for anything a strict number field
    refuses: a value that is not an ``int`` or ``float`` (a ``bool``, text, a list, nothing),
    or an integer beyond the floating-point range."""
    if not set(map(type, values)) <= {float, int}:
        values = [v if type(v) is float or type(v) is int else math.nan for v in values]
    with contextlib.suppress(OverflowError):
        return np.array(values, dtype=np.float64)
    out = np.full(len(values), np.nan)
    for k, value in enumerate(values):
        if type(value) in (int, float):
            with contextlib.suppress(OverflowError):
                out[k] = float(value)  # type: ignore[arg-type]
    return out


def _starts(lengths: IntArray) -> IntArray:
    start = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=start[1:])
    return start


@dataclass(frozen=True)
class Pieces:
    """Piecewise-linear costs of a sequence of elements in compressed rows: element ``r``'s
    pieces are ``ptr[r]..ptr[r+1]-1`` (``starts``, ``slopes``, ``values`` as in
    :class:`~inferplan.network.costs.Segments`) up to ``cap[r]``; an element whose cost has no
    such form has no pieces and ``table[r]`` (it is priced into tables; ``cap[r]`` is then its
    most that can be added)."""

    ptr: IntArray
    starts: FloatArray
    slopes: FloatArray
    values: FloatArray
    cap: FloatArray
    table: npt.NDArray[np.bool_]


class CostColumns(Mapping[int, CapacityCost]):
    """The cost functions of some of a network's nodes (or links), by position.

    Columns, one entry per element of ``rows`` (increasing positions): ``kind`` (``1``
    linear, ``2`` modules, ``3`` tiers), ``size``, ``price`` and ``cap`` (the file's ``max``,
    ``inf`` when absent), and a tiered cost's ``upto`` and tier prices in compressed rows
    (``upto_ptr``/``upto``, ``tier_ptr``/``tier_price``). ``objects`` holds cost functions
    given as objects, by position. A mapping from position to
    :class:`~inferplan.network.costs.CapacityCost`, each made when first looked up.

    Examples
    --------
    >>> costs = CostColumns.of({3: LinearCost(2.0)})
    >>> dict(costs), 3 in costs, len(costs)
    ({3: LinearCost(price=2.0, max_amount=inf)}, True, 1)
    """

    rows: IntArray
    kind: npt.NDArray[np.int8]
    size: FloatArray
    price: FloatArray
    cap: FloatArray
    upto_ptr: IntArray
    upto: FloatArray
    tier_ptr: IntArray
    tier_price: FloatArray
    objects: Mapping[int, CapacityCost]

    def __init__(
        self,
        *,
        rows: IntArray,
        kind: npt.NDArray[np.int8],
        size: FloatArray,
        price: FloatArray,
        cap: FloatArray,
        upto_ptr: IntArray,
        upto: FloatArray,
        tier_ptr: IntArray,
        tier_price: FloatArray,
        objects: Mapping[int, CapacityCost] | None = None,
    ) -> None:
        self.rows, self.kind, self.size, self.price, self.cap = rows, kind, size, price, cap
        self.upto_ptr, self.upto, self.tier_ptr, self.tier_price = upto_ptr, upto, tier_ptr, (
            tier_price)  # fmt: skip
        self.objects = dict(objects or {})
        self._made: dict[int, CapacityCost] = {}

    @classmethod
    def of(cls, costs: Mapping[int, CapacityCost] | None) -> CostColumns:
        """``costs`` as it is if a :class:`CostColumns`, else the given objects kept as they
        are (no columns)."""
        if isinstance(costs, CostColumns):
            return costs
        empty = np.zeros(0)
        return cls(rows=_NONE, kind=np.zeros(0, dtype=np.int8), size=empty, price=empty,
                   cap=empty, upto_ptr=np.zeros(1, dtype=np.int64), upto=empty,
                   tier_ptr=np.zeros(1, dtype=np.int64), tier_price=empty,
                   objects={int(k): v for k, v in (costs or {}).items()})  # fmt: skip

    # --- the mapping ------------------------------------------------------------------------

    @cached_property
    def _row_of(self) -> IntArray:
        """The row of each position up to the last in :attr:`rows` (-1 for none)."""
        row_of = np.full(int(self.rows[-1]) + 1 if self.rows.size else 0, -1, dtype=np.int64)
        row_of[self.rows] = np.arange(self.rows.size)
        return row_of

    def _row(self, k: int) -> int:
        """The row of position ``k`` in the columns, or -1."""
        return int(self._row_of[k]) if 0 <= k < self._row_of.size else -1

    def __getitem__(self, k: int) -> CapacityCost:
        made = self._made.get(k)
        if made is not None:
            return made
        if k in self.objects:
            return self.objects[k]
        r = self._row(k) if isinstance(k, int | np.integer) else -1
        if r < 0:
            raise KeyError(k)
        made = self.made(r)
        self._made[k] = made
        return made

    def made(self, r: int) -> CapacityCost:
        """The cost function of row ``r`` of the columns, as an object."""
        kind, cap = int(self.kind[r]), float(self.cap[r])
        if kind == LINEAR:
            return LinearCost(float(self.price[r]), cap)
        if kind == MODULES:
            return ModuleCost(float(self.size[r]), float(self.price[r]), cap)
        upto = self.upto[self.upto_ptr[r] : self.upto_ptr[r + 1]]
        prices = self.tier_price[self.tier_ptr[r] : self.tier_ptr[r + 1]]
        ptr, knots, values = self._knots
        where = slice(int(ptr[r]), int(ptr[r + 1]))
        cap = float(self.max_amount[r])
        upto_t, prices_t = tuple(upto.tolist()), tuple(prices.tolist())
        return TieredCost.from_parts(upto_t, prices_t, cap, knots[where], values[where])

    @cached_property
    def _knots(self) -> tuple[IntArray, FloatArray, FloatArray]:
        """For each tiered row, 0 and its ``upto`` (the knots) and its cost there, as
        :class:`~inferplan.network.costs.TieredCost` computes it (a running sum of width
        times price, in order), in compressed rows (``ptr``, knots, costs); rows with the same
        number of tiers are summed together. Read-only."""
        n_upto = np.diff(self.upto_ptr)
        tiers = self.kind == TIERS
        ptr = _starts(np.where(tiers, n_upto + 1, 0))
        knots, values = np.zeros(ptr[-1]), np.zeros(ptr[-1])
        rows = np.flatnonzero(tiers)
        for n in np.unique(n_upto[rows]).tolist():
            group = rows[n_upto[rows] == n]
            if not n:
                continue
            ends = self.upto[self.upto_ptr[group][:, None] + np.arange(n)]
            widths = np.diff(np.concatenate([np.zeros((group.size, 1)), ends], axis=1), axis=1)
            prices = self.tier_price[self.tier_ptr[group][:, None] + np.arange(n)]
            where = ptr[group][:, None] + np.arange(1, n + 1)
            knots[where] = ends
            with np.errstate(over="ignore"):  # a cost beyond floating point is inf
                values[where] = np.cumsum(widths * prices, axis=1)
        knots.flags.writeable = values.flags.writeable = False
        return ptr, knots, values

    def __contains__(self, k: object) -> bool:
        if k in self.objects:
            return True
        return isinstance(k, int | np.integer) and self._row(int(k)) >= 0

    def __len__(self) -> int:
        return self.rows.size + len(self.objects)

    def __iter__(self) -> Iterator[int]:
        return iter(self.positions.tolist())

    def __repr__(self) -> str:
        return f"<cost functions of {len(self)} elements, made when looked up>"

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_made": {}}

    @cached_property
    def positions(self) -> IntArray:
        """The positions of every element with a cost function, increasing."""
        if not self.objects:
            return self.rows
        return np.union1d(self.rows, np.fromiter(self.objects, dtype=np.int64))

    # --- pricing, column-wise ---------------------------------------------------------------

    @cached_property
    def _tiers(self) -> tuple[npt.NDArray[np.bool_], FloatArray]:
        """Whether each row's cost is not tiered or tiered with all its prices equal (then
        linear), and each row's most that can be added (as :attr:`TieredCost.max_amount`)."""
        linear = self.kind != TIERS
        cap = self.cap.copy()
        tiers = np.flatnonzero(self.kind == TIERS)
        if tiers.size:
            n_price = np.diff(self.tier_ptr)[tiers]
            first = self.tier_price[self.tier_ptr[tiers]]
            row = np.repeat(np.arange(tiers.size), n_price)
            differ = self.tier_price[_flat(self.tier_ptr, tiers)] != first[row]
            linear[tiers] = np.bincount(row, weights=differ, minlength=tiers.size) == 0
            bounded = tiers[n_price == np.diff(self.upto_ptr)[tiers]]  # (so not empty)
            last = self.upto[self.upto_ptr[bounded + 1] - 1]
            cap[bounded] = np.minimum(cap[bounded], last)
        return linear, cap

    @cached_property
    def linear_price(self) -> FloatArray:
        """Each row's unit price if its cost is linear (``NaN`` if not: modules, tiers of
        different prices)."""
        linear, _ = self._tiers
        price = np.where(self.kind == TIERS, np.nan, self.price)
        tiers = np.flatnonzero((self.kind == TIERS) & linear)
        price[tiers] = self.tier_price[self.tier_ptr[tiers]]
        price[self.kind == MODULES] = np.nan
        return price

    def default_price(self) -> FloatArray:
        """Each row's price for an element that gives a cost function and no ``price``: the
        cost's linear price, 0 when it has none (as a file's element is read)."""
        return np.nan_to_num(self.linear_price, nan=0.0) + 0.0  # and -0.0 is 0.0

    @cached_property
    def max_amount(self) -> FloatArray:
        """Each row's most that can be added."""
        return self._tiers[1]

    def lookup(self, positions: IntArray) -> IntArray:
        """The row of each of ``positions`` (-1 for those without a column cost)."""
        inside = positions < self._row_of.size
        return np.where(inside, self._row_of[np.where(inside, positions, 0)], -1) if (
            self.rows.size) else np.full(positions.size, -1, dtype=np.int64)  # fmt: skip

    def pricing(
        self, prices: FloatArray, positions: IntArray
    ) -> tuple[FloatArray, FloatArray, IntArray]:
        """For the elements at ``positions`` of a column of linear ``prices``: each one's
        unit price (its linear cost's, 0 when its cost is not linear), cap, and the indices (in
        ``positions``) of those whose cost is not linear, increasing."""
        price = prices[positions].copy()
        cap = np.full(positions.size, np.inf)
        if not self:  # every element linear in its price
            return price, cap, _NONE
        row = self.lookup(positions)
        at = np.flatnonzero(row >= 0)
        linear = self.linear_price[row[at]]
        price[at] = np.where(np.isnan(linear), 0.0, linear)
        cap[at] = self.max_amount[row[at]]
        other = [at[np.isnan(linear)]]
        if self.objects:
            extra = []
            for k in np.flatnonzero(np.isin(positions, list(self.objects))).tolist():
                cost = self.objects[int(positions[k])]
                unit = cost.linear_price
                price[k] = 0.0 if unit is None else unit
                cap[k] = cost.max_amount
                if unit is None:
                    extra.append(k)
            other.append(np.array(extra, dtype=np.int64))
        return price, cap, np.sort(np.concatenate(other)).astype(np.int64)

    def pieces(self, prices: FloatArray, positions: IntArray) -> Pieces:
        """The piecewise-linear costs of the elements at ``positions`` of a column of linear
        ``prices`` (those without a cost function: one piece of slope their price), as
        :func:`~inferplan.network.costs.segments` gives them."""
        m = positions.size
        count = np.ones(m, dtype=np.int64)
        cap = np.full(m, np.inf)
        table = np.zeros(m, dtype=bool)
        if not self:  # one piece of slope its price each
            ptr, zeros = np.arange(m + 1, dtype=np.int64), np.zeros(m)
            return Pieces(ptr=ptr, starts=zeros, slopes=prices[positions], values=zeros.copy(),
                          cap=cap, table=table)  # fmt: skip
        row = self.lookup(positions)
        at = np.flatnonzero(row >= 0)
        r = row[at]
        linear = ~np.isnan(self.linear_price[r])
        cap[at] = self.max_amount[r]
        table[at[self.kind[r] == MODULES]] = True
        tiered = at[~linear & (self.kind[r] == TIERS)]
        tier_rows = row[tiered]
        # tiers that start at or beyond the cap sell nothing: the last one kept ends at the cap
        n_price = np.diff(self.tier_ptr)[tier_rows]
        knot_ptr, all_knots, all_values = self._knots
        kept = np.repeat(np.arange(tier_rows.size), n_price)
        tier_start = knot_ptr[tier_rows][kept] + np.arange(kept.size) - _starts(n_price)[kept]
        below = np.bincount(kept, weights=all_knots[tier_start] < self.max_amount[tier_rows][kept],
                            minlength=tier_rows.size).astype(np.int64)  # fmt: skip
        count[tiered] = np.maximum(1, below)
        count[at[self.kind[r] == MODULES]] = 0
        own: dict[int, Segments | None] = {}
        for k in np.flatnonzero(np.isin(positions, list(self.objects))).tolist():
            cost = self.objects[int(positions[k])]
            found = own[k] = segments(cost)
            count[k] = 0 if found is None else len(found.starts)
            cap[k] = cost.max_amount
            table[k] = found is None
        ptr = _starts(count)
        starts, values = np.zeros(ptr[-1]), np.zeros(ptr[-1])
        slopes = np.zeros(ptr[-1])
        plain = count == 1
        plain[tiered] = False
        plain[list(own)] = False
        slopes[ptr[:-1][plain]] = prices[positions[plain]]
        lin = at[linear]
        slopes[ptr[lin]] = self.linear_price[row[lin]]
        if tiered.size:
            take = np.repeat(np.arange(tiered.size), count[tiered])
            within = np.arange(take.size) - _starts(count[tiered])[:-1][take]
            place = ptr[tiered][take] + within
            knot = knot_ptr[tier_rows][take] + within
            starts[place], values[place] = all_knots[knot], all_values[knot]
            slopes[place] = self.tier_price[self.tier_ptr[tier_rows][take] + within]
        for k, found in own.items():
            if found is not None:
                where = slice(int(ptr[k]), int(ptr[k + 1]))
                starts[where], slopes[where], values[where] = found.starts, found.slopes, (
                    found.values)  # fmt: skip
                cap[k] = found.cap
        return Pieces(ptr=ptr, starts=starts, slopes=slopes, values=values, cap=cap, table=table)


def _flat(ptr: IntArray, rows: IntArray) -> IntArray:
    """The flat indices of the entries of ``rows`` in compressed rows ``ptr``, row by row."""
    lengths = ptr[rows + 1] - ptr[rows]
    which = np.repeat(np.arange(rows.size), lengths)
    return ptr[rows][which] + np.arange(which.size) - _starts(lengths)[:-1][which]


# --- costs as read from a file, checked column-wise ------------------------------------------


@dataclass
class RawCosts:
    """The cost objects of some elements of a file, as read: one entry per element with a
    ``cost`` (``rows``, increasing positions).

    ``kind`` is the code of its ``kind`` (0 when missing, unknown or not text); ``fields``
    how many fields the object has; ``size``, ``price`` and ``max`` the numbers given (NaN
    for a value that is not a number) and whether each is given (``has_*``); for a list
    ``price`` and for ``upto``, their lengths (-1 when not a list or not given) and their
    entries in a flat array each (NaN for an entry that is not a number)."""

    rows: IntArray
    kind: npt.NDArray[np.int8]
    fields: IntArray
    size: FloatArray
    has_size: npt.NDArray[np.bool_]
    price: FloatArray
    has_price: npt.NDArray[np.bool_]
    max: FloatArray
    has_max: npt.NDArray[np.bool_]
    price_len: IntArray
    price_list: FloatArray
    upto_len: IntArray
    upto: FloatArray

    @classmethod
    def from_objects(cls, rows: IntArray, costs: Sequence[object]) -> RawCosts:
        """From the ``cost`` objects of listed elements (at ``rows``)."""
        dicts = [c if type(c) is dict else {} for c in costs]
        fields = np.array([len(c) if type(c) is dict else -1 for c in costs], dtype=np.int64)
        kind = np.array([CODES.get(k, 0) if type(k) is str else 0
                         for k in (c.get("kind") for c in dicts)], dtype=np.int8)  # fmt: skip
        out: dict[str, Any] = {}
        for name in ("size", "price", "max"):
            values = [c.get(name) for c in dicts]
            out[name] = numbers(values)
            out[f"has_{name}"] = np.array([name in c for c in dicts], dtype=bool)
        for name in ("price", "upto"):
            lists = [c.get(name) for c in dicts]
            lengths = np.array([len(v) if type(v) is list else -1 for v in lists],
                               dtype=np.int64)  # fmt: skip
            flat = [x for v in lists if type(v) is list for x in v]
            out[f"{name}_len"] = lengths
            out["price_list" if name == "price" else name] = numbers(flat)
        return cls(rows=rows, kind=kind, fields=fields, **out)

    def columns(self) -> CostColumns:
        """The costs (every one valid) as columns."""
        tiers = self.kind == TIERS
        upto_len = np.where(tiers, self.upto_len, 0)
        price_len = np.where(tiers, self.price_len, 0)
        upto = self.upto[_flat(_starts(np.maximum(self.upto_len, 0)), np.flatnonzero(tiers))]
        prices = self.price_list[_flat(_starts(np.maximum(self.price_len, 0)),
                                       np.flatnonzero(tiers))]  # fmt: skip
        return CostColumns(
            rows=self.rows,
            kind=self.kind,
            size=np.where(self.kind == MODULES, self.size, np.nan),
            price=np.where(tiers, np.nan, self.price),
            cap=np.where(self.has_max, self.max, math.inf),
            upto_ptr=_starts(upto_len),
            upto=upto,
            tier_ptr=_starts(price_len),
            tier_price=prices,
        )


def _positive(values: FloatArray) -> npt.NDArray[np.bool_]:
    return np.isfinite(values) & (values > 0)


def _non_negative(values: FloatArray) -> npt.NDArray[np.bool_]:
    return np.isfinite(values) & (values >= 0)


def _all_per_row(ok: npt.NDArray[np.bool_], lengths: IntArray) -> npt.NDArray[np.bool_]:
    """Whether every entry of each row (``lengths`` entries each, -1 as 0) is ``ok``."""
    lengths = np.maximum(lengths, 0)
    row = np.repeat(np.arange(lengths.size), lengths)
    bad = np.bincount(row, weights=~ok, minlength=lengths.size)
    none: npt.NDArray[np.bool_] = bad == 0
    return none


def check(raw: RawCosts) -> npt.NDArray[np.bool_]:
    """Whether each cost of ``raw`` is refused by the file format: exactly the costs the
    element-by-element validation (the pydantic models of the network file) refuses.

    A cost is a ``linear`` (``price``), ``modules`` (``size``, ``price``) or ``tiers``
    (``upto``, ``price`` lists) object with an optional ``max`` and no other field; sizes and
    ``upto`` entries are positive finite numbers, prices and ``max`` non-negative finite
    numbers; a tiered cost has at least one price, as many as ``upto`` entries or one more,
    and increasing ``upto``.
    """
    kind, has_max = raw.kind, raw.has_max
    max_ok = ~has_max | _non_negative(raw.max)
    fields_ok = raw.fields == np.where(kind == LINEAR, 2, 3) + has_max
    price_ok = raw.has_price & _non_negative(raw.price)
    good = np.where(kind == LINEAR, price_ok, False)
    good |= (kind == MODULES) & price_ok & raw.has_size & _positive(raw.size)
    upto_start = _starts(np.maximum(raw.upto_len, 0))
    increasing = np.ones(raw.upto.size, dtype=bool)  # each entry above the one before it
    increasing[1:] = raw.upto[1:] > raw.upto[:-1]
    increasing[upto_start[:-1][raw.upto_len > 0]] = True
    upto_ok = _all_per_row(_positive(raw.upto) & increasing, raw.upto_len)
    prices_ok = _all_per_row(_non_negative(raw.price_list), raw.price_len)
    shapes = (raw.price_len >= 1) & (raw.upto_len >= 0) & (
        (raw.price_len == raw.upto_len) | (raw.price_len == raw.upto_len + 1))  # fmt: skip
    good |= (kind == TIERS) & shapes & upto_ok & prices_ok
    refused: npt.NDArray[np.bool_] = ~(good & fields_ok & max_ok)
    return refused
