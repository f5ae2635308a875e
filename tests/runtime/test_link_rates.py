"""The flow testbed's shaped links from the plan's rates (no root, no testbed): each link's rate
and load computed by hand, and a link only a pipeline of a small rate uses still shaped (a
short run may dispatch nothing to it; counting the run's dispatch divided by zero there)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from inferplan.runtime.testbed.flows import link_rates


def _hop(rank: int, last: int, next_rank: int | None) -> SimpleNamespace:
    return SimpleNamespace(rank=rank, last=last, next_rank=next_rank)


def test_a_link_of_a_pipeline_no_input_reached_is_shaped_from_the_plan() -> None:
    """Pipeline 0 (100/s) goes 0 -> 1 -> 3, pipeline 1 (0.01/s) 0 -> 2 -> 3: a run of a
    few inputs sends all to pipeline 0, and link 0 -> 2 still moves its 1024-byte messages
    in their planned 4 ms (8 x 1024 / 0.004 bit/s), loaded with 0.01 of them a second."""
    fast = (100.0, [_hop(0, 1, 1), _hop(1, 2, 3), _hop(3, 2, None)])
    slow = (0.01, [_hop(0, 1, 2), _hop(2, 2, 3), _hop(3, 2, None)])
    link_s = {(0, 1): [0.0, 0.002, 0.0], (1, 3): [0.0, 0.0, 0.001],
              (0, 2): [0.0, 0.004, 0.0], (2, 3): [0.0, 0.0, 0.001]}  # fmt: skip
    sizes = [24, 1024, 64]
    rates, loads = link_rates([fast, slow], link_s, sizes)
    assert rates[0, 2] == pytest.approx(8 * 1024 / 0.004)
    assert loads[0, 2] == pytest.approx(8 * 1024 * 0.01)
    assert rates[0, 1] == pytest.approx(8 * 1024 / 0.002)
    assert rates[2, 3] == pytest.approx(8 * 64 / 0.001)
    assert loads[1, 3] == pytest.approx(8 * 64 * 100)


def test_a_link_carrying_two_cuts_moves_them_in_their_mean_time() -> None:
    """3 messages/s of 100 bytes (10 ms each) and 1/s of 300 bytes (20 ms): 600 bytes in
    50 ms each second, 96000 bit/s."""
    a = (3.0, [_hop(0, 1, 1), _hop(1, 2, None)])
    b = (1.0, [_hop(0, 2, 1), _hop(1, 2, None)])
    rates, loads = link_rates([a, b], {(0, 1): [0.0, 0.01, 0.02]}, [24, 100, 300])
    assert rates == {(0, 1): pytest.approx(96000.0)}
    assert loads == {(0, 1): pytest.approx(8 * 600.0)}


def test_links_with_nothing_to_shape_are_left_out() -> None:
    one = (5.0, [_hop(0, 0, 1), _hop(1, 2, None)])  # crosses 0 -> 1 at cut 0
    link_s = {(0, 1): [0.0, 0.0, 0.0], (1, 2): [0.0, 0.1, 0.1]}  # no data; unused
    assert link_rates([one], link_s, [24, 100, 100]) == ({}, {})


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(1e-3, 1e3), st.integers(0, 3)), min_size=1, max_size=4),
    st.lists(st.floats(1e-6, 1.0), min_size=4, max_size=4),
    st.lists(st.integers(24, 10_000), min_size=4, max_size=4),
)
def test_the_shaped_rate_moves_the_planned_messages_in_their_planned_time(
    pipelines: list[tuple[float, int]], seconds: list[float], sizes: list[int]
) -> None:
    """Every pipeline crosses link 0 -> 1 at its own cut: at the shaped rate the link is busy
    for the same seconds a second as the plan's messages take there."""
    plan = [(rate, [_hop(0, cut, 1), _hop(1, 4, None)]) for rate, cut in pipelines]
    rates, loads = link_rates(plan, {(0, 1): seconds}, sizes)
    busy = math.fsum(rate * seconds[cut] for rate, cut in pipelines)
    bits = math.fsum(rate * 8 * sizes[cut] for rate, cut in pipelines)
    assert loads[0, 1] == pytest.approx(bits, rel=1e-12)
    assert bits / rates[0, 1] == pytest.approx(busy, rel=1e-12)
