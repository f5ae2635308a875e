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

from collections.abc import Sequence

import numpy as np

from inferplan.arrays import FloatArray, range_sums
from inferplan.profiles.profile import Profile

__all__ = ["memory_need", "need_table"]


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
