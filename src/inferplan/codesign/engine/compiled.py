"""PSG and T* as compiled loops (numba, the optional ``fast`` extra): linear time per node.

The numpy solvers (:mod:`~inferplan.codesign.engine.psg`,
:mod:`~inferplan.codesign.engine.throughput`) compare all ``(i, j)`` pairs, ``O(N^2)`` per
node, and pay numpy's fixed cost per call on small networks. These kernels walk the nodes in
topological order once, as plain loops compiled by numba, and relax every state exactly once.
Work is read from
:attr:`~inferplan.codesign.instance.CodesignInstance.work_between` (transposed, so that the
``i`` of one ``j`` lie side by side), never formed as a difference of prefix sums:

- **PSG compute step, piecewise-linear costs** (linear, tiered, capped). For a node with
  capacity ``C`` and send count ``j``, the requested compute ``x(i, j) = w(i, j)/beta - C``
  falls as ``i`` grows, so the ``i`` whose ``x`` lies in one linear piece of the cost form a
  window, and every window end only moves right as ``j`` grows. Each window keeps a monotone
  deque of the ``i`` ordered by ``label[i] - slope * S_i / beta`` (compared through the work
  between two of them, never ``S_i / beta`` itself); its front is the window's best ``i``,
  which is then priced as written (``label[i] + value + slope * (x - start)``). ``O(K N)``
  per node for ``K`` pieces: ``O(N)`` for linear costs.
- **PSG compute step, other costs** (modules, callables): all ``(i, j)`` pairs against a table
  of costs priced beforehand by numpy, ``O(N^2)`` per node.
- **T* compute step** ``min_{i<=j} max(label[i], w(i, j)/C)``: an ``i`` is never better
  than a later ``i'`` with ``label[i'] <= label[i]`` (its delay is no smaller either), so a
  stack of increasing labels suffices; along it the labels rise and the delays fall, and the
  crossing, where the minimum lies, only moves up as ``j`` grows. ``O(N)`` per node, and
  every value is one of the candidate delays, compared and never recomputed: the labels equal
  the numpy solver's bit for bit.
- **Link step**: ``O(N)`` per link, as in the numpy solvers.

In all ``O((|V| + |E|) N)`` for piecewise-linear costs. The path is read back with the same
rules as the numpy solvers (at each node the fewest blocks received among the best, and
the earliest link in file order), by re-scanning only the ``O(N)`` states of the path's nodes.

Every array a kernel uses, its scratch rows included, is made here: the kernels allocate
nothing, so that :mod:`~inferplan.codesign.engine.native` can keep their machine code on disk,
compiled by numba once per machine, and load it without numba in every later process.
A kernel keeps no ``(V, W)`` matrix of post-compute labels: the read-back forms again the few
rows it needs (the path's nodes' in-neighbours). :func:`available` says whether numba is
installed.
"""

from __future__ import annotations

import importlib.util
import math
import weakref
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, get_args

import numpy as np

from inferplan.arrays import FloatArray, IntArray
from inferplan.codesign.engine import native
from inferplan.codesign.instance import (
    CodesignInstance,
    Topology,
    link_cost_table,
    node_cost_table,
)
from inferplan.codesign.timing.stage import FlopsOverCapacity
from inferplan.errors import InvalidArgument
from inferplan.memo import KeptFor
from inferplan.profiles.ideals import Cuts
from inferplan.profiles.profile import Profile

__all__ = [
    "ENGINES",
    "Engine",
    "KernelArrays",
    "available",
    "compiled_engine",
    "kernel_arrays",
    "psg_kernel",
    "throughput_args",
    "throughput_kernel",
]

Engine = Literal["auto", "compiled", "numpy"]
ENGINES: tuple[Engine, ...] = get_args(Engine)


# Nodes whose cost has no piecewise-linear form are priced into ``(W, W)`` tables before the
# kernel runs; beyond this many table entries in all, the numpy solver (which prices a few
# nodes at a time) is used instead.
TABLE_ENTRIES = 4_000_000

# Below this many states ``(|V| + |E|) (N + 1)`` the numpy engine solves in milliseconds to
# a few tenths of a second, no more than loading the kernels' machine code (a few hundredths)
# and far less than compiling it on a machine's first compiled solve (seconds): ``"auto"``
# runs it there, unless the kernels are loaded already. A one-off plan on a small network,
# such as one ``inferplan provision``, then starts without llvmlite or numba.
AUTO_STATES = 1_000_000


@cache
def available() -> bool:
    """Whether numba is installed (``pip install 'inferplan[fast]'``)."""
    return importlib.util.find_spec("numba") is not None


def compiled_engine(engine: Engine, inst: CodesignInstance | None = None) -> bool:
    """Whether ``engine`` asks for the compiled kernels: ``"compiled"`` always (an error
    without numba), ``"numpy"`` never, ``"auto"`` when numba is installed and either ``inst``
    has at least :data:`AUTO_STATES` states or the kernels are loaded already. Never for an
    ``inst`` whose cuts are not a chain (the ideals of a layer graph): the kernels' windows
    and stacks need the cuts in one increasing order, and the numpy engine's all-pairs step,
    ``O(K^2)`` per node for ``K`` cuts, runs instead. Never for an ``inst`` whose node time
    model gives each node its own loads (the kernels read one shared table): the numpy
    engine reads them.

    Raises
    ------
    InvalidArgument
        For an unknown engine, or ``"compiled"`` without numba.
    """
    if engine not in ENGINES:
        raise InvalidArgument(
            f"unknown engine {engine!r} (known: {', '.join(ENGINES)})", field="engine"
        )
    if engine == "numpy":
        return False
    if engine == "compiled" and not available():
        raise InvalidArgument(
            "the compiled engine needs numba: pip install 'inferplan[fast]'", field="engine"
        )
    if inst is not None and (not inst.cuts.is_chain or not inst.shared_work):
        return False
    if engine == "auto" and inst is not None and not native.loaded():
        states = (len(inst.node_ids) + inst.n_links) * inst.n_cuts
        if states < AUTO_STATES:
            return False
    return available()


@dataclass(frozen=True)
class KernelArrays:
    """An instance's network and costs in the flat arrays the kernels take, built once.

    ``psg_args`` are the arguments of :func:`kernels.psg
    <inferplan.codesign.engine.kernels.psg>` that do not change from one solve to the next, in
    their order (:func:`throughput_args` are those of :func:`kernels.throughput
    <inferplan.codesign.engine.kernels.throughput>`, which reads no costs): the work table
    (``work_t[j, i] = w(i, j)``) and activations, source and target, capacities and links;
    each node's piecewise-linear cost as pieces ``seg_ptr[v]..seg_ptr[v+1]-1`` (start, slope,
    value; see :class:`~inferplan.network.costs.Segments`) and its cap, or its row in the cost
    tables (``node_table[v] >= 0``); each link's cost in the same form, or its row in the
    link tables; each node's out- and in-links in file order (``ptr``/``links`` pairs); and
    which links are plain linear (one piece from 0 and no cap: the loop that vectorises);
    the extra terms' limit (``need_t[j, i]`` against ``limit[v]``, ``inf`` for a node priced
    into tables). ``table_nodes`` and ``table_links`` are the nodes and links priced into
    tables per solve (the per-call arrays of the kernel's frame), ``node_terms`` the table
    nodes' extra terms (memory), formed once.
    """

    table_nodes: IntArray
    table_links: IntArray
    node_terms: FloatArray | None
    psg_args: tuple[Any, ...]


_ARRAYS: weakref.WeakKeyDictionary[CodesignInstance, KernelArrays] = weakref.WeakKeyDictionary()


def kernel_arrays(inst: CodesignInstance) -> KernelArrays:
    """The kernels' arrays for ``inst`` (built once per instance)."""
    if inst in _ARRAYS:
        return _ARRAYS[inst]
    # Each node's piecewise-linear pieces (one of slope its price for a node without its own
    # cost function) or its row in the cost tables, built column-wise.
    # Nodes with extra terms beyond a limit (memory they may buy) are priced into tables too.
    n = len(inst.node_ids)
    terms = inst.terms
    pieces = inst.node_pieces
    seg_ptr, starts, slopes, values = pieces.ptr, pieces.starts, pieces.slopes, pieces.values
    # marks, not np.union1d: its np.unique imports numpy.ma, 0.02 s of a one-off command
    tabled = np.array(pieces.table, dtype=bool)
    tabled[terms.table_nodes] = True
    table_nodes = np.flatnonzero(tabled)
    node_cap = np.where(tabled, math.inf, pieces.cap)  # tables price their caps
    node_table = np.full(n, -1, dtype=np.int64)
    node_table[table_nodes] = np.arange(table_nodes.size)
    # The same for the links; a link of one piece from 0 and no cap is plain linear.
    lpieces = inst.link_pieces
    ltabled = np.array(lpieces.table, dtype=bool)
    ltabled[terms.table_links] = True
    table_links = np.flatnonzero(ltabled)
    link_table = np.full(inst.n_links, -1, dtype=np.int64)
    link_table[table_links] = np.arange(table_links.size)
    link_cap = np.where(ltabled, math.inf, lpieces.cap)
    first = np.minimum(lpieces.ptr[:-1], max(lpieces.starts.size - 1, 0))
    one_piece = (np.diff(lpieces.ptr) == 1) & ~ltabled & np.isinf(link_cap)
    if lpieces.starts.size:
        one_piece &= (lpieces.starts[first] == 0.0) & (lpieces.values[first] == 0.0)
    linear = one_piece.astype(np.int64)
    node_columns = (seg_ptr, starts, slopes, values, node_cap, node_table)
    link_columns = (lpieces.ptr, lpieces.starts, lpieces.slopes, lpieces.values, link_cap,
                    link_table)  # fmt: skip
    W = inst.n_cuts
    network = _network_args(inst)
    # The limit of the nodes outside the tables (the tables hold their own limits).
    if terms.limit is None or terms.limit_need is None:
        need_t, limit = np.zeros((W, W)), np.full(n, math.inf)
    else:
        need_t = np.ascontiguousarray(terms.limit_need.T)
        limit = np.where(tabled, math.inf, terms.limit)
    adjacency = _adjacency(inst)
    arrays = KernelArrays(
        table_nodes=table_nodes,
        table_links=table_links,
        node_terms=None if terms.empty or not table_nodes.size else terms.node(table_nodes),
        psg_args=(
            *network,
            inst.capacity,
            inst.bandwidth,
            inst.link_src,
            inst.link_dst,
            *node_columns,
            *link_columns,
            *adjacency,
            linear,
            need_t,
            limit,
        ),
    )
    _ARRAYS[inst] = arrays
    return arrays


def _network_args(inst: CodesignInstance) -> tuple[Any, ...]:
    """The work table (``work_t[j, i] = w(i, j)``), activations, source and target."""
    work_t = np.ascontiguousarray(inst.work_between.T)
    return work_t, inst.activation_bits, inst.source, inst.target


def _adjacency(inst: CodesignInstance) -> tuple[IntArray, ...]:
    return inst.out_start, inst.out_order, inst.in_start, inst.in_order


def throughput_args(inst: CodesignInstance) -> tuple[Any, ...]:
    """The arguments of :func:`kernels.throughput
    <inferplan.codesign.engine.kernels.throughput>` that do not change from one solve to the
    next (as :class:`KernelArrays`' ``psg_args``, with the memory need ``need_t[j, i]``)."""
    return (*_network_args(inst), inst.link_src, inst.link_dst, *_adjacency(inst),
            np.ascontiguousarray(inst.memory_need.T))  # fmt: skip


def fits(inst: CodesignInstance) -> bool:
    """Whether the PSG kernel takes ``inst``: its cost tables stay within
    :data:`TABLE_ENTRIES`."""
    width = inst.n_cuts
    return kernel_arrays(inst).table_nodes.size * width * width <= TABLE_ENTRIES


def psg_kernel(
    inst: CodesignInstance, beta: float
) -> tuple[float, list[int], list[int], list[int]]:
    """PSG on ``inst`` by the compiled kernel: the optimal cost (``inf`` when caps leave no
    plan) and the path, partition and links (node and link indices)."""
    arrays = kernel_arrays(inst)
    call = _frame(inst, native.kernel("psg")).call()
    node_tables, link_tables, *_, path, partition, used, count = call.arrays
    if arrays.table_nodes.size:  # priced for this beta, into the call's own arrays
        node_tables[...] = node_cost_table(inst, arrays.table_nodes, beta, arrays.node_terms)
    if arrays.table_links.size:
        link_tables[...] = link_cost_table(inst, arrays.table_links, beta)
    cost = call.run(beta)
    n = int(count[0])  # read back from the target
    used_links = used[: max(n - 1, 0)]
    return cost, path[:n][::-1].tolist(), partition[:n][::-1].tolist(), used_links[::-1].tolist()


def _shapes(inst: CodesignInstance, name: str) -> list[tuple[int, ...]]:
    """The shapes of a kernel's per-solve arrays for ``inst``."""
    V, W, E = len(inst.node_ids), inst.n_cuts, inst.n_links
    if name == "psg":  # node and link tables, req_t, wanted, label, out, tail, queue, keys,
        # path, partition, used, count
        arrays = kernel_arrays(inst)
        tables = [(arrays.table_nodes.size, W, W), (arrays.table_links.size, W)]
        return [*tables, (W, W), (W,), (V, W), (W,), (W,), (W,), (W,), (V,), (V,), (V,), (1,)]
    # capacity, bandwidth, limit, label, out, tail, stack, path, partition, count
    return [(V,), (E,), (V,), (V, W), (W,), (W,), (W,), (V,), (V,), (1,)]


# Each instance's frames (the fixed fields of its arrays, which the instance keeps alive).
_FRAMES: weakref.WeakKeyDictionary[CodesignInstance, dict[str, native.Frame]] = (
    weakref.WeakKeyDictionary()
)


def _frame(inst: CodesignInstance, kernel: native.Kernel) -> native.Frame:
    """``kernel``'s frame for ``inst`` (made once per instance; PSG's cost tables are
    per-call arrays, priced for each ``beta``)."""
    frames = _FRAMES.setdefault(inst, {})
    if kernel.name not in frames:
        fixed = kernel_arrays(inst).psg_args if kernel.name == "psg" else throughput_args(inst)
        frames[kernel.name] = kernel.frame(fixed, _shapes(inst, kernel.name))
    return frames[kernel.name]


_SHARED: KeptFor[Topology, KeptFor[Cuts, tuple[weakref.ref[Profile], native.Frame]]] = KeptFor()
"""The T* kernel's frames by network (topology) and cuts, with the profile each is of."""


def _throughput_frame(inst: CodesignInstance) -> native.Frame:
    """The T* kernel's frame for ``inst``: every argument it fixes is the network's
    (:attr:`~inferplan.codesign.instance.CodesignInstance.topology`, its source and target)
    or the profile's (the work table of its cuts, their activations and its memory need), so
    instances compiled from the same network and profile share one, made once. An instance
    whose work table is its own (another node time model's loads) has its own."""
    kernel = native.kernel("throughput")
    if not isinstance(inst.node_time, FlopsOverCapacity):
        return _frame(inst, kernel)
    by_cuts = _SHARED.get(inst.topology, "frames", KeptFor)
    profile = inst.profile

    def made() -> tuple[weakref.ref[Profile], native.Frame]:
        return weakref.ref(profile), kernel.frame(throughput_args(inst), _shapes(inst, kernel.name))

    of, frame = by_cuts.get(inst.cuts, "throughput", made)
    return frame if of() is profile else _frame(inst, kernel)


def throughput_kernel(
    inst: CodesignInstance, capacity: FloatArray, bandwidth: FloatArray, memory: FloatArray
) -> tuple[float, list[int], list[int]]:
    """T* on ``inst`` under ``capacity`` and ``bandwidth`` among the deployments that fit
    ``memory`` (bytes per node) by the compiled kernel: the least interval and the path and
    partition (node indices; none when no deployment fits)."""
    call = _throughput_frame(inst).call()
    arrays = call.arrays
    given = (capacity, bandwidth, memory)
    if call.given != list(map(id, given)):
        for own, value in zip(arrays, given, strict=False):
            np.copyto(own, value)
        # read-only arrays that own their data (an instance's own) cannot have changed
        # since: the next call with them copies nothing
        unchanged = all(not a.flags.writeable and a.base is None for a in given)
        call.given[:] = list(map(id, given)) if unchanged else []
        call.kept[:] = given if unchanged else ()
    path, partition, count = arrays[-3:]
    interval = call.run()
    n = int(count[0])  # read back from the target
    return interval, path[:n][::-1].tolist(), partition[:n][::-1].tolist()
