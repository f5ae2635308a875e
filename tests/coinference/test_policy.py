"""The on-device policy: decisions, vectorised split points and the JSON round trip."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferplan.coinference import SplitPolicy, default_system, plan_placement
from inferplan.errors import InvalidArgument

thresholds = st.lists(st.one_of(st.floats(0, 1e6), st.just(math.inf)), max_size=8)


@given(thresholds)
def test_json_round_trip(values):
    policy = SplitPolicy(tuple(values))
    text = policy.to_json()
    assert "Infinity" not in text
    assert SplitPolicy.from_json(text) == policy


@given(thresholds, st.lists(st.floats(0, 2e6), min_size=9, max_size=9))
def test_sequential_decisions_match_vectorised_split_points(values, snr):
    policy = SplitPolicy(tuple(values))
    stage = 1
    while not policy.upload(stage, snr[stage - 1]):
        stage += 1
    assert stage <= policy.placement + 1
    assert policy.split_points(np.array([snr[: policy.placement + 1]]))[0] == stage


def test_plan_policy_uses_the_plan_thresholds():
    plan = plan_placement(default_system("alexnet"))
    policy = SplitPolicy.from_dict(plan.policy().to_dict())
    assert policy.placement == plan.placement
    assert policy.thresholds == plan.thresholds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "must be an object"),
        ("{}", "needs a 'thresholds' list"),
        ("{", "not valid JSON"),
        ('{"placement": 3, "thresholds": [1]}', "does not match"),
        ('{"thresholds": [-1]}', "threshold of stage 1 must be >= 0"),
    ],
)
def test_bad_policy_json(text, message):
    with pytest.raises(InvalidArgument, match=message):
        SplitPolicy.from_json(text)
