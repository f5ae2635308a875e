"""The checks of a run that need no torch, made before torch is imported.

``inferplan run`` refuses a plan for another network, a missing inputs file, an output folder
that does not exist or a model file that is not there at once, without the seconds that
importing torch takes; :func:`~inferplan.runtime.pipeline.resolve` makes the same checks
(and then those that need the model).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from inferplan.codesign.plan import Plan
from inferplan.codesign.planfile import check_plan
from inferplan.errors import InvalidArgument, InvalidFile, InvalidProfile
from inferplan.network.network import Network
from inferplan.profiles.cuts import check_factory

__all__ = ["LAUNCHER_ENV", "MAX_DILATION", "check_count", "check_run", "check_testbed_options",
           "under_launcher"]

LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")

MAX_DILATION = 1000.0
"""The most a testbed run's time may be stretched: its stages at a thousandth of their
planned capacity, a run of seconds taking hours."""


def under_launcher() -> bool:
    """Whether this process was started as a rank (by ``torchrun`` or
    :func:`~inferplan.runtime.pipeline.run_plan`)."""
    return all(name in os.environ for name in LAUNCHER_ENV)


def check_count(inferences: int | None, warmup: int) -> None:
    """Refuse a warm-up below 0 or one that leaves fewer than two of ``inferences`` (when
    known) to measure."""
    if warmup < 0:
        raise InvalidArgument(f"must be non-negative, got {warmup}", field="warmup")
    if inferences is not None and inferences < warmup + 2:
        raise InvalidArgument(
            f"{inferences} inferences leave fewer than 2 after {warmup} of warm-up: the "
            "interval needs two outputs",
            field="inferences",
        )


def check_testbed_options(emulate: bool | None, testbed: bool, dilation: float | None) -> None:
    """``--emulate``, ``--testbed`` and ``--dilation`` together (the testbed sets its own
    pacing; a dilation stretches a testbed run only, by 1 to :data:`MAX_DILATION`)."""
    if testbed and emulate:
        raise InvalidArgument("the testbed's kernel limits the links and CPUs that --emulate "
                              "would emulate: give --testbed or --emulate, not both",
                              field="emulate")  # fmt: skip
    if dilation is not None and not testbed:
        raise InvalidArgument("stretches a testbed run's time: give it with --testbed",
                              field="dilation")  # fmt: skip
    if dilation is not None and not (math.isfinite(dilation) and 1 <= dilation <= MAX_DILATION):
        raise InvalidArgument(f"must be from 1 to {MAX_DILATION:g}, got {dilation}",
                              field="dilation")  # fmt: skip


def check_run(
    *,
    network: Network,
    model: str,
    plan: Plan | None = None,
    plan_source: str | None = None,
    inferences: int | None = None,
    warmup: int = 5,
    inputs: str | None = None,
    outputs: str | None = None,
    timeout_s: float = 60.0,
    emulate: bool | None = None,
    testbed: bool = False,
    dilation: float | None = None,
    interval: float | None = None,
    open_loop: bool = False,
) -> None:
    """Raise an :class:`~inferplan.errors.InferplanError` for what is wrong with a run that can
    be seen without the model: the model's name (a ``file.py`` or module that is not there),
    the plan
    against the network (path, upgrades), the counts, the files, the timeout, the testbed's
    options (no pacing on it; a dilation from 1 to :data:`MAX_DILATION`, and only on it), and
    an open-loop feed (``interval``, the target, or the plan's) slower than the timeout."""
    try:
        check_factory(model)
    except InvalidProfile as exc:
        raise InvalidProfile(exc.message, field="model") from None
    if plan is not None:
        check_plan(network, None, plan, source=plan_source)
    # with an inputs file the count is the file's, checked against it once it is read
    check_count(inferences if inputs is None else None, warmup)
    if inputs is not None and not Path(inputs).is_file():
        raise InvalidFile("file not found", source=inputs)
    if outputs is not None and not Path(outputs).parent.is_dir():
        raise InvalidArgument("its folder does not exist", source=outputs, field="outputs")
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise InvalidArgument(f"must be positive, got {timeout_s}", field="timeout")
    check_testbed_options(emulate, testbed, dilation)
    feed = plan.target_interval if plan is not None else interval
    if open_loop and feed is not None and not feed * (dilation or 1.0) < timeout_s:
        raise InvalidArgument(
            f"feeds one input every {feed * (dilation or 1.0):.3g} s, but a stage waits "
            f"{timeout_s:g} s for its input (--timeout): give a higher throughput or a longer "
            "timeout", field="rate")  # fmt: skip
