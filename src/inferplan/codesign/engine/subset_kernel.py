"""The compiled loop behind :mod:`inferplan.codesign.engine.subsets` (see its docstring).

Compiled by numba when first called (``cache=True``: numba keeps the machine code on disk, so
a later process loads it). Imported only by a solve that needs it.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from inferplan.arrays import FloatArray, IntArray

__all__ = ["down_sets", "subset_step"]


@njit(cache=True, nogil=True)
def down_sets(lower: IntArray, first: IntArray, down: npt.NDArray[np.uint64]) -> None:
    """``down[b]``: the ideals inside ideal ``b`` as bits (bit ``b`` of word ``q``: ideal ``64 q
    + b``), from its lower covers ``lower[first[b]:first[b + 1]]`` (ideals by size, so the
    ones inside ``b`` come no later than ``b``)."""
    for b in range(down.shape[0]):
        for k in range(first[b], first[b + 1]):
            L = lower[k]
            for q in range(L // 64 + 1):
                down[b, q] |= down[L, q]
        down[b, b // 64] |= np.uint64(1) << np.uint64(b % 64)


@njit(cache=True, nogil=True, error_model="numpy")
def subset_step(
    row: FloatArray, down: npt.NDArray[np.uint64], high: FloatArray, low: FloatArray,
    beta: float, C: float, lo: int, hi: int, start: FloatArray, slope: FloatArray,
    value: FloatArray, cap: float, memory: float, mem_price: float, mem_cap: float,
    p_high: FloatArray, p_low: FloatArray, forward: FloatArray, words: npt.NDArray[np.uint64],
    working: FloatArray, out: FloatArray, arg: IntArray, reached: npt.NDArray[np.uint64],
) -> None:  # fmt: skip
    """``out[b] = min over a inside b of row[a] + f(max(0, w(a, b) / beta - C)) + m(a, b)``
    and the smallest ``a`` attaining it (0 where none is finite), over the reached ``a``
    (``row[a]`` finite) of ``down[b]`` (:func:`down_sets`) in increasing order.

    ``w(a, b) = (high[b] - high[a]) + (low[b] - low[a])``: the two limbs of each ideal's exact
    work, so the sum rounds once. ``f``: the pieces ``lo..hi-1`` (``start``, ``slope``,
    ``value``) up to ``cap``. ``m``: the memory term when ``memory`` is finite, with ``need(a,
    b)`` the parameter bytes of ``b`` outside ``a`` (limbs ``p_high``, ``p_low``) plus the
    largest working set of a layer of ``b`` outside ``a`` (``words``: each ideal's layers as
    bits in decreasing order of ``working``), or ``forward[a]`` when ``a = b``; ``m = 0`` up to
    ``memory``, ``mem_price`` per byte beyond it up to ``mem_cap`` bytes more, ``inf`` past.
    ``reached``: scratch, one word per 64 ideals."""
    K = row.size
    limited = memory < math.inf
    n_words = words.shape[1]
    reached[:] = 0
    for a in range(K):
        if row[a] < math.inf:
            reached[a // 64] |= np.uint64(1) << np.uint64(a % 64)
    for b in range(K):
        best = math.inf
        chosen = 0
        for q in range(b // 64 + 1):
            bits = down[b, q] & reached[q]
            while bits:
                a = 64 * q + trailing_zeros(bits)  # type: ignore[call-arg]
                bits &= bits - np.uint64(1)
                d = row[a]
                if not d < best:
                    continue  # every term is >= 0 and a tie goes to the smaller a, seen first
                x = ((high[b] - high[a]) + (low[b] - low[a])) / beta - C
                c = 0.0
                if x > 0.0:
                    if x > cap:
                        continue
                    p = lo
                    while p + 1 < hi and x > start[p + 1]:
                        p += 1
                    c = value[p] + slope[p] * (x - start[p])
                if limited:
                    if a == b:
                        need = forward[a]
                    else:
                        need = (p_high[b] - p_high[a]) + (p_low[b] - p_low[a])
                        for r in range(n_words):
                            fresh = words[b, r] & ~words[a, r]
                            if fresh:
                                k = trailing_zeros(fresh)
                                need += working[64 * r + k]
                                break
                    extra = need - memory
                    if extra > 0.0:
                        if extra > mem_cap:
                            continue
                        c += mem_price * extra
                total = d + c
                if total < best:
                    best = total
                    chosen = a
        out[b] = best
        arg[b] = chosen
