"""Measured stage times by node: seconds per block measured on each node.

A node measured to take ``t_v(k)`` seconds for block ``k`` on its capacity ``C_v`` (as the
network gives it) runs blocks ``a+1..b`` in ``t_v(a+1) + ... + t_v(b)`` seconds: its load is
that sum times ``C_v``, so that a node that buys ``x`` more runs them ``C_v / (C_v + x)``
times as long (the papers' scaling of time with capacity). Nodes without measurements keep
the FLOPs over their capacity.

>>> import inferplan
>>> from inferplan.codesign import compile_instance, throughput_optimal
>>> net, mlp = inferplan.load_network("examples/network.json"), inferplan.mlp(64, 3)
>>> slow = MeasuredBlocks.of({"a1": [1.0, 1.0, 1.0]})  # one second a block on node a1
>>> inst = compile_instance(net, mlp, node_time=slow)
>>> inst.work(0, 3, inst.node_ids.index("a1")) / 30e9  # its capacity in the file, 30e9
3.0
>>> throughput_optimal(inst).path  # a1 is left out
('s', 'a2', 'm1', 't')
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from inferplan.arrays import FloatArray, range_sums
from inferplan.errors import InvalidArgument
from inferplan.profiles.ideals import Cuts

__all__ = ["MeasuredBlocks"]


@dataclass(frozen=True)
class MeasuredBlocks:
    """Seconds per block measured on some nodes (by id), the FLOPs over capacity elsewhere:
    a :class:`~inferplan.codesign.timing.stage.PerNodeTimeModel`. Build it with :meth:`of`."""

    seconds: tuple[tuple[str, tuple[float, ...]], ...]

    @classmethod
    def of(cls, seconds: Mapping[str, Sequence[float]]) -> MeasuredBlocks:
        """From ``{node id: seconds of each block}``; each time finite and non-negative.

        Raises
        ------
        InvalidArgument
            For a time that is not a finite non-negative number (its field names the node).
        """
        rows = []
        for node, times in seconds.items():
            for k, t in enumerate(times):
                if isinstance(t, bool) or not (isinstance(t, int | float) and math.isfinite(t)
                                               and t >= 0):  # fmt: skip
                    raise InvalidArgument(f"block {k + 1}'s time must be a finite number of "
                                          f"seconds >= 0, got {t!r}", field=node)  # fmt: skip
            rows.append((str(node), tuple(float(t) for t in times)))
        return cls(tuple(rows))

    @property
    def additive(self) -> bool:
        """Never: the loads differ by node."""
        return False

    def node_work_table(self, cuts: Cuts, nodes: Sequence[str], capacity: FloatArray) -> FloatArray:
        """Each node's loads: its measured seconds times its capacity, or the FLOPs.

        Raises
        ------
        InvalidArgument
            For cuts at a layer graph's ideals, a node whose count of times is not the
            model's blocks, or a measured node whose capacity is not positive and finite.
        """
        if cuts.kind != "chain":
            raise InvalidArgument("measured block times price a chain of blocks; the cuts are "
                                  "a layer graph's ideals (give cuts='chain')",
                                  field="node_time")  # fmt: skip
        given = dict(self.seconds)
        table = np.repeat(cuts.work_between[None], len(nodes), axis=0)
        for v, node in enumerate(nodes):
            times = given.get(node)
            if times is None:
                continue
            if len(times) != len(cuts.units):
                raise InvalidArgument(f"{len(times)} block times given, the model has "
                                      f"{len(cuts.units)} blocks", field=node)  # fmt: skip
            have = float(capacity[v])
            if not (0 < have < math.inf):
                raise InvalidArgument(f"a node with measured times needs a positive finite "
                                      f"capacity (the one they were measured at), got {have:g}",
                                      field=node)  # fmt: skip
            table[v] = range_sums(times) * have
        return table
