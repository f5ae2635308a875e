"""The array types of the numeric code (one alias each, for type annotations), and exact
range sums of a sequence (:func:`range_sums`), which the work and the memory of a block range
are formed from, and the stable sorting order of integer keys (:func:`stable_order`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "FloatArray",
    "IntArray",
    "exact_differences",
    "exact_limbs",
    "range_sums",
    "ratio",
    "scaled_exactly",
    "stable_order",
]

FloatArray = npt.NDArray[np.float64]
"""An array of 64-bit floats (SI quantities, costs, probabilities)."""
IntArray = npt.NDArray[np.int64]
"""An array of 64-bit integers (indices, counts)."""


def range_sums(values: Sequence[float]) -> FloatArray:
    """``sums[i, j] = values[i] + ... + values[j - 1]`` rounded once to the nearest float, for
    ``0 <= i <= j <= n`` (0 on the diagonal, ``inf`` below it): equal to
    ``math.fsum(values[i:j])``.

    The sums are formed exactly as integers (in units of the finest power of two among the
    values), so no value is lost beside a much larger one, as ``S_j - S_i`` of floating-point
    prefix sums loses it (``[1e14, 1e-3]``: ``S_2 - S_1 = 0``). When every exact prefix sum is
    a float already (integer FLOP counts below ``2**53``, for instance), one vectorised
    subtraction of them is rounded once too and gives the same table.

    Examples
    --------
    >>> float(range_sums([1e14, 1e-3])[1, 2])
    0.001
    """
    scaled, unit = scaled_exactly(values)
    exact = [0]
    for x in scaled:
        exact.append(exact[-1] + x)
    sums = exact_differences(exact, unit)
    sums[np.tri(len(exact), k=-1, dtype=bool)] = np.inf
    return sums


def scaled_exactly(values: Sequence[float]) -> tuple[list[int], int]:
    """``values`` as exact integer multiples of ``unit``, the finest power of two among them:
    sums of them are exact integers."""
    ratios = [float(v).as_integer_ratio() for v in values]
    shift = max((den.bit_length() - 1 for _, den in ratios), default=0)
    unit = 1 << shift
    return [num * (unit // den) for num, den in ratios], unit


def exact_differences(exact: Sequence[int], unit: int) -> FloatArray:
    """``sums[i, j] = (exact[j] - exact[i]) / unit`` rounded once to the nearest float, for
    every ``i`` and ``j``. When every exact value is a float already, one vectorised
    subtraction of them is rounded once too and gives the same table; when every one is below
    ``2**105`` in magnitude, two float limbs of each (:func:`_split_differences`) do; only
    wider values take Python integers, one operation per pair."""
    floats = [ratio(p, unit) for p in exact]
    if all(_represents(f, p, unit) for f, p in zip(floats, exact, strict=True)):
        S = np.array(floats)
        sums: FloatArray = S[None, :] - S[:, None]
        return sums
    split = _split_differences(exact, unit)
    if split is not None:
        return split
    P = np.array(exact, dtype=object)
    out: FloatArray = np.frompyfunc(lambda d: ratio(d, unit), 1, 1)(P[None, :] - P[:, None])
    return out.astype(np.float64)


# An exact integer below 2**105 in magnitude is ``hi * 2**53 + lo`` with ``|hi| < 2**52`` and
# ``0 <= lo < 2**53``: the difference of two is ``dh * 2**53 + dl`` with ``|dh|, |dl| <
# 2**53``, two exact floats (scaled by a power of two no larger than 2**1000: still exact, no
# subnormal) whose sum IEEE addition rounds once.
_LIMB = 53
_WIDEST = 2**105
_LARGEST_UNIT = 2**1000


def exact_limbs(exact: Sequence[int], unit: int) -> tuple[FloatArray, FloatArray] | None:
    """Two float limbs of each exact value ``exact[k] / unit``, the high and the low 53 bits
    (each an exact float), so that the difference of two values is ``(high[j] - high[i]) +
    (low[j] - low[i])`` rounded once (both differences are exact); ``None`` when a value is
    ``2**105`` or more in magnitude or ``unit`` above ``2**1000``. When every value is a float
    already, the values themselves and zeros (one subtraction rounds once too)."""
    floats = [ratio(p, unit) for p in exact]
    if all(_represents(f, p, unit) for f, p in zip(floats, exact, strict=True)):
        return np.array(floats), np.zeros(len(floats))
    if unit > _LARGEST_UNIT or not all(-_WIDEST < p < _WIDEST for p in exact):
        return None
    mask = (1 << _LIMB) - 1
    high = np.array([int(p) >> _LIMB for p in exact], dtype=np.float64) * ((1 << _LIMB) / unit)
    low = np.array([int(p) & mask for p in exact], dtype=np.float64) / unit
    return high, low


def _split_differences(exact: Sequence[int], unit: int) -> FloatArray | None:
    """:func:`exact_differences` as the sum of two exact float tables (the high and the low
    53 bits of each difference, :func:`exact_limbs`), rounded once by that one addition, when
    every exact value is below ``2**105`` in magnitude and ``unit`` at most ``2**1000``
    (``None`` otherwise): a table of ideals in three vectorised steps, where Python integers
    took an object operation per pair."""
    limbs = exact_limbs(exact, unit)
    if limbs is None:
        return None
    high, low = limbs
    out: FloatArray = high[None, :] - high[:, None]
    out += low[None, :] - low[:, None]
    return out


def ratio(num: int, den: int) -> float:
    """``num / den`` rounded once (``inf`` beyond the largest float)."""
    try:
        return num / den
    except OverflowError:
        return math.inf


def _represents(value: float, num: int, den: int) -> bool:
    """Whether the float ``value`` equals ``num / den`` exactly (``den`` a power of two)."""
    if not math.isfinite(value):
        return False
    a, b = value.as_integer_ratio()
    return b <= den and a * (den // b) == num


_DIGIT = 16  # numpy sorts keys of at most 16 bits stably by radix sort, in linear time


def stable_order(keys: IntArray) -> IntArray:
    """The order that sorts the non-negative integers ``keys`` stably: equal to
    ``np.argsort(keys, kind="stable")``, formed by a stable radix sort of each 16-bit digit
    of the keys from the lowest (numpy merges 64-bit keys, about ten times slower at half a
    million node indices, one digit; a negative key takes that merge).

    Examples
    --------
    >>> stable_order(np.array([3, 70_000, 3, 0])).tolist()
    [3, 0, 2, 1]
    """
    keys = np.asarray(keys, dtype=np.int64)
    if not keys.size or int(keys.min()) < 0:
        order: IntArray = np.argsort(keys, kind="stable")
        return order
    top, shift = int(keys.max()), 0
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    while top >> (shift + _DIGIT):
        shift += _DIGIT
        digit = ((keys[order] >> shift) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
    return order.astype(np.int64, copy=False)
