"""A serving plan's schedule replayed on given arrivals: what a finite run should measure.

The planner's TTFT and TPOT (:func:`~inferplan.codesign.serving.planner.predictions`) are
steady-state means at a rate. A finite run of ``K`` requests is one sample of the arrivals:
its requests cluster and thin out, it starts empty and drains, and with a few dozen requests
its means differ from the steady state's by more than 10 %. :func:`replay_run` plays the
policy the planner models (docs/serving.md) on the run's own arrival times and classes, with
every decode step taking the plan's ``D`` and every class-``k`` prefill its ``T_k``:

- a waiting request's prefill goes first whenever fewer than ``batch`` sequences are in
  flight; its first token comes at the prefill's end and the sequence joins the batch;
- otherwise, with sequences in flight, one decode step gives each of them a token; a sequence
  leaves when it has its output tokens;
- otherwise the server idles until the next arrival.

It needs no queueing approximation: the times are those the plan would give these requests.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from inferplan.codesign.serving.workload import Workload
from inferplan.errors import InvalidArgument

__all__ = ["ReplayedRun", "replay_run"]


@dataclass(frozen=True)
class ReplayedRun:
    """The replayed run: per request its first token's and last token's time (seconds from
    the first arrival), and the means a run reports (``tpot`` over output tokens after each
    request's first; ``tokens_per_s`` over the span from the first arrival to the last
    token); ``ttft_median``, the median over the requests of the time to the first token."""

    first_token: tuple[float, ...]
    last_token: tuple[float, ...]
    ttft: float
    tpot: float
    tokens_per_s: float
    prefill_busy: float
    ttft_median: float = math.nan

    def to_dict(self) -> dict[str, float]:
        """The means (and the TTFT's median) as plain data."""
        return {"ttft": self.ttft, "ttft_median": self.ttft_median, "tpot": self.tpot,
                "tokens_per_s": self.tokens_per_s, "prefill_busy": self.prefill_busy}  # fmt: skip


def replay_run(workload: Workload, batch: int, decode: float, prefill: Sequence[float],
               arrivals: Sequence[tuple[float, int]]) -> ReplayedRun:  # fmt: skip
    """Replay the plan's schedule (decode step ``decode`` s, class-``k`` prefill
    ``prefill[k]`` s, at most ``batch`` sequences in flight) on ``arrivals``, ``(seconds,
    class)`` in order of time.

    Examples
    --------
    Two requests of 3 output tokens, the second arriving during the first's decode:

    >>> from inferplan.codesign.serving import RequestClass, Workload
    >>> work = Workload(1.0, (RequestClass(4, 3, 1.0),))
    >>> run = replay_run(work, 2, 0.1, [0.5], [(0.0, 0), (0.55, 0)])
    >>> [round(t, 9) for t in run.first_token], [round(t, 9) for t in run.last_token]
    ([0.5, 1.1], [1.2, 1.3])
    >>> round(run.tpot, 4), round(run.ttft, 4), round(run.ttft_median, 4)
    (0.225, 0.525, 0.525)
    """
    if batch < 1:
        raise InvalidArgument(f"must be at least 1, got {batch}", field="batch")
    if not arrivals:
        raise InvalidArgument("a run has at least one request", field="arrivals")
    if any(b[0] < a[0] for a, b in itertools.pairwise(arrivals)):
        raise InvalidArgument("must be in order of time", field="arrivals")
    outputs = [workload.classes[k].output_tokens for _, k in arrivals]
    n = len(arrivals)
    first = [math.nan] * n
    last = [math.nan] * n
    left = [0] * n
    active: list[int] = []
    now, waiting, busy = arrivals[0][0], 0, 0.0
    while waiting < n or active:
        if waiting < n and arrivals[waiting][0] <= now and len(active) < batch:
            i = waiting
            waiting += 1
            now += prefill[arrivals[i][1]]
            busy += prefill[arrivals[i][1]]
            first[i] = last[i] = now
            left[i] = outputs[i] - 1
            if left[i] > 0:
                active.append(i)
        elif active:
            now += decode
            for i in active:
                left[i] -= 1
                last[i] = now
            active = [i for i in active if left[i] > 0]
        else:
            now = arrivals[waiting][0]
    start = arrivals[0][0]
    gaps = sum(o - 1 for o in outputs)
    span = max(last) - start
    return ReplayedRun(
        tuple(t - start for t in first), tuple(t - start for t in last),
        math.fsum(f - a for f, (a, _) in zip(first, arrivals, strict=True)) / n,
        math.fsum(b - f for f, b in zip(first, last, strict=True)) / gaps if gaps else math.nan,
        sum(outputs) / span if span > 0 else math.nan, busy / span if span > 0 else math.nan,
        statistics.median(f - a for f, (a, _) in zip(first, arrivals, strict=True)),
    )  # fmt: skip
