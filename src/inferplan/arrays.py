"""The array types of the numeric code (one alias each, for type annotations), and exact
range sums of a sequence (:func:`range_sums`), which the work and the memory of a block range
are formed from."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["FloatArray", "IntArray", "range_sums"]

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
    ratios = [float(v).as_integer_ratio() for v in values]
    shift = max((den.bit_length() - 1 for _, den in ratios), default=0)
    unit = 1 << shift
    exact = [0]
    for num, den in ratios:
        exact.append(exact[-1] + num * (unit // den))
    prefix = [_ratio(p, unit) for p in exact]
    n = len(exact)
    below = np.tri(n, k=-1, dtype=bool)
    if all(_represents(f, p, unit) for f, p in zip(prefix, exact, strict=True)):
        S = np.array(prefix)
        sums: FloatArray = S[None, :] - S[:, None]
    else:
        P = np.array(exact, dtype=object)
        diff = np.where(below, 0, P[None, :] - P[:, None])
        sums = np.frompyfunc(lambda d: _ratio(d, unit), 1, 1)(diff).astype(np.float64)
    sums[below] = np.inf
    return sums


def _ratio(num: int, den: int) -> float:
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
