"""Serving LLMs: requests of tokens, prefill and decode, the KV cache, TTFT/TPOT and the GPUs
to buy (docs/serving.md). How long a node takes for a step (the roofline, measured tables by
batch) is the node time seam's, :mod:`inferplan.codesign.timing.step`; its names are exported
here too."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inferplan.lazy import export_lazily

if TYPE_CHECKING:
    from inferplan.codesign.serving.catalog import Catalog, GpuType, Hardware
    from inferplan.codesign.serving.decoder import Decoder
    from inferplan.codesign.serving.gpu_mix import (
        GpuMix,
        GpuMixProblem,
        ProfiledGpu,
        solve_gpu_mix,
        tensor_parallel,
    )
    from inferplan.codesign.serving.melange_file import load_melange
    from inferplan.codesign.serving.planner import (
        DEFAULT_BATCHES,
        OBJECTIVES,
        ReplicaPlan,
        ServingPlan,
        ServingStage,
        network_hardware,
        plan_serving,
    )
    from inferplan.codesign.serving.workload import RequestClass, Workload
    from inferplan.codesign.timing.step import MeasuredTable, Roofline, StepTimeModel, StepWork

__all__ = [
    "DEFAULT_BATCHES",
    "OBJECTIVES",
    "Catalog",
    "Decoder",
    "GpuMix",
    "GpuMixProblem",
    "GpuType",
    "Hardware",
    "MeasuredTable",
    "ProfiledGpu",
    "ReplicaPlan",
    "RequestClass",
    "Roofline",
    "ServingPlan",
    "ServingStage",
    "StepTimeModel",
    "StepWork",
    "Workload",
    "load_melange",
    "network_hardware",
    "plan_serving",
    "solve_gpu_mix",
    "tensor_parallel",
]

export_lazily(
    __name__,
    {
        "inferplan.codesign.serving.catalog": ("Catalog", "GpuType", "Hardware"),
        "inferplan.codesign.serving.decoder": ("Decoder",),
        "inferplan.codesign.serving.gpu_mix": (
            "GpuMix",
            "GpuMixProblem",
            "ProfiledGpu",
            "solve_gpu_mix",
            "tensor_parallel",
        ),
        "inferplan.codesign.serving.melange_file": ("load_melange",),
        "inferplan.codesign.serving.planner": (
            "DEFAULT_BATCHES",
            "OBJECTIVES",
            "ReplicaPlan",
            "ServingPlan",
            "ServingStage",
            "network_hardware",
            "plan_serving",
        ),
        "inferplan.codesign.serving.workload": ("RequestClass", "Workload"),
        "inferplan.codesign.timing.step": (
            "MeasuredTable",
            "Roofline",
            "StepTimeModel",
            "StepWork",
        ),
    },
)
