"""Channels with memory: Markov chains, Gauss-Markov fading, fitting, and stopping on them."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from inferplan.coinference import (
    Device,
    Discrete,
    Edge,
    GaussMarkov,
    Layers,
    Markov,
    StatePolicy,
    System,
    clarke_correlation,
    default_system,
    evaluate_policy,
    expected_costs,
    fit_markov,
    mlp_layers,
    one_step_thresholds,
    optimal_thresholds,
    optimality_probability,
    plan_placement,
    policy_from_json,
    simulate,
    solve_stopping,
    stationary_law,
)
from inferplan.coinference.markov_stopping import (
    memory_one_step_etc_all,
    memory_one_step_thresholds,
    memory_thresholds,
    threshold_structure,
)
from inferplan.errors import DivergentCost, InvalidSystem

from . import oracles
from .strategies import log_uniform, systems

STICKY = Markov(
    snr=(0.5, 3.0, 12.0),
    transition=((0.8, 0.2, 0.0), (0.1, 0.8, 0.1), (0.0, 0.2, 0.8)),
    initial=(0.3, 0.4, 0.3),
)


@st.composite
def laws(draw: st.DrawFn, k: int) -> tuple[float, ...]:
    weights = draw(st.lists(st.sampled_from([0.0, 0.1, 0.3, 0.5, 1.0]), min_size=k, max_size=k))
    if sum(weights) == 0:
        weights[draw(st.integers(0, k - 1))] = 1.0
    total = sum(weights)
    return tuple(w / total for w in weights)


@st.composite
def markov_systems(draw: st.DrawFn, max_layers: int = 3, max_states: int = 3) -> System:
    base = draw(systems(max_layers=max_layers, per_stage=False))
    k = draw(st.integers(1, max_states))
    snr = tuple(sorted(draw(st.lists(log_uniform(0.05, 200.0), min_size=k, max_size=k,
                                     unique=True))))  # fmt: skip
    per_stage = draw(st.booleans())
    steps = base.n_layers if per_stage else 1
    matrices = [tuple(draw(laws(k)) for _ in range(k)) for _ in range(steps)]
    channel = Markov(
        snr,
        tuple(matrices) if per_stage else matrices[0],
        draw(laws(k)),
    )
    return dataclasses.replace(base, channel=channel)


def _raw(system: System) -> tuple[tuple[float, ...], list[list[list[float]]], tuple[float, ...]]:
    """The chain as the file gives it (not the solver's arrays)."""
    ch = system.channel
    assert isinstance(ch, Markov)
    stack = np.asarray(ch.transition, dtype=float)
    if stack.ndim == 2:
        stack = np.broadcast_to(stack, (system.n_layers, *stack.shape))
    assert ch.initial is not None
    return ch.snr, stack.tolist(), ch.initial


# ------------------------------------------------------------------------------ the oracle


@settings(max_examples=40)
@given(markov_systems(max_layers=3, max_states=3))
def test_memory_induction_matches_brute_force_cost_and_decisions(system):
    snr, transitions, initial = _raw(system)
    for m in range(system.n_layers + 1):
        thresholds, values = memory_thresholds(system, m)
        best, optimal_tables = oracles.markov_brute_force(system, snr, transitions, initial, m)
        ours = float(np.dot(initial, values[0]))
        assert ours == pytest.approx(best, rel=1e-11, abs=1e-15)
        table = {(n, k): snr[k] >= thresholds[n - 1, k] for n in range(1, m + 1)
                 for k in range(len(snr))}  # fmt: skip
        paths = oracles.markov_paths(snr, transitions, initial, m + 1)
        assert oracles.markov_policy_cost(system, snr, paths, m, table) == pytest.approx(
            best, rel=1e-11, abs=1e-15
        )
        assert any(
            all(t[key] == table[key] for key in table if _reachable(paths, key))
            for t in optimal_tables
        )
        # Looking at the whole history does no better: the state is all the chain remembers.
        history = oracles.markov_history_optimum(system, snr, transitions, initial, m)
        assert history == pytest.approx(best, rel=1e-11, abs=1e-15)
        solution = solve_stopping(system, m)
        assert solution.expected_etc == pytest.approx(best, rel=1e-11, abs=1e-15)


def _reachable(paths: list[tuple[tuple[int, ...], float]], key: tuple[int, int]) -> bool:
    n, k = key
    return any(path[n - 1] == k for path, _ in paths)


@settings(max_examples=30)
@given(markov_systems(max_layers=3, max_states=3))
def test_memory_one_step_rule_is_its_definition(system):
    snr, transitions, initial = _raw(system)
    table = memory_one_step_thresholds(system)
    etc_all = memory_one_step_etc_all(system)
    for m in range(system.n_layers + 1):
        stop = {}
        for n in range(1, m + 1):
            for k in range(len(snr)):
                nxt = sum(p * oracles.eta(system, n + 1, snr[j])
                          for j, p in enumerate(transitions[n - 1][k]))  # fmt: skip
                now = oracles.eta(system, n, snr[k])
                stop[(n, k)] = snr[k] >= table[n - 1, k]
                if abs(now - nxt) > 1e-9 * abs(nxt):  # away from ties the rule is exact
                    assert stop[(n, k)] == (now <= nxt)
        paths = oracles.markov_paths(snr, transitions, initial, m + 1)
        expected = oracles.markov_policy_cost(system, snr, paths, m, stop)
        assert etc_all[m] == pytest.approx(expected, rel=1e-11, abs=1e-15)
        assert solve_stopping(system, m, rule="1sla").expected_etc == pytest.approx(
            expected, rel=1e-11, abs=1e-15
        )


# How closely two sums of the same few (at most 3 x 5) terms in different orders agree.
CONTINUATION = 1e-14
# C_3 = 10.02336 against a_3 = 10.01033: the threshold 3.6e11 has condition number 2.0e4, and
# one ulp of C moves it by 3.6e-12 relative.
ILL_CONDITIONED = System(
    Device(1e8, 1e-29, 0.01, 2e7),
    Edge(3e9),
    Layers((1e6, 1e9, 1e6), (1e4, 1e4, 1e7, 1e4), (1e3, 1e3, 1e3)),
    Discrete((0.05, 42.23220404472153), (0.4661016949152542, 0.5338983050847458)),
    downlink_bps=1e6,
    inferences_per_update=1,
    energy_weight=0.0,
)


def _threshold_rtol(a: float, b: float, continuation: float) -> float:
    """How far two thresholds ``2^(b / (C - a)) - 1`` may differ when their continuations ``C``
    differ by CONTINUATION relative: that times the condition number in ``C``,
    ``|C / (C - a)| x e^x / (e^x - 1)`` with ``x = ln 2 b / (C - a)``, large where ``C`` is
    close to ``a`` (a threshold far above the SNRs: ILL_CONDITIONED); 1e-12 at the least."""
    gap = continuation - a
    if not (gap > 0 and b > 0 and math.isfinite(continuation)):
        return 1e-12  # never split (inf) or always (0): equal, not rounded
    x = math.log(2.0) * b / gap
    condition = abs(continuation / gap) * x / -math.expm1(-x)
    return max(1e-12, 2.0 * condition * CONTINUATION)


@settings(max_examples=40)
@given(systems(max_layers=4, max_levels=3, per_stage=False))
@example(ILL_CONDITIONED)
def test_equal_rows_give_the_iid_thresholds(system):
    iid = system.channel
    assert isinstance(iid, Discrete)
    order = np.argsort(iid.snr)
    snr = tuple(np.asarray(iid.snr)[order].tolist())
    law = tuple(np.asarray(iid.prob)[order].tolist())
    markov = dataclasses.replace(system, channel=Markov(snr, (law,) * len(snr)))
    a, b = system.stage_costs
    for m in range(system.n_layers + 1):
        t_iid, v_iid = optimal_thresholds(system, m)
        t_mem, v_mem = memory_thresholds(markov, m)
        # The continuation C_n = E[V_{n+1}] is the same number summed in another order: equal
        # to CONTINUATION relative; the thresholds as far as that moves them.
        for n in range(1, m + 1):
            assert float(np.dot(law, v_mem[n])) == pytest.approx(v_iid[n], rel=CONTINUATION)
            rtol = _threshold_rtol(a[n - 1], b[n - 1], v_iid[n])
            np.testing.assert_allclose(t_mem[n - 1], t_iid[n - 1], rtol=rtol)
        for k in range(len(snr)):
            assert np.array_equal(snr[k] >= t_mem[:, k], snr[k] >= t_iid)
        assert float(np.dot(law, v_mem[0])) == pytest.approx(v_iid[0], rel=CONTINUATION)
    g = float(np.dot(law, math.log(2.0) / np.log1p(np.asarray(snr))))
    for n, (with_memory, without) in enumerate(
        zip(memory_one_step_thresholds(markov)[:, 0], one_step_thresholds(system), strict=True),
        start=1,
    ):  # the 1-sla continuation: E[eta_{n+1}] = a_{n+1} + b_{n+1} E[g]
        rtol = _threshold_rtol(a[n - 1], b[n - 1], a[n] + b[n] * g)
        assert with_memory == without or with_memory == pytest.approx(without, rel=rtol)
    np.testing.assert_allclose(expected_costs(markov), expected_costs(system), rtol=1e-12)
    np.testing.assert_allclose(
        expected_costs(markov, rule="1sla"), expected_costs(system, rule="1sla"), rtol=1e-12
    )
    assert plan_placement(markov).placement == plan_placement(system).placement


@settings(max_examples=30)
@given(markov_systems(max_layers=3, max_states=3))
def test_placements_and_the_iid_rule_on_a_chain(system):
    optimal = plan_placement(system)
    z = expected_costs(system)
    assert optimal.expected_cost == pytest.approx(float(np.min(z)), rel=1e-12)
    assert plan_placement(system, method="hybrid").placement == optimal.placement
    iid = plan_placement(system, method="memoryless")
    # The i.i.d. rule is one feasible rule on the chain: never better than the optimum.
    assert iid.expected_cost >= optimal.expected_cost * (1 - 1e-12)
    snr, transitions, initial = _raw(system)
    m = iid.placement
    stop = {(n, k): snr[k] >= iid.thresholds[n - 1] for n in range(1, m + 1)
            for k in range(len(snr))}  # fmt: skip
    paths = oracles.markov_paths(snr, transitions, initial, m + 1)
    assert iid.solution.expected_etc == pytest.approx(
        oracles.markov_policy_cost(system, snr, paths, m, stop), rel=1e-11, abs=1e-15
    )
    p = optimality_probability(system, system.n_layers)
    assert 0.0 <= p <= 1.0


def test_memory_beats_the_iid_rule_on_a_sticky_chain():
    s = default_system(channel=STICKY, layers=mlp_layers(256, 6), inferences_per_update=10**6)
    optimal = plan_placement(s)
    iid = plan_placement(s, method="memoryless")
    assert optimal.expected_cost < iid.expected_cost * (1 - 1e-3)
    structure = optimal.solution.threshold_structure
    assert structure is not None and len(structure) == optimal.placement


def test_threshold_structure_is_checked_not_assumed():
    # States 0 and 2 lead to the best state, 1 and 3 to the worst: with free layers the rule
    # waits in 0 and 2 but uploads in 1, so its stop set is not the states above one SNR.
    ch = Markov((1.0, 2.0, 4.0, 8.0),
                ((0, 0, 0, 1.0), (1.0, 0, 0, 0), (0, 0, 0, 1.0), (1.0, 0, 0, 0)),
                initial=(0.25,) * 4)  # fmt: skip
    layers = mlp_layers(64, 1, cycles_per_mac=0.0)
    s = default_system(channel=ch, layers=layers)
    table = memory_thresholds(s, 1)[0]
    assert (np.asarray(ch.snr) >= table[0]).tolist() == [False, True, False, True]
    assert threshold_structure(s, table) == (False,)
    assert threshold_structure(s, np.array([2.0])) == (True,)


# ----------------------------------------------------------------------------- the chains


def test_stationary_law_is_exact():
    p = [[Fraction(1, 2), Fraction(1, 2), 0], [Fraction(1, 4), Fraction(1, 2), Fraction(1, 4)],
         [0, Fraction(1, 3), Fraction(2, 3)]]  # fmt: skip
    # Detailed balance of this birth-death chain: pi_1 = 2 pi_0, pi_2 = (3/4) pi_1.
    exact = [Fraction(1), Fraction(2), Fraction(3, 2)]
    total = sum(exact)
    pi = stationary_law([[float(v) for v in row] for row in p])
    for got, want in zip(pi, exact, strict=True):
        assert got == pytest.approx(float(want / total), rel=1e-12)
    ch = Markov((0.5, 2.0, 8.0), tuple(tuple(float(v) for v in row) for row in p))
    mean_g = sum(float(w / total) * (math.log(2) / math.log1p(s))
                 for w, s in zip(exact, (0.5, 2.0, 8.0), strict=True))  # fmt: skip
    assert ch.mean_inv_log() == pytest.approx(mean_g, rel=1e-12)
    s = default_system(channel=ch)
    assert s.chain is not None
    np.testing.assert_allclose(s.chain.marginals, np.broadcast_to(pi, (9, 3)), rtol=1e-12)


def test_clarke_correlation_against_mpmath():
    for v, fc, dt in ((0.5, 2.4e9, 1e-3), (30.0, 28e9, 5e-3), (3.0, 5e9, 0.02)):
        fd = v * fc / 299_792_458.0
        want = float(mpmath.besselj(0, 2 * mpmath.pi * fd * dt))
        assert float(clarke_correlation(v, fc, dt)) == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_markov_simulation_matches_the_analysis():
    s = default_system(channel=STICKY)
    sim = simulate(s, ["optimal", "memoryless", "1sla"], inferences=60_000, seed=3)
    for name in ("optimal", "memoryless", "1sla"):
        r = sim[name]
        assert r.ci_low - 1e-12 <= r.analytic_cost <= r.ci_high + 1e-12, name
    # The draws are correlated: consecutive stages stay in a state 80 % of the time.
    from inferplan.coinference import sample_snr

    snr = sample_snr(s, np.random.default_rng(0), 50_000)
    same = np.mean(snr[:, 1:] == snr[:, :-1])
    assert same == pytest.approx(0.8, abs=0.01)


def test_state_policy_round_trip_and_device_evaluation():
    s = default_system(channel=STICKY)
    plan = plan_placement(s)
    policy = plan.policy()
    assert isinstance(policy, StatePolicy)
    assert policy_from_json(policy.to_json()) == policy
    expected, split = evaluate_policy(s, policy)
    assert expected == pytest.approx(plan.solution.expected_etc, rel=1e-12)
    assert split.sum() == pytest.approx(1.0)
    snr = np.array([[0.5, 3.0, 12.0, 12.0, 0.5, 3.0, 3.0, 3.0, 3.0]])
    first = next(n for n in range(1, 10) if policy.upload(n, float(snr[0, n - 1])))
    assert policy.split_points(snr)[0] == first


# ------------------------------------------------------------------------ Gauss-Markov


def test_gauss_markov_without_correlation_is_iid_truncated_rayleigh():
    from inferplan.coinference import Rayleigh

    layers = mlp_layers(128, 4)
    gm = default_system(channel=GaussMarkov(10.0, 0.25, rho=0.0, grid=512), layers=layers)
    iid = default_system(channel=Rayleigh(10.0, 0.25), layers=layers)
    z_gm, z_iid = expected_costs(gm), expected_costs(iid)
    # The chain's cells are equiprobable and the upload cost in each is exact: only the
    # stopping decision is quantised to the cells.
    np.testing.assert_allclose(z_gm, z_iid, rtol=2e-3)
    assert gm.chain is not None
    np.testing.assert_allclose(gm.chain.transitions, 1 / 512, rtol=1e-9)


def test_gauss_markov_grid_converges_and_matches_monte_carlo():
    layers = mlp_layers(256, 4)
    costs = []
    for grid in (16, 64, 256, 1024):
        s = default_system(channel=GaussMarkov(10.0, 0.25, rho=0.95, grid=grid), layers=layers)
        costs.append(float(np.min(expected_costs(s))))
    gaps = np.abs(np.diff(costs))
    assert gaps[-1] < gaps[0] and gaps[-1] < 1e-3 * costs[-1]
    # The continuous process (the recursion on h) under the fine grid's rule costs what the
    # chain predicts.
    s = default_system(channel=GaussMarkov(10.0, 0.25, rho=0.95, grid=1024), layers=layers)
    sim = simulate(s, ["optimal"], inferences=200_000, seed=5)
    r = sim["optimal"]
    half = (r.ci_high - r.ci_low) / 2
    assert abs(r.mean_cost - r.analytic_cost) <= half + 2e-3 * r.analytic_cost


def test_gauss_markov_clarke_correlations_come_from_the_layers():
    ch = GaussMarkov(10.0, 0.25, speed_mps=1.5, carrier_hz=2.4e9)
    s = default_system(channel=ch)
    dt = np.asarray(s.layers.cycles) / s.device.cpu_hz
    np.testing.assert_allclose(
        ch.correlations(s.stage_intervals), clarke_correlation(1.5, 2.4e9, dt)
    )
    still = default_system(channel=GaussMarkov(10.0, 0.25, speed_mps=0.0, carrier_hz=2.4e9))
    assert still.chain is not None
    np.testing.assert_array_equal(still.chain.transitions[0], np.eye(64))


# --------------------------------------------------------------------------------- fitting


def test_fit_recovers_a_chain_from_its_trace():
    s = default_system(channel=STICKY, layers=mlp_layers(8, 1))
    assert s.chain is not None
    rng = np.random.default_rng(0)
    states = [0]
    cumulative = np.cumsum(np.asarray(STICKY.transition), axis=1)
    for _ in range(200_000):
        states.append(int(np.searchsorted(cumulative[states[-1]], rng.random(), side="right")))
    trace = np.asarray(STICKY.snr)[states]
    fitted = fit_markov(trace, 3, boundaries=(1.0, 6.0))
    np.testing.assert_allclose(fitted.snr, STICKY.snr, rtol=1e-10)
    np.testing.assert_allclose(fitted.transition, STICKY.transition, atol=0.01)
    equiprobable = fit_markov(rng.exponential(10.0, 10_000) + 0.25, 8)
    assert len(equiprobable.snr) == 8
    assert equiprobable.law == pytest.approx([1 / 8] * 8, abs=0.01)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: fit_markov([1.0, 2.0, 3.0], 4), "too short to fit 4 states"),
        (lambda: fit_markov([1.0, 1.0, 1.0, 9.0], 2, boundaries=(5.0,)), "too short"),
        (lambda: GaussMarkov(10.0, 0.25, rho=-1.2), "|rho| <= 1"),
        (lambda: GaussMarkov(10.0, 0.25, rho=(0.5, 2.0)), "rho[1]"),
        (lambda: Markov((1.0, 2.0), ((0.5, 0.6), (0.5, 0.5))), "must sum to 1"),
        (lambda: Markov((2.0, 1.0), ((0.5, 0.5), (0.5, 0.5))), "increasing SNR"),
        (lambda: Markov((1.0, 2.0), ((1.0, 0.0), (0.0, 1.0))), "several stationary laws"),
        (lambda: Markov((1.0, 2.0), (((1.0, 0.0), (0.0, 1.0)),)), "is required"),
        (lambda: Markov((1.0, 2.0), ((1.0, 0.0),)), "2 x 2 matrix"),
        (lambda: default_system(channel=Markov((1.0, 2.0), (((0.5, 0.5), (0.5, 0.5)),) * 2,
                                               (0.5, 0.5))), "one matrix per step"),
        (lambda: default_system(channel=tuple(dataclasses.replace(STICKY) for _ in range(9))),
         "describes every stage"),
    ],
)  # fmt: skip
def test_bad_channels_are_one_clear_error(make, message):
    with pytest.raises(InvalidSystem) as info:
        make()
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_state_of_snr_zero_diverges_where_it_is_reached():
    ch = Markov((0.0, 5.0), ((0.0, 1.0), (0.5, 0.5)), initial=(0.0, 1.0))
    with pytest.raises(DivergentCost, match="at split stage 2"):
        default_system(channel=ch)
    with pytest.raises(DivergentCost):
        default_system(channel=GaussMarkov(10.0, rho=0.5))


@settings(max_examples=10)
@given(markov_systems(max_layers=2, max_states=4))
def test_sampled_paths_follow_the_chain(system):
    assert system.chain is not None
    chain = system.chain
    states = chain.sample_states(np.random.default_rng(0), 40_000)
    tol = 4 * math.sqrt(0.25 / 40_000) + 1e-12
    np.testing.assert_allclose(np.bincount(states[:, 0], minlength=chain.states) / 40_000,
                               chain.initial, atol=tol)  # fmt: skip
    for n in range(1, chain.stages):
        for i in range(chain.states):
            rows = states[:, n - 1] == i
            if rows.sum() < 2_000:
                continue
            freq = np.bincount(states[rows, n], minlength=chain.states) / rows.sum()
            np.testing.assert_allclose(freq, chain.transitions[n - 1][i],
                                       atol=4 * math.sqrt(0.25 / rows.sum()))  # fmt: skip


def test_gauss_markov_cells_and_steps_against_mpmath():
    mpmath.mp.dps = 30
    ch = GaussMarkov(10.0, 0.25, rho=0.9, grid=8)
    chain = ch.chain([1e-3])
    edges = [0.25, *chain.boundaries.tolist(), mpmath.inf]
    mean, floor, r = mpmath.mpf(10), mpmath.mpf("0.25"), mpmath.mpf("0.9") ** 2

    def density(y):  # the stationary law: floor + Exp(mean)
        return mpmath.exp(-(y - floor) / mean) / mean

    for k in (0, 3, 7):
        lo, hi = edges[k], edges[k + 1]
        p = mpmath.quad(density, [lo, hi])
        g = mpmath.quad(lambda y: density(y) / mpmath.log(1 + y, 2), [lo, hi]) / p
        assert float(p) == pytest.approx(1 / 8, rel=1e-9)
        assert math.log(2) / math.log1p(chain.snr[k]) == pytest.approx(float(g), rel=1e-9)
    x = mpmath.mpf(float(chain.snr[2]))
    s = mean * (1 - r)

    def step(y):  # the SNR one step on from x: a scaled non-central chi-square, 2 dof
        return mpmath.exp(-(y + r * x) / s) * mpmath.besseli(0, 2 * mpmath.sqrt(r * x * y) / s) / s

    above = mpmath.quad(step, [floor, x, mpmath.inf])
    for j in (0, 2, 7):
        want = mpmath.quad(step, [edges[j], edges[j + 1]]) / above
        assert chain.transitions[0][2, j] == pytest.approx(float(want), rel=1e-9)


def test_a_replayed_trace_keeps_its_order_and_an_iid_one_does_not():
    from inferplan.coinference import Trace, sample_snr

    recorded = tuple(float(v) for v in np.repeat([0.5, 2.0, 9.0, 30.0], 50))  # slow fading
    replayed = default_system(channel=Trace(recorded, replay=True), layers=mlp_layers(8, 3))
    paths = sample_snr(replayed, np.random.default_rng(0), 20_000)
    # Every row is a window of the trace: four consecutive samples (wrapping around).
    windows = {tuple(recorded[(s + k) % len(recorded)] for k in range(4))
               for s in range(len(recorded))}  # fmt: skip
    assert all(tuple(row) in windows for row in paths.tolist())
    assert np.mean(paths[:, 1] == paths[:, 0]) > 0.9
    for n in range(4):  # each stage still sees every level equally often
        _, counts = np.unique(paths[:, n], return_counts=True)
        np.testing.assert_allclose(counts / 20_000, 0.25, atol=0.02)
    iid = dataclasses.replace(replayed, channel=Trace(recorded))
    assert np.mean(sample_snr(iid, np.random.default_rng(0), 20_000)[:, 1] == paths[:, 0]) < 0.5
    assert load_system_roundtrip(replayed).channel == Trace(recorded, replay=True)


def load_system_roundtrip(system: System) -> System:
    from inferplan.coinference import system_from_dict

    return system_from_dict(system.to_dict())


def test_jakes_paths_have_clarke_correlation_at_every_lag():
    ch = GaussMarkov(10.0, 1e-9, speed_mps=3.0, carrier_hz=2.4e9, sampler="jakes")
    steps = [0.002, 0.004, 0.006]
    paths = ch.sample_paths(np.random.default_rng(0), 100_000, steps) / 10.0
    for n, lag in enumerate(np.cumsum(steps), start=1):
        # |h|^2 of Rayleigh fading correlates as J0(2 pi f_D tau)^2.
        want = float(clarke_correlation(3.0, 2.4e9, lag)) ** 2
        assert np.corrcoef(paths[:, 0], paths[:, n])[0, 1] == pytest.approx(want, abs=0.02)
    assert paths.mean() == pytest.approx(1.0, abs=0.02)
    floored = GaussMarkov(10.0, 2.0, speed_mps=3.0, carrier_hz=2.4e9, sampler="jakes")
    assert floored.sample_paths(np.random.default_rng(1), 5_000, steps).min() >= 2.0
    with pytest.raises(InvalidSystem, match="jakes draws Clarke's model"):
        GaussMarkov(10.0, 0.25, rho=0.5, sampler="jakes")
