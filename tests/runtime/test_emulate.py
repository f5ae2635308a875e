"""The verdicts on a run: that emulation cannot hold a plan, flipped by the data on either
side of the planned time and of the share of late inferences; and that its inferences queued,
flipped by latencies on either side of the idle pipeline's."""

from __future__ import annotations

import statistics

from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.runtime.emulate import OVERRUN_SHARE, QUEUE_SHARE, Queueing, overrun


@settings(max_examples=200, deadline=None)
@given(
    planned=st.floats(1e-6, 1.0),
    times=st.lists(st.floats(0.0, 2.0), min_size=1, max_size=60),
)
def test_the_verdict_is_the_share_of_inferences_over_their_planned_time(planned, times):
    late = [t for t in times if t > planned]
    verdict = overrun(planned, times)
    if len(late) > OVERRUN_SHARE * len(times):  # counted here, not by the code under test
        assert verdict is not None
        assert verdict.share == len(late) / len(times)
        assert verdict.real_s == statistics.median(times) and verdict.planned_s == planned
    else:
        assert verdict is None


def test_the_verdict_flips_at_the_planned_time_and_at_the_share():
    planned = 0.001
    assert overrun(planned, [planned] * 20) is None  # exactly on time is on time
    assert overrun(planned, [planned * 1.0001] * 20) is not None
    on_time, late = [0.0005] * 95, [0.002] * 5  # 5 of 100 late: a few late wake-ups
    assert overrun(planned, on_time + late) is None
    assert overrun(planned, on_time[1:] + late + [0.002]) is not None  # 6 of 100
    assert overrun(planned, []) is None


def test_a_full_pipeline_is_said_to_queue_only_when_its_latency_says_so():
    # five stages of 20 ms: the idle pipeline's latency is 100 ms, the interval 20 ms
    idle, interval = 0.1, 0.02
    full = Queueing(latency_s=0.12, idle_s=idle, interval_s=interval, in_flight=6.0,
                    predicted_s=0.098)  # fmt: skip
    said = full.says()
    assert full.queued
    assert said.startswith("the pipeline was kept full, so inferences queued: 6 in flight x "
                           "20 ms interval = 120 ms (Little's law; measured 120 ms)")  # fmt: skip
    assert "against 100 ms through the idle pipeline" in said and "--rate" in said
    assert "98 ms" in said  # the plan's latency, to compare with
    # the same full pipeline whose inferences waited less than half an interval in all
    calm = Queueing(latency_s=idle + 0.99 * QUEUE_SHARE * interval, idle_s=idle,
                    interval_s=interval, in_flight=5.0, predicted_s=0.098)  # fmt: skip
    assert not calm.queued
    assert calm.says().startswith("no inference queued although the pipeline was kept full")
    assert "queued:" not in calm.says() and "Little" not in calm.says()
    edge = Queueing(latency_s=idle + 1.01 * QUEUE_SHARE * interval, idle_s=idle,
                    interval_s=interval, in_flight=5.0, predicted_s=0.098)  # fmt: skip
    assert edge.queued


def test_an_open_loop_run_is_said_to_queue_when_a_stage_falls_behind_the_feed():
    on_time = Queueing(latency_s=0.101, idle_s=0.1, interval_s=0.03, in_flight=3.4,
                       predicted_s=0.1, feed_s=0.03)  # fmt: skip
    assert not on_time.queued
    assert on_time.says() == (
        "fed at the plan's throughput, no inference queued: the latency "
        "101 ms is the idle pipeline's 100 ms (the plan's 100 ms)"
    )
    behind = Queueing(latency_s=0.4, idle_s=0.1, interval_s=0.035, in_flight=11.0,
                      predicted_s=0.1, feed_s=0.03)  # fmt: skip
    assert behind.queued
    assert behind.says().startswith("fed at the plan's throughput, inferences still queued: 11 "
                                    "in flight, latency 400 ms against 100 ms")  # fmt: skip
    assert "slower than the 30 ms between inputs" in behind.says()
    assert "--rate" not in behind.says()
