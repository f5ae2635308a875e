"""The memory a node needs to run a range of blocks: the one place this formula is written.

A node running blocks ``i+1..j`` (``i < j``) holds

    need(i, j) = R_(i+1) + ... + R_j  +  max_(i < n <= j) (D_(n-1) + D_n) / 8

bytes: every block's resident bytes ``R_n`` (its parameters at ``bytes_per_param`` bytes each
and the state it keeps between inferences, a decoder's KV cache: :attr:`Profile.resident_bytes
<inferplan.profiles.profile.Profile.resident_bytes>`), and the largest working set of one block,
its input and output activations side by side. A node that only forwards (``i = j``) holds the
activation it relays, ``D_i / 8``. Not counted: the framework's own memory (the interpreter,
libraries, allocator slack), activations a block keeps inside itself beyond its input and
output (a residual branch's copy, attention scores), several inferences in flight at once, and
optimiser state (inference only). The sums are rounded once (:func:`~inferplan.arrays.range_sums`),
so ``need`` is non-increasing in ``i`` and non-decreasing in ``j``, exactly, in floating point:
a limit on it is a window of ``i`` that only moves right as ``j`` grows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from inferplan.arrays import FloatArray, exact_differences, range_sums, ratio, scaled_exactly
from inferplan.profiles.ideals import Cuts
from inferplan.profiles.profile import Profile

__all__ = [
    "graph_layer_terms",
    "graph_memory_need",
    "graph_most_need",
    "graph_pair_need",
    "memory_need",
    "need_table",
]


def memory_need(profile: Profile) -> FloatArray:
    """``need[i, j]`` in bytes for ``0 <= i <= j <= N`` (``inf`` below the diagonal): see the
    module docstring.

    Examples
    --------
    >>> p = Profile("tiny", flops=(1.0, 1.0), activation_bits=(80.0, 160.0, 8.0),
    ...             params=(10, 20))
    >>> need = memory_need(p)
    >>> float(need[0, 2]), float(need[1, 2]), float(need[1, 1])  # 4 bytes per parameter
    (150.0, 101.0, 20.0)
    """
    return need_table(profile.resident_bytes, profile.activation_bits)


def need_table(resident_bytes: Sequence[float], activation_bits: Sequence[float]) -> FloatArray:
    """:func:`memory_need` of blocks holding ``resident_bytes`` each, with ``activation_bits``
    ``D_0..D_N`` (the device-edge model's layers too: their parameter bits / 8 and inputs
    ``I_1..I_{N+1}``)."""
    resident = range_sums(resident_bytes)
    D = np.asarray(activation_bits, dtype=np.float64)
    working = (D[:-1] + D[1:]) / 8.0  # block n's input and output, n = 1..N
    W = D.size
    largest = np.zeros((W, W))
    for i in range(W - 1):  # the largest working set of blocks i+1..j, for every j > i
        largest[i, i + 1 :] = np.maximum.accumulate(working[i:])
    need = resident + largest
    diagonal = np.arange(W)
    need[diagonal, diagonal] = D / 8.0
    return need


def graph_memory_need(profile: Profile, cuts: Cuts) -> FloatArray:
    """``need[i, j]`` in bytes between two ideals ``i ⊆ j`` of ``profile``'s layer graph
    (``cuts``, :func:`~inferplan.profiles.ideals.graph_cuts`; ``inf`` where ``i`` is not
    inside ``j``): the formula of the module docstring with the layers of ``j`` outside ``i``
    for the blocks, a layer's working set being the tensors it reads and its output side by
    side. A node that only forwards holds the boundary of ``i``. On a path graph this is
    :func:`memory_need` of its blocks, entry for entry.
    """
    inside = cuts.subset  # refuses past the cuts the tables of pairs hold
    members = cuts.members
    assert members is not None
    exact, unit, working = graph_layer_terms(profile, cuts, range(cuts.n_cuts))
    need = exact_differences(exact, unit)
    largest = np.zeros_like(need)
    unset = np.ones(need.shape, dtype=bool)
    for x in sorted(range(members.shape[1]), key=lambda k: -working[k]):
        fresh = unset & np.outer(~members[:, x], members[:, x])
        largest[fresh] = working[x]
        unset &= ~fresh
    need += largest
    diagonal = np.arange(cuts.n_cuts)
    need[diagonal, diagonal] = cuts.bits / 8.0
    need[~inside] = np.inf
    return need


def graph_pair_need(profile: Profile, cuts: Cuts, i: int, j: int) -> float:
    """One entry of :func:`graph_memory_need`, formed without the table."""
    members = cuts.members
    assert members is not None
    if i == j:
        return float(cuts.bits[i] / 8.0)
    fresh = members[j] & ~members[i]
    if bool((members[i] & ~members[j]).any()):
        return math.inf
    (low, high), unit, working = graph_layer_terms(profile, cuts, (i, j))
    largest = max((working[x] for x in np.flatnonzero(fresh).tolist()), default=0.0)
    return ratio(high - low, unit) + largest


def graph_most_need(profile: Profile, cuts: Cuts) -> float:
    """An upper bound of every entry of :func:`graph_memory_need`, formed without the table:
    the bytes of every parameter with the largest working set of a layer, or the largest
    boundary a node forwards. A node with at least this memory never runs out."""
    (everything,), unit, working = graph_layer_terms(profile, cuts, (cuts.last,))
    return max(ratio(everything, unit) + max(working, default=0.0), float(cuts.bits.max()) / 8.0)


def graph_layer_terms(
    profile: Profile, cuts: Cuts, chosen: Sequence[int]
) -> tuple[list[int], int, list[float]]:
    """The parameter bytes of the ``chosen`` ideals as exact multiples of ``unit``, and each
    layer's working set (bytes; the layers in the cuts' order)."""
    graph = profile.graph
    assert graph is not None and cuts.members is not None and cuts.kind == "graph"
    order = graph.order
    scaled, unit = scaled_exactly([profile.bytes_per_param * graph.params[v] for v in order])
    held = cuts.members[list(chosen)].astype(object) @ np.array(scaled, dtype=object)
    read = {v: [graph.input_bits] * (v in graph.input_readers) for v in order}
    for v in order:
        read[v] += [graph.output_bits[u] for u in graph.predecessors[v]]
    working = [math.fsum([*read[v], graph.output_bits[v]]) / 8.0 for v in order]
    return [int(x) for x in held], unit, working
