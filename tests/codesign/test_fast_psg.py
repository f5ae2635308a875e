"""The generation-wise PSG and T* against Algorithm 1 and the brute force, for every cost kind,
on both compute steps (all pairs at once, and the windowed scan used for large N)."""

from __future__ import annotations

import importlib
import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferplan
from inferplan.codesign import compile_instance, psg, reference_psg, solve_psg, throughput_optimal
from inferplan.codesign.costs import LinearCost, TieredCost
from inferplan.errors import Infeasible
from tests.oracles import brute_force_cost, brute_force_interval, evaluate
from tests.strategies import COST_KINDS, small_dags, small_profiles

# The package re-exports the function ``throughput``, which hides the module of that name.
throughput = importlib.import_module("inferplan.codesign.throughput")
alphas = st.floats(min_value=0.05, max_value=1.5)
dense_or_windows = st.sampled_from([psg.DENSE_WIDTH, 0])


def _solve(solver, inst, beta, dense_width):
    """``solver`` with the all-pairs step up to ``dense_width`` block counts (0: windows)."""
    with mock.patch.object(psg, "DENSE_WIDTH", dense_width), \
            mock.patch.object(throughput, "DENSE_WIDTH", dense_width):  # fmt: skip
        return solver(inst, beta) if beta is not None else solver(inst)


@pytest.mark.parametrize("kind", COST_KINDS)
@settings(max_examples=80)  # per kind: 400 in all
@given(data=st.data(), alpha=alphas, dense_width=dense_or_windows)
def test_fast_psg_equals_reference_and_brute_force(kind, data, alpha, dense_width):
    network = data.draw(small_dags(max_nodes=5, cost_kinds=(kind,)))
    profile = data.draw(small_profiles(max_blocks=4))
    beta = alpha * brute_force_interval(network, profile)
    best = brute_force_cost(network, profile, beta)
    inst = compile_instance(network, profile)
    if math.isinf(best):
        with pytest.raises(Infeasible):
            _solve(solve_psg, inst, beta, dense_width)
        with pytest.raises(Infeasible):
            reference_psg(inst, beta)
        return
    plan = _solve(solve_psg, inst, beta, dense_width)
    assert plan.cost == pytest.approx(best, rel=1e-9, abs=1e-9)
    assert _solve(psg.psg_path, inst, beta, dense_width)[0] == pytest.approx(
        best, rel=1e-9, abs=1e-9
    )
    assert reference_psg(inst, beta).cost == pytest.approx(best, rel=1e-9, abs=1e-9)
    # The plan's own deployment, priced by the oracle, costs what the plan says, and the
    # capacity it lists meets the target.
    priced = evaluate(network, profile, plan.path, plan.partition, beta)
    assert plan.cost == pytest.approx(priced.cost, rel=1e-9, abs=1e-9)
    assert plan.feasible


@given(data=st.data(), dense_width=dense_or_windows)
def test_mixed_cost_kinds(data, dense_width):
    network = data.draw(small_dags(max_nodes=5, cost_kinds=COST_KINDS))
    profile = data.draw(small_profiles(max_blocks=4))
    beta = data.draw(alphas) * brute_force_interval(network, profile)
    best = brute_force_cost(network, profile, beta)
    inst = compile_instance(network, profile)
    if math.isinf(best):
        with pytest.raises(Infeasible):
            _solve(solve_psg, inst, beta, dense_width)
    else:
        assert _solve(solve_psg, inst, beta, dense_width).cost == pytest.approx(
            best, rel=1e-9, abs=1e-9
        )


@given(network=small_dags(), profile=small_profiles(max_blocks=6))
def test_bisection_t_star_matches_the_all_pairs_step_exactly(network, profile):
    inst = compile_instance(network, profile)
    dense = _solve(throughput_optimal, inst, None, psg.DENSE_WIDTH)
    search = _solve(throughput_optimal, inst, None, 0)
    assert search == dense  # same interval bit for bit, same tie-break
    assert search.interval == pytest.approx(brute_force_interval(network, profile), rel=1e-12)


@given(
    rows=st.integers(1, 4).flatmap(
        lambda r: st.lists(
            st.lists(st.floats(-100, 100), min_size=9, max_size=9), min_size=r, max_size=r
        )
    ),
    data=st.data(),
)
def test_range_min_equals_a_plain_minimum(rows, data):
    values = np.array(rows)
    lo = np.array(data.draw(st.lists(st.lists(st.integers(0, 9), min_size=9, max_size=9),
                                     min_size=len(rows), max_size=len(rows))))  # fmt: skip
    hi = np.array(data.draw(st.lists(st.lists(st.integers(-1, 8), min_size=9, max_size=9),
                                     min_size=len(rows), max_size=len(rows))))  # fmt: skip
    got = psg.range_min(psg.sparse_table(values), lo, hi)
    for r, c in np.ndindex(lo.shape):
        window = values[r, lo[r, c] : hi[r, c] + 1]
        assert got[r, c] == (window.min() if window.size else math.inf)


def _deep_profile(n_blocks: int, seed: int) -> inferplan.Profile:
    rng = np.random.default_rng(seed)
    return inferplan.Profile(
        "deep",
        flops=tuple(rng.uniform(1e8, 5e9, n_blocks)),
        activation_bits=tuple(rng.uniform(1e5, 5e7, n_blocks + 1)),
    )


@pytest.mark.parametrize("seed", range(3))
def test_layered_dag_with_many_blocks_matches_reference(seed):
    """N = 60 > DENSE_WIDTH: the windowed scan and the bisection T* run unpatched."""
    network = inferplan.layered_dag(12, 26, seed=seed)
    inst = compile_instance(network, _deep_profile(60, seed))
    beta = 0.3 * throughput_optimal(inst).interval
    assert solve_psg(inst, beta).cost == pytest.approx(reference_psg(inst, beta).cost, rel=1e-9)


def test_tiered_and_capped_costs_with_many_blocks_match_reference():
    base = inferplan.layered_dag(10, 20, seed=4)
    rng = np.random.default_rng(4)

    def cost(k, price):  # odd nodes: three tiers, not always convex; even: a capped price
        if k % 2:
            return TieredCost((5e9, 2e10), (price * rng.uniform(0.5, 2), price, 3 * price))
        return LinearCost(price, 4e10)

    nodes = tuple(
        inferplan.Node(n.id, n.capacity, n.price, cost(k, n.price))
        for k, n in enumerate(base.nodes)
    )
    network = inferplan.Network(nodes, base.links, base.source, base.target)
    inst = compile_instance(network, _deep_profile(55, 4))
    beta = 0.5 * throughput_optimal(inst).interval
    assert solve_psg(inst, beta).cost == pytest.approx(reference_psg(inst, beta).cost, rel=1e-9)
