"""The verdict that emulation cannot hold a plan: flipped by the data on either side of the
planned time and of the share of late inferences."""

from __future__ import annotations

import statistics

from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.runtime.emulate import OVERRUN_SHARE, overrun


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
