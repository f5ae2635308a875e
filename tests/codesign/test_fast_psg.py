"""The fast PSG and T* against Algorithm 1 and the brute force, for every cost kind, on both
engines: the compiled kernels (numba) and numpy's all-pairs relaxation."""

from __future__ import annotations

import math
import subprocess
import sys
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferplan
from inferplan.codesign import (
    compile_instance,
    reference_psg,
    solve_psg,
    throughput_optimal,
)
from inferplan.codesign.engine import compiled, psg
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.costs import LinearCost, TieredCost
from tests.oracles import brute_force_cost, brute_force_interval, evaluate
from tests.strategies import COST_KINDS, small_dags, small_profiles

alphas = st.floats(min_value=0.05, max_value=1.5)
ENGINES = ("compiled", "numpy")
engines = st.sampled_from(ENGINES)


def _solve(solver, inst, beta, engine):
    """``solver`` on ``engine``; ``beta=None`` for T*."""
    if beta is None:
        return solver(inst, engine=engine)
    return solver(inst, beta, engine=engine)


@pytest.mark.parametrize("kind", COST_KINDS)
@settings(max_examples=80)  # per kind: 400 in all
@given(data=st.data(), alpha=alphas, engine=engines)
def test_fast_psg_equals_reference_and_brute_force(kind, data, alpha, engine):
    network = data.draw(small_dags(max_nodes=5, cost_kinds=(kind,)))
    profile = data.draw(small_profiles(max_blocks=4))
    beta = alpha * brute_force_interval(network, profile)
    best = brute_force_cost(network, profile, beta)
    inst = compile_instance(network, profile)
    if math.isinf(best):
        with pytest.raises(Infeasible):
            _solve(solve_psg, inst, beta, engine)
        with pytest.raises(Infeasible):
            reference_psg(inst, beta)
        return
    plan = _solve(solve_psg, inst, beta, engine)
    assert plan.cost == pytest.approx(best, rel=1e-9, abs=1e-9)
    assert _solve(psg.psg_path, inst, beta, engine)[0] == pytest.approx(best, rel=1e-9, abs=1e-9)
    assert reference_psg(inst, beta).cost == pytest.approx(best, rel=1e-9, abs=1e-9)
    # The plan's own deployment, priced by the oracle, costs what the plan says, and the
    # capacity it lists meets the target.
    priced = evaluate(network, profile, plan.path, plan.partition, beta)
    assert plan.cost == pytest.approx(priced.cost, rel=1e-9, abs=1e-9)
    assert plan.feasible


@given(data=st.data(), engine=engines)
def test_mixed_cost_kinds(data, engine):
    network = data.draw(small_dags(max_nodes=5, cost_kinds=COST_KINDS))
    profile = data.draw(small_profiles(max_blocks=4))
    beta = data.draw(alphas) * brute_force_interval(network, profile)
    best = brute_force_cost(network, profile, beta)
    inst = compile_instance(network, profile)
    if math.isinf(best):
        with pytest.raises(Infeasible):
            _solve(solve_psg, inst, beta, engine)
    else:
        assert _solve(solve_psg, inst, beta, engine).cost == pytest.approx(best, rel=1e-9, abs=1e-9)


@settings(max_examples=40)
@given(data=st.data(), alpha=alphas)
def test_numpy_relaxes_a_generation_in_chunks_with_the_same_answer(data, alpha):
    """One node per chunk (``CHUNK_ENTRIES = 1``): PSG and T* as with whole generations."""
    network = data.draw(small_dags(max_nodes=6, cost_kinds=COST_KINDS))
    profile = data.draw(small_profiles(max_blocks=4))
    inst = compile_instance(network, profile)
    beta = alpha * throughput_optimal(inst).interval
    whole = throughput_optimal(inst, engine="numpy")
    try:
        cost = solve_psg(inst, beta, engine="numpy").cost
    except Infeasible:
        cost = math.inf
    with mock.patch.object(psg, "CHUNK_ENTRIES", 1):
        assert throughput_optimal(inst, engine="numpy") == whole
        try:
            chunked = solve_psg(inst, beta, engine="numpy").cost
        except Infeasible:
            chunked = math.inf
    assert chunked == cost


@given(network=small_dags(), profile=small_profiles(max_blocks=6))
def test_both_t_star_engines_return_the_same_deployment(network, profile):
    inst = compile_instance(network, profile)
    numpy_answer = _solve(throughput_optimal, inst, None, "numpy")
    kernel = _solve(throughput_optimal, inst, None, "compiled")
    assert numpy_answer == kernel  # same interval bit for bit, same tie-break
    assert kernel.interval == pytest.approx(brute_force_interval(network, profile), rel=1e-12)


def _deep_profile(n_blocks: int, seed: int) -> inferplan.Profile:
    rng = np.random.default_rng(seed)
    return inferplan.Profile(
        "deep",
        flops=tuple(rng.uniform(1e8, 5e9, n_blocks)),
        activation_bits=tuple(rng.uniform(1e5, 5e7, n_blocks + 1)),
    )


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("seed", range(3))
def test_layered_dag_with_many_blocks_matches_reference(seed, engine):
    """N = 60 on both engines."""
    network = inferplan.layered_dag(12, 26, seed=seed)
    inst = compile_instance(network, _deep_profile(60, seed))
    beta = 0.3 * throughput_optimal(inst, engine=engine).interval
    assert solve_psg(inst, beta, engine=engine).cost == pytest.approx(
        reference_psg(inst, beta).cost, rel=1e-9
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_tiered_and_capped_costs_with_many_blocks_match_reference(engine):
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
    assert solve_psg(inst, beta, engine=engine).cost == pytest.approx(
        reference_psg(inst, beta).cost, rel=1e-9
    )


@pytest.mark.parametrize("kind", COST_KINDS)
@settings(max_examples=40)
@given(data=st.data(), alpha=alphas)
def test_kernel_windows_with_many_blocks_equal_reference(kind, data, alpha):
    """Up to 14 blocks on few nodes: the kernel's windows hold many ``i`` at once, and several
    pieces of a tiered cost are in play for one ``j``."""
    network = data.draw(small_dags(max_nodes=4, cost_kinds=(kind,)))
    profile = data.draw(small_profiles(max_blocks=14))
    inst = compile_instance(network, profile)
    beta = alpha * throughput_optimal(inst, engine="numpy").interval
    try:
        expected = reference_psg(inst, beta).cost
    except Infeasible:
        with pytest.raises(Infeasible):
            solve_psg(inst, beta, engine="compiled")
        return
    plan = solve_psg(inst, beta, engine="compiled")
    assert plan.cost == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert plan.feasible
    assert evaluate(network, profile, plan.path, plan.partition, beta).cost == pytest.approx(
        plan.cost, rel=1e-9, abs=1e-9
    )


@settings(max_examples=30)
@given(data=st.data(), alpha=alphas)
def test_costs_without_tables_room_fall_back_to_numpy(data, alpha):
    """Past ``TABLE_ENTRIES`` the kernel is skipped for module and callable costs: the answer
    is the same."""
    network = data.draw(small_dags(max_nodes=5, cost_kinds=("modules", "function")))
    profile = data.draw(small_profiles(max_blocks=5))
    inst = compile_instance(network, profile)
    beta = alpha * throughput_optimal(inst).interval
    assert compiled.fits(inst)
    with mock.patch.object(compiled, "TABLE_ENTRIES", 0):
        assert not compiled.fits(inst)
        try:
            fallback = solve_psg(inst, beta, engine="compiled").cost
        except Infeasible:
            fallback = math.inf
    try:
        kernel = solve_psg(inst, beta, engine="compiled").cost
    except Infeasible:
        kernel = math.inf
    assert kernel == pytest.approx(fallback, rel=1e-9, abs=1e-9)


def test_engine_errors_name_the_field():
    inst = compile_instance(inferplan.tiered(seed=0), inferplan.vgg16())
    with pytest.raises(InvalidArgument, match="unknown engine 'gpu'") as error:
        solve_psg(inst, 1.0, engine="gpu")
    assert error.value.field == "engine"
    with mock.patch.object(compiled, "available", lambda: False):
        with pytest.raises(InvalidArgument, match=r"pip install 'inferplan\[fast\]'"):
            throughput_optimal(inst, engine="compiled")
        # auto quietly uses numpy, with the same answer
        assert throughput_optimal(inst, engine="auto") == throughput_optimal(inst)


def test_importing_inferplan_leaves_numba_unloaded():
    """numba costs about half a second to import: only a compiled solve loads it."""
    code = (
        "import sys, inferplan, inferplan.codesign, inferplan.cli.main\n"
        "assert 'numba' not in sys.modules, 'numba imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# Regressions found by an adversarial search (each once failed on one engine).


@pytest.mark.parametrize("engine", ENGINES)
def test_a_tier_cap_below_a_later_tier_start_is_respected(engine):
    capped = TieredCost(upto=(10.0,), prices=(1.0, 2.0), max_amount=0.5)  # at most 0.5 added
    net = inferplan.Network(
        nodes=(inferplan.Node("s", 1.0, 10.0), inferplan.Node("v", 1.0, 0.0, capped),
               inferplan.Node("t", 1.0, 5.0)),
        links=(inferplan.Link("s", "v", 100.0), inferplan.Link("v", "t", 100.0)),
        source="s", target="t",
    )  # fmt: skip
    inst = compile_instance(net, inferplan.Profile("p", (1.0,) * 4, (1.0,) * 5))
    plan = solve_psg(inst, 1.0, engine=engine)
    assert plan.cost == pytest.approx(reference_psg(inst, 1.0).cost, rel=1e-12)
    assert plan.node_upgrades.get("v", 0.0) <= 0.5
    alone = inferplan.Network(
        nodes=(inferplan.Node("s", 1.0, 0.0, capped), inferplan.Node("t", 1.0, 0.0, capped)),
        links=(inferplan.Link("s", "t", 100.0),), source="s", target="t",
    )  # fmt: skip
    inst = compile_instance(alone, inferplan.Profile("p", (3.0,), (1.0, 1.0)))
    with pytest.raises(Infeasible):
        solve_psg(inst, 1.0, engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_near_ties_survive_when_the_compute_dwarfs_the_costs(engine):
    """S / beta about 2**40 against costs of order 1: candidates are compared by the work
    between them, not by S_i / beta."""
    big = 2.0**40
    net = inferplan.Network(
        nodes=(inferplan.Node("s", big + 0.5, 1 - 1e-5), inferplan.Node("v", 1.5, 1.0),
               inferplan.Node("t", 0.5, 1.99999)),
        links=(inferplan.Link("s", "v", 1e6, 0.0), inferplan.Link("v", "t", 1e6, 0.0)),
        source="s", target="t",
    )  # fmt: skip
    inst = compile_instance(net, inferplan.Profile("p", (big, 1.0, 1.0, 1.0, 1.0), (1.0,) * 6))
    assert solve_psg(inst, 1.0, engine=engine).cost == pytest.approx(1.999985, rel=1e-12)
    assert reference_psg(inst, 1.0).cost == pytest.approx(1.999985, rel=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_request_exactly_on_the_cap_is_allowed(engine):
    """N + 1 = 49 blocks; the cap equals one request exactly."""
    n, beta, capacity = 48, 1 / 3, 0.3
    S = np.concatenate(([0.0], np.cumsum((0.1,) * n)))
    cap = float(S[31] / beta - capacity)
    net = inferplan.Network(
        nodes=(inferplan.Node("s", capacity, 0.0, LinearCost(1.0, cap)),
               inferplan.Node("t", 1.0, 10.0)),
        links=(inferplan.Link("s", "t", 100.0, 0.0),), source="s", target="t",
    )  # fmt: skip
    inst = compile_instance(net, inferplan.Profile("p", (0.1,) * n, (1.0,) * (n + 1)))
    assert _solve(solve_psg, inst, beta, engine).cost == pytest.approx(
        reference_psg(inst, beta).cost, rel=1e-12
    )


def test_t_star_when_every_delay_overflows_is_the_same_on_both_engines():
    net = inferplan.Network(
        (inferplan.Node("s", 1e-300), inferplan.Node("t", 1e-300)),
        (inferplan.Link("s", "t", 1e-300),), "s", "t",
    )  # fmt: skip
    inst = compile_instance(net, inferplan.Profile("p", (1e10, 1e10), (1e10,) * 3))
    with np.errstate(over="ignore"):
        numpy_answer = throughput_optimal(inst, engine="numpy")
    assert throughput_optimal(inst, engine="compiled") == numpy_answer
    assert numpy_answer.partition == (0, 2) and math.isinf(numpy_answer.interval)
