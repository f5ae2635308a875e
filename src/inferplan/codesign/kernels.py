"""The compiled loops behind :mod:`inferplan.codesign.compiled` (see its docstring).

Imported only when the compiled engine runs: numba compiles each function on its first call
and caches the machine code on disk. Without numba (``jit`` is then the identity) they run as
plain Python, far too slowly for use but with the same results, which keeps them readable and
testable on their own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar, cast

import numpy as np
import numpy.typing as npt

__all__ = ["link_cost", "piece_cost", "psg", "throughput"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
F = TypeVar("F", bound=Callable[..., object])

try:
    import numba
except ImportError:  # pragma: no cover - the fast extra is part of the test install
    numba = None  # type: ignore[assignment]


def jit(function: F) -> F:
    """``function`` compiled by numba (machine code cached on disk), or as it is without."""
    if numba is None:  # pragma: no cover
        return function
    try:
        return cast(F, numba.njit(cache=True, error_model="numpy", nogil=True)(function))
    except RuntimeError:  # pragma: no cover - nowhere to write the cache: compile per process
        return cast(F, numba.njit(error_model="numpy", nogil=True)(function))


@jit
def piece_cost(
    x: float, lo: int, hi: int, start: FloatArray, slope: FloatArray, value: FloatArray,
    cap: float,
) -> float:  # fmt: skip
    """A piecewise-linear cost (pieces ``lo..hi-1``) of requesting ``x`` (``0`` if ``x <= 0``)."""
    if x <= 0.0:
        return 0.0
    if x > cap:
        return math.inf
    k = lo
    while k + 1 < hi and x > start[k + 1]:
        k += 1
    return float(value[k] + slope[k] * (x - start[k]))


@jit
def link_cost(sigma: float, e: int, price: FloatArray, cap: FloatArray, table_row: IntArray,
               tables: FloatArray, j: int) -> float:  # fmt: skip
    if table_row[e] >= 0:
        return float(tables[table_row[e], j])
    if sigma > cap[e]:
        return math.inf
    return float(price[e] * sigma)


@jit
def psg(
    beta: float, node_tables: FloatArray, link_tables: FloatArray,
    S: FloatArray, D: FloatArray, source: int, target: int,
    capacity: FloatArray, bandwidth: FloatArray, link_src: IntArray, link_dst: IntArray,
    seg_ptr: IntArray, seg_start: FloatArray, seg_slope: FloatArray, seg_value: FloatArray,
    node_cap: FloatArray, node_table: IntArray,
    link_price: FloatArray, link_cap: FloatArray, link_table: IntArray,
    out_ptr: IntArray, out_links: IntArray, in_ptr: IntArray, in_links: IntArray,
) -> tuple[float, IntArray, IntArray, IntArray]:  # fmt: skip
    """PSG: the optimal cost and the path, partition and links (see the module docstring)."""
    V, W = capacity.size, S.size
    label = np.full((V, W), np.inf)
    stage = np.full((V, W), np.inf)
    label[source, 0] = 0.0
    wanted = D / beta  # bit/s each activation needs, as numpy computes it
    K = 1
    for v in range(V):
        K = max(K, seg_ptr[v + 1] - seg_ptr[v])
    # Piece k holds threshold[k] < x <= threshold[k + 1] (threshold 0 is 0, the last the cap).
    # With first[m] the first i whose x(i, j) is at most threshold[m], window m = k + 1 holds
    # piece k's i in [first[m], first[m - 1] - 1], and window 0 the free i in [first[0], j].
    queue = np.empty((K + 1, W), dtype=np.int64)
    head = np.empty(K + 1, dtype=np.int64)
    tail = np.empty(K + 1, dtype=np.int64)
    first = np.empty(K + 2, dtype=np.int64)
    threshold = np.empty(K + 2)
    key = np.empty((K + 1, W))
    for v in range(V):
        row = label[v]
        reached = 0
        while reached < W and row[reached] == np.inf:
            reached += 1
        if reached == W:
            continue
        C = capacity[v]
        if node_table[v] >= 0:
            table = node_tables[node_table[v]]
            for j in range(reached, W):
                best = np.inf
                for i in range(reached, j + 1):
                    c = row[i] + table[i, j]
                    if c < best:
                        best = c
                stage[v, j] = best
        else:
            lo, hi = seg_ptr[v], seg_ptr[v + 1]
            pieces = hi - lo
            threshold[0] = 0.0
            for k in range(1, pieces):
                threshold[k] = seg_start[lo + k]
            threshold[pieces] = node_cap[v]
            for m in range(pieces + 1):
                head[m], tail[m], first[m] = 0, 0, 0
            for i in range(W):
                key[0, i] = row[i]
                for k in range(pieces):
                    key[k + 1, i] = row[i] - seg_slope[lo + k] * S[i] / beta
            for j in range(W):
                # Move each window end to the first i whose x(i, j) is at most its threshold;
                # the i it passes now ask for more than threshold m and join piece m (window
                # m + 1), or nothing past the cap.
                for m in range(pieces + 1):
                    f = first[m]
                    while f < j and (S[j] - S[f]) / beta - C > threshold[m]:
                        f += 1
                    if m < pieces:
                        w = m + 1
                        q = queue[w]
                        for i in range(first[m], f):
                            if row[i] < np.inf:
                                while tail[w] > head[w] and key[w, q[tail[w] - 1]] > key[w, i]:
                                    tail[w] -= 1
                                q[tail[w]] = i
                                tail[w] += 1
                    first[m] = f
                if row[j] < np.inf:  # j joins the free window
                    q = queue[0]
                    while tail[0] > head[0] and row[q[tail[0] - 1]] > row[j]:
                        tail[0] -= 1
                    q[tail[0]] = j
                    tail[0] += 1
                best = np.inf
                for m in range(pieces + 1):
                    # drop the i that left window m: below its lower end first[m]
                    q = queue[m]
                    while tail[m] > head[m] and q[head[m]] < first[m]:
                        head[m] += 1
                    if tail[m] == head[m]:
                        continue
                    i = q[head[m]]
                    if m == 0:
                        c = row[i]
                    else:
                        k = lo + m - 1
                        x = (S[j] - S[i]) / beta - C
                        c = row[i] + (seg_value[k] + seg_slope[k] * (x - seg_start[k]))
                    if c < best:
                        best = c
                stage[v, j] = best
        for t in range(out_ptr[v], out_ptr[v + 1]):
            e = out_links[t]
            z = link_dst[e]
            for j in range(reached, W):
                a = stage[v, j]
                if a == np.inf:
                    continue
                sigma = max(0.0, wanted[j] - bandwidth[e])
                c = a + link_cost(sigma, e, link_price, link_cap, link_table, link_tables, j)
                if c < label[z, j]:
                    label[z, j] = c
    cost = stage[target, W - 1]
    path = np.empty(V, dtype=np.int64)
    partition = np.empty(V, dtype=np.int64)
    used = np.empty(V, dtype=np.int64)
    if cost == np.inf:
        return cost, path[:0], partition[:0], used[:0]
    n, v, j = 0, target, W - 1
    path[0], partition[0] = target, j
    while v != source:
        # the fewest blocks received among the best, then the earliest in-link among the best
        C = capacity[v]
        row = label[v]
        best, chosen = np.inf, -1
        for i in range(j + 1):
            if row[i] == np.inf:
                continue
            x = (S[j] - S[i]) / beta - C
            if node_table[v] >= 0:
                c = row[i] + node_tables[node_table[v], i, j]
            else:
                c = row[i] + piece_cost(x, seg_ptr[v], seg_ptr[v + 1], seg_start, seg_slope,
                                         seg_value, node_cap[v])  # fmt: skip
            if c < best:
                best, chosen = c, i
        j = chosen
        best, link = np.inf, -1
        for t in range(in_ptr[v], in_ptr[v + 1]):
            e = in_links[t]
            sigma = max(0.0, wanted[j] - bandwidth[e])
            c = stage[link_src[e], j] + link_cost(sigma, e, link_price, link_cap, link_table,
                                                   link_tables, j)  # fmt: skip
            if c < best:
                best, link = c, e
        v = link_src[link]
        n += 1
        path[n], partition[n], used[n - 1] = v, j, link
    return cost, path[: n + 1][::-1].copy(), partition[: n + 1][::-1].copy(), used[:n][::-1].copy()


@jit
def throughput(
    capacity: FloatArray, bandwidth: FloatArray, S: FloatArray, D: FloatArray, source: int,
    target: int, link_src: IntArray, link_dst: IntArray, out_ptr: IntArray,
    out_links: IntArray, in_ptr: IntArray, in_links: IntArray,
) -> tuple[float, IntArray, IntArray]:  # fmt: skip
    """T*: the least interval and the path and partition (see the module docstring)."""
    V, W = capacity.size, S.size
    label = np.full((V, W), np.inf)
    stage = np.full((V, W), np.inf)
    label[source, 0] = 0.0
    stack = np.empty(W, dtype=np.int64)
    for v in range(V):
        row = label[v]
        C = capacity[v]
        top, c = -1, 0  # stack[c] is the first entry whose label is at least its delay
        for j in range(W):
            if row[j] < np.inf:
                while top >= 0 and row[stack[top]] > row[j]:
                    top -= 1
                top += 1
                stack[top] = j
                c = min(c, top)
            if top < 0:
                continue
            while c <= top and row[stack[c]] < (S[j] - S[stack[c]]) / C:
                c += 1
            best = row[stack[c]] if c <= top else np.inf
            if c > 0:
                best = min(best, (S[j] - S[stack[c - 1]]) / C)
            stage[v, j] = best
        for t in range(out_ptr[v], out_ptr[v + 1]):
            e = out_links[t]
            z = link_dst[e]
            for j in range(W):
                a = max(stage[v, j], D[j] / bandwidth[e])
                if a < label[z, j]:
                    label[z, j] = a
    interval = stage[target, W - 1]
    path = np.empty(V, dtype=np.int64)
    partition = np.empty(V, dtype=np.int64)
    n, v, j = 0, target, W - 1
    path[0], partition[0] = target, j
    while v != source:
        C = capacity[v]
        best, chosen = np.inf, -1
        for i in range(j + 1):
            d = max(label[v, i], (S[j] - S[i]) / C)
            if d < best:
                best, chosen = d, i
        j = chosen
        best, link = np.inf, -1
        for t in range(in_ptr[v], in_ptr[v + 1]):
            e = in_links[t]
            d = max(stage[link_src[e], j], D[j] / bandwidth[e])
            if d < best:
                best, link = d, e
        v = link_src[link]
        n += 1
        path[n], partition[n] = v, j
    return interval, path[: n + 1][::-1].copy(), partition[: n + 1][::-1].copy()
