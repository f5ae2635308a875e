"""How long a node takes: the one seam every planner takes its node time models from.

- :mod:`.stage`: a stage of the co-design planners, a range of the model's cuts on a node
  (PSG, T*, the MILPs, PFP, PWF, the latency bounds, the services and flow planners):
  :class:`~.stage.NodeTimeModel` (one load table every node shares; the default,
  :data:`~.stage.FLOPS_OVER_CAPACITY`, is FLOPs over capacity) and
  :class:`~.stage.PerNodeTimeModel` (a table per node);
- :mod:`.measured`: :class:`~.measured.MeasuredBlocks`, seconds per block measured on each
  node, a per-node model;
- :mod:`.step`: a step of the serving planner, by batch: :class:`~.step.StepTimeModel`,
  :class:`~.step.Roofline` (the default) and :class:`~.step.MeasuredTable` (seconds per
  layer measured by batch on a node type).

A new model is one module here and its tests.
"""

from __future__ import annotations

from inferplan.codesign.timing.measured import MeasuredBlocks
from inferplan.codesign.timing.stage import (
    FLOPS_OVER_CAPACITY,
    FlopsOverCapacity,
    NodeTimeModel,
    PerNodeTimeModel,
)
from inferplan.codesign.timing.step import MeasuredTable, Roofline, StepTimeModel, StepWork

__all__ = [
    "FLOPS_OVER_CAPACITY",
    "FlopsOverCapacity",
    "MeasuredBlocks",
    "MeasuredTable",
    "NodeTimeModel",
    "PerNodeTimeModel",
    "Roofline",
    "StepTimeModel",
    "StepWork",
]
