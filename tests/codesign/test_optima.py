"""Counting and sampling the throughput-optimal deployments, against enumeration."""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import inferplan
from inferplan.codesign import compile_instance, throughput_optimal
from inferplan.codesign.optima import OptimalDeployments
from tests.oracles import deployments, evaluate
from tests.strategies import small_dags, small_profiles


def _reaching(network, profile, interval):
    return [
        (p, b)
        for p, b in deployments(network, profile.n_blocks)
        if evaluate(network, profile, p, b, math.inf).interval <= interval * (1 + 1e-9)
    ]


@given(network=small_dags(), profile=small_profiles(), slack=st.sampled_from([1.0, 1.3, 2.0]))
def test_count_equals_enumeration(network, profile, slack):
    inst = compile_instance(network, profile)
    interval = slack * throughput_optimal(inst).interval
    expected = len(_reaching(network, profile, interval))
    assert expected >= 1
    counted = OptimalDeployments(inst, inst.capacity, inst.bandwidth, interval).count
    assert counted == pytest.approx(expected, rel=1e-9)


@given(network=small_dags(), profile=small_profiles(), seed=st.integers(0, 2**32 - 1))
def test_samples_reach_the_interval(network, profile, seed):
    inst = compile_instance(network, profile)
    interval = throughput_optimal(inst).interval
    ties = OptimalDeployments(inst, inst.capacity, inst.bandwidth, interval)
    path, partition = ties.draw(np.random.default_rng(seed))
    names = tuple(inst.node_ids[v] for v in path)
    assert (names, tuple(partition)) in set(_reaching(network, profile, interval))


def test_samples_are_uniform():
    net = inferplan.tiered(seed=4)
    profile = inferplan.Profile("p", flops=(3e9, 2e9, 1e9), activation_bits=(4e6, 2e6, 1e6, 1e4))
    inst = compile_instance(net, profile)
    interval = 1.5 * throughput_optimal(inst).interval
    population = _reaching(net, profile, interval)
    assert 10 <= len(population) <= 400
    rng = np.random.default_rng(0)
    draws = 15 * len(population)  # expected count 15 per deployment: enough for chi-square
    seen: collections.Counter[tuple] = collections.Counter()
    ties = OptimalDeployments(inst, inst.capacity, inst.bandwidth, interval)
    for _ in range(draws):
        path, partition = ties.draw(rng)
        seen[(tuple(inst.node_ids[v] for v in path), tuple(partition))] += 1
    assert set(seen) <= set(population)
    observed = [seen[d] for d in population]
    assert stats.chisquare(observed).pvalue > 1e-4


def test_unknown_tie_break_is_rejected():
    with pytest.raises(inferplan.InvalidArgument, match="unknown tie-break 'first'"):
        inferplan.provision(inferplan.tiered(seed=1), inferplan.vgg16(), throughput=30,
                            method="pwf", tie_break="first")  # fmt: skip


def test_random_tie_break_is_reproducible():
    net, res = inferplan.tiered(seed=6), inferplan.resnet50()
    a = inferplan.provision(net, res, throughput=40, method="pwf", tie_break="random", seed=5)
    b = inferplan.provision(net, res, throughput=40, method="pwf", tie_break="random", seed=5)
    assert a == b
