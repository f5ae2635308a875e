"""The plan's schedule replayed on a run's arrivals: hand-computed runs, runs whose requests
never meet (every TTFT a prefill, every TPOT a decode step), and on random runs the bounds
and the accounting any schedule of the policy obeys."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.codesign.serving import RequestClass, Workload
from inferplan.codesign.serving.replay import replay_run
from inferplan.errors import InvalidArgument

WORK = Workload(1.0, (RequestClass(8, 3, 0.5), RequestClass(32, 5, 0.5)))


def test_two_requests_by_hand():
    # 0: prefill [0, 0.5]; step to 0.6; 1 (arrived 0.55) prefill [0.6, 1.1];
    # steps to 1.2 (0 done: 3 tokens) and 1.3 (1 done)
    work = Workload(1.0, (RequestClass(4, 3, 1.0),))
    run = replay_run(work, 2, 0.1, [0.5], [(0.0, 0), (0.55, 0)])
    assert run.first_token == pytest.approx((0.5, 1.1))
    assert run.last_token == pytest.approx((1.2, 1.3))
    assert run.ttft == pytest.approx((0.5 + 0.55) / 2)
    assert run.tpot == pytest.approx((0.7 + 0.2) / 4)
    assert run.tokens_per_s == pytest.approx(6 / 1.3)
    assert run.prefill_busy == pytest.approx(1.0 / 1.3)


def test_a_full_batch_makes_an_arrival_wait_for_a_sequence_to_leave():
    work = Workload(1.0, (RequestClass(4, 3, 1.0),))
    # batch 1: the second request waits for the first's two decode steps
    run = replay_run(work, 1, 0.1, [0.5], [(0.0, 0), (0.1, 0)])
    assert run.first_token == pytest.approx((0.5, 1.2))
    assert run.last_token == pytest.approx((0.7, 1.4))


def test_the_median_ttft_is_the_middle_requests_wait():
    work = Workload(1.0, (RequestClass(4, 3, 1.0),))
    # batch 1, three requests at once: first tokens at 0.5, 1.2 and 1.9 (a prefill and two
    # steps each), so waits of 0.5, 1.2 and 1.9, the mean the same as the median
    run = replay_run(work, 1, 0.1, [0.5], [(0.0, 0), (0.0, 0), (0.0, 0)])
    assert run.ttft_median == pytest.approx(1.2) and run.ttft == pytest.approx(1.2)
    # a fourth request long after: waits 0.5, 1.2, 1.9, 0.5, median (0.5 + 1.2) / 2
    run = replay_run(work, 1, 0.1, [0.5], [(0.0, 0), (0.0, 0), (0.0, 0), (10.0, 0)])
    assert run.ttft_median == pytest.approx(0.85)
    assert run.ttft == pytest.approx((0.5 + 1.2 + 1.9 + 0.5) / 4)
    assert run.to_dict()["ttft_median"] == run.ttft_median


def test_requests_far_apart_take_a_prefill_and_a_step_per_token():
    arrivals = [(10.0 * i, i % 2) for i in range(6)]
    run = replay_run(WORK, 4, 0.02, [0.3, 0.7], arrivals)
    assert run.ttft == pytest.approx((0.3 + 0.7) / 2)
    assert run.tpot == pytest.approx(0.02)
    for (a, k), f, last in zip(arrivals, run.first_token, run.last_token, strict=True):
        assert f == pytest.approx(a + (0.3, 0.7)[k])
        assert last - f == pytest.approx((WORK.classes[k].output_tokens - 1) * 0.02)


runs = st.lists(st.tuples(st.floats(0, 5), st.integers(0, 1)), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(runs, st.integers(1, 4), st.floats(1e-3, 0.2), st.floats(1e-3, 1), st.floats(1e-3, 1))
def test_any_replay_keeps_the_bounds_of_the_policy(arrivals, batch, decode, t0, t1):
    arrivals = sorted(arrivals)
    prefill = [t0, t1]
    run = replay_run(WORK, batch, decode, prefill, arrivals)
    start = arrivals[0][0]
    outs = [WORK.classes[k].output_tokens for _, k in arrivals]
    for (a, k), f, last, o in zip(arrivals, run.first_token, run.last_token, outs, strict=True):
        assert f >= a - start + prefill[k] - 1e-9  # no first token before its prefill
        assert last - f >= (o - 1) * decode - 1e-9  # nor a token faster than a step
    # FIFO: first tokens in order of arrival
    assert all(x <= y + 1e-12 for x, y in zip(run.first_token, run.first_token[1:], strict=False))
    span = max(run.last_token)
    # the server does one thing at a time: the span holds every prefill and at least the
    # decode steps the tokens need in steps of <= batch sequences, and the longest's
    busy = math.fsum(prefill[k] for _, k in arrivals)
    steps = math.ceil(sum(o - 1 for o in outs) / batch)
    assert span >= busy + steps * decode - 1e-9
    assert span >= busy + (max(outs) - 1) * decode - 1e-9
    assert run.prefill_busy == pytest.approx(busy / span)
    assert run.tokens_per_s == pytest.approx(sum(outs) / span)
    assert run.tpot >= decode - 1e-12


def test_bad_replays_name_the_field():
    with pytest.raises(InvalidArgument, match="arrivals"):
        replay_run(WORK, 2, 0.1, [0.1, 0.2], [])
    with pytest.raises(InvalidArgument, match="arrivals"):
        replay_run(WORK, 2, 0.1, [0.1, 0.2], [(1.0, 0), (0.5, 1)])
    with pytest.raises(InvalidArgument, match="batch"):
        replay_run(WORK, 0, 0.1, [0.1, 0.2], [(0.0, 0)])
