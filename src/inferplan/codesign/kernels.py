"""The compiled loops behind :mod:`inferplan.codesign.compiled` (see its docstring).

Imported only when the compiled engine runs: numba compiles each function on its first call
and caches the machine code on disk. Without numba (``jit`` is then the identity) the module
still imports and the functions run as plain Python, far too slowly for use; the engine choice
(:func:`~inferplan.codesign.compiled.compiled_engine`) never sends a solve here then.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar, cast

import numpy as np

from inferplan.arrays import FloatArray, IntArray

__all__ = ["psg", "throughput"]  # the entry points; the rest are their steps

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
def table_step(row: FloatArray, table: FloatArray, reached: int, out: FloatArray) -> None:
    """``out[j] = min_i row[i] + table[i, j]``, all pairs."""
    for j in range(reached, row.size):
        best = np.inf
        for i in range(reached, j + 1):
            best = min(best, row[i] + table[i, j])
        out[j] = best


@jit
def free_window(work_t: FloatArray, row: FloatArray, beta: float, C: float, out: FloatArray,
                queue: IntArray, keys: FloatArray) -> None:  # fmt: skip
    """``out[j] = min row[i]`` over the ``i <= j`` that need no added compute,
    ``x(i, j) = w(i, j) / beta - C <= 0`` (``work_t[j, i] = w(i, j)``): a window ``[f, j]``
    sliding right."""
    f, h, t = 0, 0, 0
    for j in range(row.size):
        if row[j] < np.inf:
            while t > h and keys[t - 1] > row[j]:
                t -= 1
            queue[t], keys[t] = j, row[j]
            t += 1
        while f < j and work_t[j, f] / beta - C > 0.0:
            f += 1
        while t > h and queue[h] < f:
            h += 1
        out[j] = keys[h] if t > h else np.inf


@jit
def piece_window(work_t: FloatArray, row: FloatArray, beta: float, C: float, start: float,
                 slope: float, value: float, end: float, out: FloatArray,
                 queue: IntArray) -> None:  # fmt: skip
    """Lower ``out[j]`` to the best ``row[i] + value + slope * (x(i, j) - start)`` over the
    ``i`` whose request ``x(i, j)`` lies in the piece ``(start, end]``: a window ``[lo, up-1]``
    sliding right. Within the piece ``i`` beats an earlier ``b`` at every ``j`` when
    ``row[b] + slope * w(b, i) / beta > row[i]``, compared so (the work between them, not
    ``S_i / beta``, which may dwarf the costs); the best is priced as written."""
    lo, up, h, t = 0, 0, 0, 0
    for j in range(row.size):
        while up < j and work_t[j, up] / beta - C > start:
            if row[up] < np.inf:
                while t > h:
                    b = queue[t - 1]
                    if row[b] + slope * work_t[up, b] / beta <= row[up]:
                        break
                    t -= 1
                queue[t] = up
                t += 1
            up += 1
        while end < np.inf and lo < up and work_t[j, lo] / beta - C > end:
            lo += 1
        while t > h and queue[h] < lo:
            h += 1
        if t > h:
            i = queue[h]
            x = work_t[j, i] / beta - C
            out[j] = min(out[j], row[i] + (value + slope * (x - start)))


@jit
def link_step(wanted: FloatArray, have: float, price: float, cap: float, offered: FloatArray,
              reached: int, into: FloatArray) -> None:  # fmt: skip
    """Lower ``into[j]`` (the head's labels) to ``offered[j]`` (the tail's after its compute
    step) plus a linear link cost of the bandwidth ``max(0, wanted[j] - have)``."""
    for j in range(reached, offered.size):
        sigma = max(0.0, wanted[j] - have)
        into[j] = min(into[j], offered[j] + (np.inf if sigma > cap else price * sigma))


@jit
def psg(
    beta: float, node_tables: FloatArray, link_tables: FloatArray,
    work_t: FloatArray, D: FloatArray, source: int, target: int,
    capacity: FloatArray, bandwidth: FloatArray, link_src: IntArray, link_dst: IntArray,
    seg_ptr: IntArray, seg_start: FloatArray, seg_slope: FloatArray, seg_value: FloatArray,
    node_cap: FloatArray, node_table: IntArray,
    link_price: FloatArray, link_cap: FloatArray, link_table: IntArray,
    out_ptr: IntArray, out_links: IntArray, in_ptr: IntArray, in_links: IntArray,
) -> tuple[float, IntArray, IntArray, IntArray]:  # fmt: skip
    """PSG: the optimal cost and the path, partition and links (see the module docstring)."""
    V, W = capacity.size, D.size
    label = np.full((V, W), np.inf)
    stage = np.full((V, W), np.inf)
    label[source, 0] = 0.0
    wanted = D / beta  # bit/s each activation needs, as numpy computes it
    queue = np.empty(W, dtype=np.int64)  # a monotone deque: indices i and their keys
    keys = np.empty(W)
    for v in range(V):
        row, out = label[v], stage[v]
        reached = 0
        while reached < W and row[reached] == np.inf:
            reached += 1
        if reached == W:
            continue
        if node_table[v] >= 0:
            table_step(row, node_tables[node_table[v]], reached, out)
        else:
            free_window(work_t, row, beta, capacity[v], out, queue, keys)
            for k in range(seg_ptr[v], seg_ptr[v + 1]):
                end = seg_start[k + 1] if k + 1 < seg_ptr[v + 1] else node_cap[v]
                piece_window(work_t, row, beta, capacity[v], seg_start[k], seg_slope[k],
                             seg_value[k], end, out, queue)  # fmt: skip
        for t in range(out_ptr[v], out_ptr[v + 1]):
            e = out_links[t]
            if link_table[e] >= 0:
                into = label[link_dst[e]]
                table = link_tables[link_table[e]]
                for j in range(reached, W):
                    into[j] = min(into[j], out[j] + table[j])
            else:
                link_step(wanted, bandwidth[e], link_price[e], link_cap[e], out, reached,
                          label[link_dst[e]])  # fmt: skip
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
            x = work_t[j, i] / beta - C
            if node_table[v] >= 0:
                c = row[i] + node_tables[node_table[v], i, j]
            else:
                c = row[i] + piece_cost(x, seg_ptr[v], seg_ptr[v + 1], seg_start, seg_slope,
                                         seg_value, node_cap[v])  # fmt: skip
            if c < best or chosen < 0:
                best, chosen = c, i
        j = chosen
        best, link = np.inf, -1
        for t in range(in_ptr[v], in_ptr[v + 1]):
            e = in_links[t]
            sigma = max(0.0, wanted[j] - bandwidth[e])
            c = stage[link_src[e], j] + link_cost(sigma, e, link_price, link_cap, link_table,
                                                   link_tables, j)  # fmt: skip
            if c < best or link < 0:
                best, link = c, e
        v = link_src[link]
        n += 1
        path[n], partition[n], used[n - 1] = v, j, link
    return cost, path[: n + 1][::-1].copy(), partition[: n + 1][::-1].copy(), used[:n][::-1].copy()


@jit
def throughput(
    capacity: FloatArray, bandwidth: FloatArray, work_t: FloatArray, D: FloatArray, source: int,
    target: int, link_src: IntArray, link_dst: IntArray, out_ptr: IntArray,
    out_links: IntArray, in_ptr: IntArray, in_links: IntArray,
) -> tuple[float, IntArray, IntArray]:  # fmt: skip
    """T*: the least interval and the path and partition (see the module docstring)."""
    V, W = capacity.size, D.size
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
            while c <= top and row[stack[c]] < work_t[j, stack[c]] / C:
                c += 1
            best = row[stack[c]] if c <= top else np.inf
            if c > 0:
                best = min(best, work_t[j, stack[c - 1]] / C)
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
            d = max(label[v, i], work_t[j, i] / C)
            if d < best or chosen < 0:  # the first i when every delay overflows
                best, chosen = d, i
        j = chosen
        best, link = np.inf, -1
        for t in range(in_ptr[v], in_ptr[v + 1]):
            e = in_links[t]
            d = max(stage[link_src[e], j], D[j] / bandwidth[e])
            if d < best or link < 0:
                best, link = d, e
        v = link_src[link]
        n += 1
        path[n], partition[n] = v, j
    return interval, path[: n + 1][::-1].copy(), partition[: n + 1][::-1].copy()
