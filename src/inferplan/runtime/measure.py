"""Timing a model's blocks on this machine: the seconds per block of a measured profile.

Each block runs as its own stage (:mod:`inferplan.runtime.split`) on a sample input, after a
warm-up, several times; a block's time is the median of its runs. Dividing its FLOPs by it
gives the machine's effective FLOP/s on that block.

Examples
--------
>>> import torch
>>> from inferplan.runtime.split import trace_model
>>> net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
>>> traced = trace_model(net, [(1, 64)])
>>> seconds = measure_blocks(traced, (torch.randn(1, 64),), repeats=3)
>>> len(seconds) == traced.profile.n_blocks and all(s > 0 for s in seconds)
True
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch

from inferplan.errors import InvalidArgument
from inferplan.runtime.split import TracedModel

__all__ = ["measure_blocks"]


def measure_blocks(
    traced: TracedModel, inputs: Sequence[torch.Tensor], *, warmup: int = 3, repeats: int = 10
) -> tuple[float, ...]:
    """Median seconds of each of the profile's blocks on ``inputs`` (after ``warmup`` runs)."""
    if repeats < 1 or warmup < 0:
        raise InvalidArgument(f"need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    split = traced.split(range(traced.profile.n_blocks + 1))
    times: list[list[float]] = [[] for _ in split.stages]
    with torch.inference_mode():
        for run in range(warmup + repeats):
            values = tuple(inputs)
            for k, stage in enumerate(split.stages):
                started = time.perf_counter()
                values = stage(*values)
                if run >= warmup:
                    times[k].append(time.perf_counter() - started)
    return tuple(statistics.median(t) for t in times)
