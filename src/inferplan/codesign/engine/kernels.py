"""The compiled loops behind :mod:`inferplan.codesign.engine.compiled` (see its docstring).

Compiled by numba into object code that :mod:`inferplan.codesign.engine.native` keeps on disk and
loads without numba: so this module is imported only to compile, once per machine. The
loops allocate nothing (numba's runtime is off, ``_nrt=False``): the caller gives every
array, scratch rows included. Without numba (``jit`` is then the identity) the module still
imports and the functions run as plain Python, far too slowly for use; the engine choice
(:func:`~inferplan.codesign.engine.compiled.compiled_engine`) never sends a solve here then.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from inferplan.arrays import FloatArray, IntArray

__all__ = ["psg", "throughput"]  # the entry points; the rest are their steps

F = TypeVar("F", bound=Callable[..., object])

try:
    import numba
except ImportError:  # pragma: no cover - the fast extra is part of the test install
    numba = None  # type: ignore[assignment]


OPTIONS: dict[str, Any] = {"error_model": "numpy", "nogil": True, "_nrt": False}
"""numba's options for every loop: numpy's error model (no exceptions), no GIL, and no
runtime (``_nrt``): the loops allocate nothing."""


def jit(function: F) -> F:
    """``function`` for numba to compile with :data:`OPTIONS`, or as it is without numba."""
    if numba is None:  # pragma: no cover
        return function
    return cast(F, numba.njit(**OPTIONS)(function))


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
def link_cost(sigma: float, e: int, lseg_ptr: IntArray, lseg_start: FloatArray,
              lseg_slope: FloatArray, lseg_value: FloatArray, link_cap: FloatArray,
              table_row: IntArray, tables: FloatArray, j: int) -> float:  # fmt: skip
    """Link ``e``'s cost of the bandwidth ``sigma`` added (send count ``j``): its pieces, or
    its row in the link tables."""
    if table_row[e] >= 0:
        return float(tables[table_row[e], j])
    return piece_cost(sigma, lseg_ptr[e], lseg_ptr[e + 1], lseg_start, lseg_slope, lseg_value,
                      link_cap[e])  # fmt: skip


@jit
def table_step(row: FloatArray, table: FloatArray, reached: int, out: FloatArray) -> None:
    """``out[j] = min_i row[i] + table[i, j]``, all pairs."""
    for j in range(reached, row.size):
        best = np.inf
        for i in range(reached, j + 1):
            best = min(best, row[i] + table[i, j])
        out[j] = best


@jit
def free_window(req_t: FloatArray, row: FloatArray, C: float, need_t: FloatArray, M: float,
                out: FloatArray, queue: IntArray, keys: FloatArray) -> None:  # fmt: skip
    """``out[j] = min row[i]`` over the ``i <= j`` that need no added compute,
    ``x(i, j) = w(i, j) / beta - C <= 0`` (``req_t[j, i] = w(i, j) / beta``), and fit the
    limit, ``need_t[j, i] <= M``: a window ``[f, j]`` sliding right (both conditions only
    fail for more ``i`` as ``j`` grows)."""
    f, h, t = 0, 0, 0
    for j in range(row.size):
        if row[j] < np.inf:
            while t > h and keys[t - 1] > row[j]:
                t -= 1
            queue[t], keys[t] = j, row[j]
            t += 1
        while f <= j and (req_t[j, f] - C > 0.0 or need_t[j, f] > M):
            f += 1
        while t > h and queue[h] < f:
            h += 1
        out[j] = keys[h] if t > h else np.inf


@jit
def piece_window(req_t: FloatArray, work_t: FloatArray, row: FloatArray, beta: float, C: float,
                 need_t: FloatArray, M: float, start: float, slope: float, value: float,
                 end: float, out: FloatArray, queue: IntArray) -> None:  # fmt: skip
    """Lower ``out[j]`` to the best ``row[i] + value + slope * (x(i, j) - start)`` over the
    ``i`` whose request ``x(i, j)`` lies in the piece ``(start, end]`` and that fit the limit
    ``need_t[j, i] <= M``: a window ``[lo, up-1]`` sliding right. Within the piece ``i``
    beats an earlier ``b`` at every ``j`` when ``row[b] + slope * w(b, i) / beta > row[i]``,
    compared so (the work between them, not ``S_i / beta``, which may dwarf the costs); the
    best is priced as written."""
    lo, up, h, t = 0, 0, 0, 0
    for j in range(row.size):
        while up < j and req_t[j, up] - C > start:
            if row[up] < np.inf:
                while t > h:
                    b = queue[t - 1]
                    if row[b] + slope * work_t[up, b] / beta <= row[up]:
                        break
                    t -= 1
                queue[t] = up
                t += 1
            up += 1
        while lo < up and ((end < np.inf and req_t[j, lo] - C > end) or need_t[j, lo] > M):
            lo += 1
        while t > h and queue[h] < lo:
            h += 1
        if t > h:
            i = queue[h]
            x = req_t[j, i] - C
            out[j] = min(out[j], row[i] + (value + slope * (x - start)))


@jit
def compute_step(v: int, row: FloatArray, out: FloatArray, req_t: FloatArray, work_t: FloatArray,
                 beta: float, capacity: FloatArray, seg_ptr: IntArray, seg_start: FloatArray,
                 seg_slope: FloatArray, seg_value: FloatArray, node_cap: FloatArray,
                 node_table: IntArray, node_tables: FloatArray, need_t: FloatArray,
                 limit: FloatArray, queue: IntArray, keys: FloatArray) -> bool:  # fmt: skip
    """``out`` = node ``v``'s labels after its compute step, from its received labels ``row``
    (``out[j] = min_i row[i] + f_v(x(i, j))`` over the ``i`` within the limit,
    ``need_t[j, i] <= limit[v]``; a node priced into tables has its extra terms, its limit
    included, in its table); ``False`` (and ``out`` all ``inf``) when no state of ``v`` is
    reached."""
    out[:] = np.inf
    reached = 0
    while reached < row.size and row[reached] == np.inf:
        reached += 1
    if reached == row.size:
        return False
    if node_table[v] >= 0:
        table_step(row, node_tables[node_table[v]], reached, out)
    else:
        M = limit[v]
        free_window(req_t, row, capacity[v], need_t, M, out, queue, keys)
        for k in range(seg_ptr[v], seg_ptr[v + 1]):
            end = seg_start[k + 1] if k + 1 < seg_ptr[v + 1] else node_cap[v]
            piece_window(req_t, work_t, row, beta, capacity[v], need_t, M, seg_start[k],
                         seg_slope[k], seg_value[k], end, out, queue)  # fmt: skip
    return True


@jit
def psg(
    work_t: FloatArray, D: FloatArray, source: int, target: int,
    capacity: FloatArray, bandwidth: FloatArray, link_src: IntArray, link_dst: IntArray,
    seg_ptr: IntArray, seg_start: FloatArray, seg_slope: FloatArray, seg_value: FloatArray,
    node_cap: FloatArray, node_table: IntArray,
    lseg_ptr: IntArray, lseg_start: FloatArray, lseg_slope: FloatArray,
    lseg_value: FloatArray, link_cap: FloatArray, link_table: IntArray,
    out_ptr: IntArray, out_links: IntArray, in_ptr: IntArray, in_links: IntArray,
    linear: IntArray, need_t: FloatArray, limit: FloatArray, node_tables: FloatArray,
    link_tables: FloatArray, beta: float, req_t: FloatArray, wanted: FloatArray,
    label: FloatArray, out: FloatArray, tail: FloatArray, queue: IntArray, keys: FloatArray,
    path: IntArray, partition: IntArray, used: IntArray, count: IntArray,
) -> float:  # fmt: skip
    """PSG: the optimal cost (``inf`` when no plan exists); the path, partition and links are
    written to ``path``, ``partition`` and ``used`` (their first ``count[0]``, ``count[0]``
    and ``count[0] - 1`` entries, from the target back; see the module docstring).

    The caller gives every array, the per-solve ones to be filled here: the requests
    ``req_t = work_t / beta`` and ``wanted = D / beta``, the labels ``label`` (``(V, W)``) and
    scratch rows. The kernel allocates nothing, so that its machine code needs no runtime (see
    :mod:`inferplan.codesign.engine.native`)."""
    V, W = capacity.size, D.size
    for j in range(W):
        wanted[j] = D[j] / beta
        for i in range(W):
            req_t[j, i] = work_t[j, i] / beta
    _fill(label, np.inf)
    label[source, 0] = 0.0
    count[0] = 0
    cost = np.inf
    for v in range(V):
        if not compute_step(v, label[v], out, req_t, work_t, beta, capacity, seg_ptr,
                            seg_start, seg_slope, seg_value, node_cap, node_table,
                            node_tables, need_t, limit, queue, keys):  # fmt: skip
            continue
        if v == target:  # the last node on any path: nothing after it leads back
            cost = out[W - 1]
            break
        for t in range(out_ptr[v], out_ptr[v + 1]):
            e = out_links[t]
            into = label[link_dst[e]]
            if link_table[e] >= 0:
                table = link_tables[link_table[e]]
                for j in range(W):
                    c = out[j] + table[j]
                    into[j] = c if c < into[j] else into[j]
            elif linear[e]:  # one piece from 0, no cap: written so that the loop vectorises
                have, price = bandwidth[e], lseg_slope[lseg_ptr[e]]
                for j in range(W):
                    d = wanted[j] - have
                    c = out[j] + price * (d if d > 0.0 else 0.0)
                    into[j] = c if c < into[j] else into[j]
            else:
                for j in range(W):
                    c = out[j] + piece_cost(max(0.0, wanted[j] - bandwidth[e]), lseg_ptr[e],
                                            lseg_ptr[e + 1], lseg_start, lseg_slope,
                                            lseg_value, link_cap[e])  # fmt: skip
                    into[j] = c if c < into[j] else into[j]
    if cost == np.inf:
        return cost
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
            if node_table[v] >= 0:
                c = row[i] + node_tables[node_table[v], i, j]
            elif need_t[j, i] > limit[v]:
                continue
            else:
                c = row[i] + piece_cost(req_t[j, i] - C, seg_ptr[v], seg_ptr[v + 1], seg_start,
                                         seg_slope, seg_value, node_cap[v])  # fmt: skip
            if c < best or chosen < 0:
                best, chosen = c, i
        j = chosen
        best, link = np.inf, -1
        for t in range(in_ptr[v], in_ptr[v + 1]):
            e = in_links[t]
            # the tail's labels after its compute step, formed again (they are not kept)
            if not compute_step(link_src[e], label[link_src[e]], tail, req_t, work_t, beta,
                                capacity, seg_ptr, seg_start, seg_slope, seg_value, node_cap,
                                node_table, node_tables, need_t, limit, queue,
                                keys):  # fmt: skip
                continue
            sigma = max(0.0, wanted[j] - bandwidth[e])
            c = tail[j] + link_cost(sigma, e, lseg_ptr, lseg_start, lseg_slope, lseg_value,
                                    link_cap, link_table, link_tables, j)  # fmt: skip
            if c < best or link < 0:
                best, link = c, e
        v = link_src[link]
        n += 1
        path[n], partition[n], used[n - 1] = v, j, link
    count[0] = n + 1
    return cost


@jit
def _fill(values: FloatArray, value: float) -> None:
    """Set every entry of the matrix ``values`` to ``value``."""
    for v in range(values.shape[0]):
        values[v, :] = value


@jit
def bottleneck_step(row: FloatArray, C: float, work_t: FloatArray, need_t: FloatArray, M: float,
                    stack: IntArray, out: FloatArray) -> bool:  # fmt: skip
    """``out[j] = min max(row[i], w(i, j) / C)`` over the ``i <= j`` within the limit,
    ``need_t[j, i] <= M`` (T*'s compute step, see the module docstring); ``False`` when no
    state is reached. The limit drops entries from the bottom of the stack: the feasible
    ``i`` only move right as ``j`` grows."""
    bot, top, c, f = 0, -1, 0, 0  # stack[c] is the first entry whose label is at least its delay
    reached = False
    for j in range(row.size):
        if row[j] < np.inf:
            reached = True
            while top >= bot and row[stack[top]] > row[j]:
                top -= 1
            top += 1
            stack[top] = j
            c = min(c, top)
        while f <= j and need_t[j, f] > M:
            f += 1
        while bot <= top and stack[bot] < f:
            bot += 1
        c = max(c, bot)
        if top < bot:
            out[j] = np.inf
            continue
        while c <= top and row[stack[c]] < work_t[j, stack[c]] / C:
            c += 1
        best = row[stack[c]] if c <= top else np.inf
        if c > bot:
            best = min(best, work_t[j, stack[c - 1]] / C)
        out[j] = best
    return reached


@jit
def throughput(
    work_t: FloatArray, D: FloatArray, source: int, target: int, link_src: IntArray,
    link_dst: IntArray, out_ptr: IntArray, out_links: IntArray, in_ptr: IntArray,
    in_links: IntArray, need_t: FloatArray, capacity: FloatArray, bandwidth: FloatArray,
    limit: FloatArray, label: FloatArray, out: FloatArray, tail: FloatArray, stack: IntArray,
    path: IntArray, partition: IntArray, count: IntArray,
) -> float:  # fmt: skip
    """T*: the least interval among the deployments within the limit (``need_t[j, i] <=
    limit[v]``, ``inf`` when none is); the path and partition are written to ``path`` and
    ``partition`` (their first ``count[0]`` entries, from the target back; see the module
    docstring). ``label`` is ``(V, W)``, filled here; the kernel allocates nothing."""
    V, W = capacity.size, D.size
    _fill(label, np.inf)
    label[source, 0] = 0.0
    count[0] = 0
    interval = np.inf
    for v in range(V):
        if not bottleneck_step(label[v], capacity[v], work_t, need_t, limit[v], stack, out):
            continue
        if v == target:  # the last node on any path: nothing after it leads back
            interval = out[W - 1]
            break
        for t in range(out_ptr[v], out_ptr[v + 1]):
            e = out_links[t]
            into = label[link_dst[e]]
            for j in range(W):
                d = D[j] / bandwidth[e]
                a = out[j] if out[j] > d else d
                into[j] = a if a < into[j] else into[j]
    n, v, j = 0, target, W - 1
    path[0], partition[0] = target, j
    while v != source:
        C = capacity[v]
        best, chosen = np.inf, -1
        for i in range(j + 1):
            if need_t[j, i] > limit[v]:
                continue
            d = max(label[v, i], work_t[j, i] / C)
            if d < best or chosen < 0:  # the first i when every delay overflows
                best, chosen = d, i
        if chosen < 0:  # no deployment within the limits: none read back (count 0)
            return interval
        j = chosen
        best, link = np.inf, -1
        for t in range(in_ptr[v], in_ptr[v + 1]):
            e = in_links[t]
            u = link_src[e]
            bottleneck_step(label[u], capacity[u], work_t, need_t, limit[u], stack,
                            tail)  # formed again  # fmt: skip
            d = max(tail[j], D[j] / bandwidth[e])
            if d < best or link < 0:
                best, link = d, e
        v = link_src[link]
        n += 1
        path[n], partition[n] = v, j
    count[0] = n + 1
    return interval
