"""Stage time models: how long a node takes to run a range of the model's cuts.

A stage is a range of the model, the units of cut ``j`` outside cut ``i`` (blocks
``a+1..b`` on a chain, ``(a, b]``), run on node ``v``. Every planner (PSG, T*, PFP, PWF, the
MILPs, the latency bounds, the services planners) prices it through one number, its
**load** ``w(i, j)``: the stage takes ``w(i, j) / (C_v + x)`` seconds per inference on a node
of capacity ``C_v`` that bought ``x`` more. The instance compiles the load table once from
its node time model (:attr:`~inferplan.codesign.instance.CodesignInstance.node_time`) and
the planners read :attr:`~inferplan.codesign.instance.CodesignInstance.node_loads` (and
:meth:`~inferplan.codesign.instance.CodesignInstance.work`), never the profile's FLOPs.

A :class:`NodeTimeModel` gives every node the same load table; a :class:`PerNodeTimeModel`
gives each node its own, ``w_v(i, j)`` (a measured table per node type, such as
:class:`~inferplan.codesign.timing.measured.MeasuredBlocks`): the stage then takes
``w_v(i, j) / (C_v + x)`` seconds. The planners that read per-node loads are PSG (the numpy
engine; the compiled kernels take one shared table, so PSG and T* run on the numpy engine
then), T*, the MILP, PFP, PWF, the latency bounds and the least-latency deployment; the
others (the services and flow planners, the MILP under a latency bound) refuse such a model
in one line.

The default, :data:`FLOPS_OVER_CAPACITY`, is the papers' model: the load is the stage's FLOPs
and the capacity FLOP/s (docs/model.md). A new model is one module that implements
:class:`NodeTimeModel`, for instance

- a measured throughput table by blocks held: ``t(a, b)`` seconds measured on a node of
  capacity ``C_ref`` gives the load ``t(a, b) * C_ref``;
- a roofline: FLOP/s ``F`` and memory bandwidth ``M`` by phase and batch give
  ``max(flops(a, b) / F, bytes(a, b) / M)`` seconds, the load that times ``F``.

The load must be ``inf`` where cut ``i`` is not inside cut ``j`` (no stage does that), ``0``
on the diagonal, finite and non-negative elsewhere.

>>> import inferplan
>>> from inferplan.codesign import compile_instance
>>> inst = compile_instance(inferplan.load_network("examples/network.json"), inferplan.vgg16())
>>> inst.node_time is FLOPS_OVER_CAPACITY
True
>>> inst.work(0, inst.last_cut) == inferplan.vgg16().total_flops
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from inferplan.arrays import FloatArray
from inferplan.profiles.ideals import Cuts

__all__ = ["FLOPS_OVER_CAPACITY", "FlopsOverCapacity", "NodeTimeModel", "PerNodeTimeModel"]


@runtime_checkable
class NodeTimeModel(Protocol):
    """How long a stage takes on a node: its load, in units of the nodes' capacity.

    A stage of load ``w`` on a node of capacity ``C`` takes ``w / C`` seconds per inference.
    """

    @property
    def additive(self) -> bool:
        """Whether the load of cuts ``(i, j]`` is the profile's FLOPs of cut ``j`` less cut
        ``i``'s, the same on every node: the lattice engine
        (:mod:`~inferplan.codesign.engine.lattice`) relies on it and runs only then."""
        ...

    def work_table(self, cuts: Cuts) -> FloatArray:
        """The load ``w(i, j)`` of every pair of cuts, shape ``(K, K)`` (``inf`` where cut
        ``i`` is not inside cut ``j``)."""
        ...

    def work(self, cuts: Cuts, i: int, j: int) -> float:
        """One entry of :meth:`work_table`, formed without the table (equal to it)."""
        ...


@runtime_checkable
class PerNodeTimeModel(Protocol):
    """How long a stage takes on each node: a load table per node, in units of its capacity.

    A stage of load ``w_v`` on node ``v`` of capacity ``C_v`` takes ``w_v / C_v`` seconds per
    inference (``w_v / (C_v + x)`` once ``x`` more is bought).
    """

    @property
    def additive(self) -> bool:
        """As :attr:`NodeTimeModel.additive` (``False`` for loads that differ by node)."""
        ...

    def node_work_table(self, cuts: Cuts, nodes: Sequence[str], capacity: FloatArray) -> FloatArray:
        """``w_v(i, j)`` of each of ``nodes`` (by id), shape ``(V, K, K)``, ``inf`` where cut
        ``i`` is not inside cut ``j``; ``capacity`` is each node's as the network gives it
        (what a time measured on the node is measured at)."""
        ...


@dataclass(frozen=True)
class FlopsOverCapacity:
    """The papers' node time: a stage's FLOPs over the node's capacity in FLOP/s, the FLOPs
    of each range summed exactly and rounded once (:attr:`Cuts.work_between
    <inferplan.profiles.ideals.Cuts.work_between>`)."""

    @property
    def additive(self) -> bool:
        """Always: the load is the FLOPs between two cuts."""
        return True

    def work_table(self, cuts: Cuts) -> FloatArray:
        """``w(i, j)``, the FLOPs of cut ``j`` outside cut ``i``."""
        return cuts.work_between

    def work(self, cuts: Cuts, i: int, j: int) -> float:
        """One entry of :meth:`work_table`."""
        return cuts.work(i, j)


FLOPS_OVER_CAPACITY = FlopsOverCapacity()
"""The default node time model of every instance."""
