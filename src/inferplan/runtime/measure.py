"""Real models and inputs for the runtime, and timing a model's blocks on this machine.

:func:`build_model` builds the weights, :func:`stream_inputs` (:func:`random_inputs`, all at
once) and :func:`load_inputs` give the inputs of a run. The seconds per block of a measured profile:

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

import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from inferplan.codesign.plan import Plan
from inferplan.documents import open_regular
from inferplan.errors import InvalidArgument, InvalidFile
from inferplan.profiles.cuts import BlockSpec, Granularity
from inferplan.profiles.from_torch import load_module_factory
from inferplan.profiles.profile import Profile
from inferplan.runtime.examples import check_weights
from inferplan.runtime.split import TensorSpec, TracedModel, trace_model

__all__ = [
    "build_model",
    "load_inputs",
    "measure_blocks",
    "measure_nodes",
    "measured_profile",
    "random_inputs",
    "stream_inputs",
    "time_stages",
]

Shape = tuple[int, ...]


def build_model(spec: str, *, seed: int = 0, dtype: str = "float32") -> Any:
    """The model ``module.path:factory`` with real weights on the CPU, seeded, in ``eval()``
    mode, its floating-point weights in ``dtype``; sized first by a build on the ``meta``
    device (:func:`~inferplan.runtime.examples.check_weights`)."""
    weights = TensorSpec((), dtype).torch_dtype
    if not (weights.is_floating_point or weights.is_complex):  # Module.to refuses the rest
        raise InvalidArgument(
            f"must be a floating-point dtype for the model's weights (float32, float16, "
            f"bfloat16, float64), got {dtype!r}",
            field="dtype",
        )
    sized = load_module_factory(spec, device="meta")
    name = spec.rpartition(":")[2]
    check_weights(sum(p.numel() for p in sized.parameters()), dtype, name)
    torch.manual_seed(seed)
    model = load_module_factory(spec, device="cpu").eval()
    return model if dtype == "float32" else model.to(weights)


def load_inputs(path: str | Path, shape: Shape, *, dtype: str | None = None) -> torch.Tensor:
    """The inputs file ``path`` as a ``K x shape`` tensor.

    The file holds one tensor (read with ``torch.load(weights_only=True)``: nothing is
    unpickled) whose first dimension indexes ``K >= 1`` inputs, each of ``shape`` or of
    ``shape`` without its batch dimension of 1; ``dtype``, when given, is checked too.

    Raises
    ------
    InvalidFile
        Naming the file and what is wrong with it.
    """
    where = str(path)
    handle = open_regular(where)
    try:
        with handle:
            data = torch.load(handle, weights_only=True)
    except Exception as exc:  # torch.load raises many kinds for a file that is not a tensor
        raise InvalidFile(f"cannot load: {type(exc).__name__}: {exc}".strip(": ").splitlines()[0],
                          source=where) from None  # fmt: skip
    if not isinstance(data, torch.Tensor):
        raise InvalidFile(f"must hold one tensor, got {type(data).__name__}", source=where)
    one = tuple(data.shape[1:])
    if data.ndim < 1 or (one != shape and not (shape[0] == 1 and one == shape[1:])):
        want = "x".join(map(str, shape))
        raise InvalidFile(f"must be K inputs of shape {want} (first dimension K), got a tensor of "
                          f"shape {'x'.join(map(str, data.shape))}", source=where)  # fmt: skip
    if data.shape[0] < 1:
        raise InvalidFile("holds no inputs (first dimension 0)", source=where)
    if dtype is not None and str(data.dtype).removeprefix("torch.") != dtype:
        raise InvalidFile(f"inputs are {data.dtype}, the model takes {dtype}", source=where)
    return data.reshape(data.shape[0], *shape)


def stream_inputs(
    input_shapes: Sequence[Shape],
    count: int,
    *,
    seed: int = 0,
    dtype: str = "float32",
    input_dtypes: Sequence[str | None] = (),
) -> Iterator[tuple[torch.Tensor, ...]]:
    """``count`` seeded inputs, each made when it is asked for: normal floats, or 0s and 1s
    for integer inputs (valid ids for any embedding). The same ``seed`` gives the same
    inputs again, so a stream can be replayed instead of kept."""
    generator = torch.Generator().manual_seed(seed)
    kinds = [*input_dtypes, *[None] * len(input_shapes)]
    for _ in range(count):
        one = []
        for shape, kind in zip(input_shapes, kinds, strict=False):
            torch_dtype = TensorSpec((), kind or dtype).torch_dtype
            if torch_dtype.is_floating_point:
                one.append(torch.randn(shape, generator=generator).to(torch_dtype))
            else:
                one.append(torch.randint(0, 2, shape, generator=generator, dtype=torch_dtype))
        yield tuple(one)


def random_inputs(
    input_shapes: Sequence[Shape],
    count: int,
    *,
    seed: int = 0,
    dtype: str = "float32",
    input_dtypes: Sequence[str | None] = (),
) -> list[tuple[torch.Tensor, ...]]:
    """The inputs of :func:`stream_inputs`, all made at once."""
    return list(stream_inputs(input_shapes, count, seed=seed, dtype=dtype,
                              input_dtypes=input_dtypes))  # fmt: skip


def measure_blocks(
    traced: TracedModel,
    inputs: Sequence[torch.Tensor],
    *,
    warmup: int = 3,
    repeats: int = 10,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, ...]:
    """Median seconds of each of the profile's blocks on ``inputs`` (after ``warmup`` runs),
    on ``clock`` (wall time; ``time.thread_time``: this thread's CPU time, which the machine's
    other load does not stretch)."""
    split = traced.split(range(traced.profile.n_blocks + 1))
    return time_stages(split.stages, inputs, warmup=warmup, repeats=repeats, clock=clock)


def measure_nodes(
    traced: TracedModel,
    plan: Plan,
    inputs: Sequence[torch.Tensor],
    *,
    warmup: int = 3,
    repeats: int = 10,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, ...]:
    """Seconds of each path node's work in ``plan`` here (``0`` for a node that only
    forwards), timed as :func:`measure_blocks` times blocks: a plan cut between blocks sums
    its nodes' blocks, one cut at ideals times each node's stage as a whole (its layers are
    no blocks)."""
    if plan.cuts == "chain":
        seconds = measure_blocks(traced, inputs, warmup=warmup, repeats=repeats, clock=clock)
        done = [0, *plan.cut_indices[:-1]]
        return tuple(math.fsum(seconds[a:b]) for a, b in zip(done, plan.cut_indices, strict=True))
    stages = [s.module for s in traced.plan_stages(plan)]
    return time_stages(stages, inputs, warmup=warmup, repeats=repeats, clock=clock)


def time_stages(
    stages: Sequence[Callable[..., Any] | None],
    inputs: Sequence[torch.Tensor],
    *,
    warmup: int = 3,
    repeats: int = 10,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, ...]:
    """Median seconds of each stage of a chain (stage ``k`` takes what stage ``k - 1``
    returns, the first ``inputs``; ``None`` passes its values on, in ``0`` seconds) after
    ``warmup`` runs, on ``clock``."""
    if repeats < 1 or warmup < 0:
        raise InvalidArgument(f"need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    times: list[list[float]] = [[0.0] if s is None else [] for s in stages]
    with torch.inference_mode():
        for run in range(warmup + repeats):
            values = tuple(inputs)
            for k, stage in enumerate(stages):
                if stage is None:
                    continue
                started = clock()
                values = stage(*values)
                if run >= warmup:
                    times[k].append(clock() - started)
    return tuple(statistics.median(t) for t in times)


def measured_profile(
    spec: str,
    input_shapes: Sequence[Shape],
    *,
    blocks: BlockSpec = None,
    dtype: str = "float32",
    input_dtypes: Sequence[str | None] = (),
    seed: int = 0,
    warmup: int = 3,
    repeats: int = 10,
    granularity: Granularity = "blocks",
) -> Profile:
    """The profile of ``module.path:factory`` with the seconds of each block measured here."""
    model = build_model(spec, seed=seed, dtype=dtype)
    traced = trace_model(model, input_shapes, blocks=blocks, dtype=dtype,
                         input_dtypes=input_dtypes, name=spec.rpartition(":")[2],
                         granularity=granularity)  # fmt: skip
    (sample,) = random_inputs(input_shapes, 1, seed=seed, dtype=dtype, input_dtypes=input_dtypes)
    seconds = measure_blocks(traced, sample, warmup=warmup, repeats=repeats)
    return replace(traced.profile, seconds=seconds)
