"""Rician fading with memory, observed as the complex gain: the (magnitude, phase) grid's rule,
its system-file form, the simulator's sampler of the process, and the rule the device runs."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import special, stats

from inferplan.coinference import (
    GaussMarkov,
    RicianGaussMarkov,
    StatePolicy,
    clarke_correlation,
    default_system,
    evaluate_policy,
    expected_costs,
    load_system,
    mlp_layers,
    plan_placement,
    policy_from_json,
    simulate,
    solve_stopping,
)
from inferplan.coinference.markov_stopping import (
    memory_optimal_etc_all,
    memory_thresholds,
    rician_threshold_curve,
)
from inferplan.errors import DivergentCost, InvalidArgument, InvalidSystem
from tests.cli import app, runner
from tests.cli import invoke_json as _json

LAYERS = mlp_layers(256, 4)
EXAMPLE = Path(__file__).parents[2] / "examples" / "system-rician.yaml"


def _system(channel):
    return default_system(layers=LAYERS, channel=channel)


def test_k_factor_zero_is_the_rayleigh_gauss_markov_channel():
    expected = memory_optimal_etc_all(_system(GaussMarkov(10.0, 0.25, rho=0.95, grid=1024)))
    rician = _system(RicianGaussMarkov(10.0, 0.0, 0.25, rho=0.95, radii=64, phases=1))
    # Both are grids of the same process; docs/coinference.md states 1e-4 at 64 rings.
    np.testing.assert_allclose(memory_optimal_etc_all(rician), expected, rtol=2e-4)
    # Without a line of sight the phase says nothing: every sector has the same threshold.
    sectors = _system(RicianGaussMarkov(10.0, 0.0, 0.25, rho=0.95, radii=16, phases=4))
    curve = rician_threshold_curve(sectors, memory_thresholds(sectors, 4)[0])
    assert np.all(np.ptp(curve, axis=1) == 0)


def test_the_grid_converges_and_the_phase_matters_with_a_line_of_sight():
    costs = [
        memory_optimal_etc_all(_system(RicianGaussMarkov(10.0, 3.0, 0.25, 0.95, radii=r, phases=p)))
        for r, p in ((8, 4), (16, 8), (32, 16))
    ]
    gaps = [float(np.max(np.abs(b / a - 1))) for a, b in itertools.pairwise(costs)]
    assert gaps[1] < 0.6 * gaps[0] and gaps[1] < 1e-2
    system = _system(RicianGaussMarkov(10.0, 3.0, 0.25, 0.95, radii=32, phases=16))
    curve = rician_threshold_curve(system, memory_thresholds(system, 4)[0])
    finite = np.isfinite(curve).all(axis=1)
    assert finite.any() and np.all(np.ptp(curve[finite], axis=1) > 0)


def _independent_paths(k, mean, floor, rhos, paths, seed):
    """The continuous process, written here from its definition and nothing of the library's
    sampler: ``h = m + s`` with ``s`` the Gauss-Markov recursion, every draw repeated until the
    SNR is at or above the floor. Returns the SNRs and the phases of ``h``."""
    rng = np.random.default_rng(seed)
    los, sd = math.sqrt(k / (k + 1)), math.sqrt(1 / (k + 1))

    def draw(centre, scale):
        out = np.empty(centre.size, dtype=complex)
        todo = np.arange(centre.size)
        while todo.size:
            z = rng.standard_normal(todo.size) + 1j * rng.standard_normal(todo.size)
            cand = centre[todo] + scale * z / math.sqrt(2)
            ok = mean * np.abs(cand) ** 2 >= floor
            out[todo[ok]] = cand[ok]
            todo = todo[~ok]
        return out

    h = [draw(np.full(paths, los, dtype=complex), sd)]
    for rho in rhos:
        h.append(draw(los + rho * (h[-1] - los), math.sqrt(1 - rho * rho) * sd))
    gains = np.stack(h, axis=1)
    return mean * np.abs(gains) ** 2, np.angle(gains)


def test_the_rule_costs_what_the_grid_predicts_in_both_monte_carlos():
    """The simulator (the library's sampler) and an independent Monte Carlo of the process,
    both deciding by the device's rule on (SNR, phase), agree with the grid's prediction."""
    system = _system(RicianGaussMarkov(10.0, 3.0, 0.25, rho=0.95, radii=64, phases=32))
    solution = solve_stopping(system, 4)
    policy = solution.policy()
    assert isinstance(policy, StatePolicy) and policy.phases == 32
    predicted = solution.expected_cost
    sim = simulate(system, [], inferences=200_000, seed=5, policies=[("rule", policy, predicted)])
    snr, phase = _independent_paths(3.0, 10.0, 0.25, [0.95] * 4, 200_000, seed=3)
    split = policy.split_points(snr, phase)
    a, b = system.stage_costs
    observed = snr[np.arange(snr.shape[0]), split - 1]
    independent = system.placement_costs[4] + a[split - 1] + b[split - 1] / np.log2(1 + observed)
    # The grid's own error at 64 x 32 is 3.6e-5 relative (docs/coinference.md): 3 SE + 1e-4.
    for mean, se in (
        (sim["rule"].mean_cost, sim["rule"].std_cost / math.sqrt(200_000)),
        (independent.mean(), independent.std() / math.sqrt(independent.size)),
    ):
        assert abs(mean - predicted) <= 3 * se + 1e-4 * predicted
    # The rule splits at several stages: the check is not of one forced upload.
    assert np.count_nonzero(np.bincount(split)) >= 3


def test_the_recursion_sampler_draws_the_process():
    channel = RicianGaussMarkov(10.0, 3.0, 0.25, rho=0.8)
    gains = channel.sample_gains(np.random.default_rng(0), 100_000, [1e-3] * 3)
    los, var = math.sqrt(3 / 4), 1 / 4
    # Stage 1: 2 |h|^2 / sigma^2 is a non-central chi-square (2 dof, non-centrality 2K) above
    # the floor.
    x = 2 * np.abs(gains[:, 0]) ** 2 / var
    low = 2 * 0.025 / var
    cut = special.chndtr(low, 2.0, 6.0)
    conditioned = stats.kstest(x, lambda v: (special.chndtr(v, 2.0, 6.0) - cut) / (1 - cut))
    assert conditioned.pvalue > 1e-3
    scattered = gains - los
    # One step: E[s_{n+1} | s_n] = rho s_n (the floor removes 0.6 % of the draws only).
    slope = np.vdot(scattered[:, 1], scattered[:, 2]) / np.vdot(scattered[:, 1], scattered[:, 1])
    assert slope.real == pytest.approx(0.8, abs=0.01) and abs(slope.imag) < 0.01
    assert channel.sample_paths(np.random.default_rng(1), 20_000, [1e-3] * 3).min() >= 0.25


def test_jakes_adds_the_line_of_sight_to_clarke_scattering():
    channel = RicianGaussMarkov(
        10.0, 3.0, 1e-9, speed_mps=3.0, carrier_hz=2.4e9, sampler="jakes", radii=4, phases=2
    )
    steps = [0.002, 0.004, 0.006]
    gains = channel.sample_gains(np.random.default_rng(0), 40_000, steps)
    los, var = math.sqrt(3 / 4), 1 / 4
    assert np.abs(gains.mean(axis=0) - los).max() < 0.015
    scattered = gains - los
    for n, lag in enumerate(np.cumsum(steps), start=1):
        # The scattered part's correlation is sigma^2 J0(2 pi f_D tau) at every lag.
        got = np.vdot(scattered[:, 0], scattered[:, n]).real / gains.shape[0]
        want = var * float(clarke_correlation(3.0, 2.4e9, lag))
        assert got == pytest.approx(want, abs=0.015)
    floored = RicianGaussMarkov(
        10.0, 3.0, 2.0, speed_mps=3.0, carrier_hz=2.4e9, sampler="jakes", radii=4, phases=2
    )
    assert floored.sample_paths(np.random.default_rng(1), 5_000, steps).min() >= 2.0


def test_the_policy_reads_the_phase_sector():
    system = _system(RicianGaussMarkov(10.0, 3.0, 0.25, rho=0.95, radii=8, phases=4))
    policy = solve_stopping(system, 3).policy()
    assert isinstance(policy, StatePolicy) and policy.phases == 4
    assert policy_from_json(policy.to_json()) == policy
    rng = np.random.default_rng(2)
    snr = 0.25 + rng.exponential(10.0, (500, 4))
    phase = rng.uniform(-math.pi, math.pi, (500, 4))
    split = policy.split_points(snr, phase)
    for row in range(50):  # one at a time, as the device decides
        first = next(n for n in range(1, 5) if policy.upload(n, snr[row, n - 1], phase[row, n - 1]))
        assert first == split[row]
    chain = system.chain
    k = chain.state_of(snr[:, 0], phase[:, 0])
    gains = np.sqrt(snr[:, 0] / 10) * np.exp(1j * phase[:, 0])
    assert np.array_equal(k, system.channel.state_of(gains))
    with pytest.raises(InvalidArgument, match="give the phase"):
        policy.split_points(snr)
    wrong = StatePolicy(policy.boundaries, tuple(row[:8] for row in policy.thresholds))
    with pytest.raises(InvalidArgument, match="states are not the channel's"):
        evaluate_policy(system, wrong)


def test_the_example_through_every_command(tmp_path):
    policy = tmp_path / "policy.json"
    out = _json(["coinfer", str(EXAMPLE), "--json", "--policy-out", str(policy)])
    system = load_system(EXAMPLE)
    plan = plan_placement(system)
    assert out["placement"] == plan.placement > 0 and out["phases"] == 16
    assert len(out["state_thresholds"][0]) == 32 * 16
    np.testing.assert_allclose(out["costs"], expected_costs(system), rtol=1e-12)
    assert policy_from_json(policy.read_text()) == plan.policy()
    table = runner.invoke(app, ["coinfer", str(EXAMPLE)])
    assert table.exit_code == 0 and "by phase" in table.stdout
    sim = _json(["coinfer-simulate", str(EXAMPLE), "--strategy", "optimal", "--inferences",
                 "20000", "--json"])  # fmt: skip
    result = sim["strategies"]["optimal"]
    assert result["analytic_cost"] == pytest.approx(plan.expected_cost, rel=1e-12)
    assert result["ci"][0] - 5e-3 * plan.expected_cost <= plan.expected_cost
    assert plan.expected_cost <= result["ci"][1] + 5e-3 * plan.expected_cost
    check = runner.invoke(app, ["validate", str(EXAMPLE)])
    assert check.exit_code == 0 and "rician gauss-markov" in check.stdout


def _with_channel(tmp_path, channel):
    """The example with ``channel`` (a YAML flow mapping) and the layers of ``LAYERS``."""
    text = EXAMPLE.read_text()
    path = tmp_path / "system.yaml"
    layers = json.dumps(LAYERS.to_dict())
    path.write_text(text[: text.index("channel:\n")] + f"channel: {channel}\nlayers: {layers}\n")
    return path


def test_k_factor_zero_in_a_file_gives_the_rayleigh_answers(tmp_path):
    """Without a line of sight, 64 rings of one sector are the Rayleigh channel's 64 cells:
    the same edges, representative SNRs and steps to quadrature accuracy, so every planner's
    answer is the Rayleigh one."""
    rician = load_system(_with_channel(tmp_path, "{kind: gauss-markov, fading: rician, "
                         "k_factor: 0, mean_snr: 10, min_snr: 0.25, rho: 0.95, radii: 64, "
                         "phases: 1}"))  # fmt: skip
    rayleigh = load_system(_with_channel(tmp_path, "{kind: gauss-markov, mean_snr: 10, "
                           "min_snr: 0.25, rho: 0.95}"))  # fmt: skip
    assert isinstance(rician.channel, RicianGaussMarkov)
    assert isinstance(rayleigh.channel, GaussMarkov) and rayleigh.channel.grid == 64
    for method in ("optimal", "1sla", "memoryless"):
        one, other = plan_placement(rician, method=method), plan_placement(rayleigh, method=method)
        assert one.placement == other.placement
        np.testing.assert_allclose(one.costs, other.costs, rtol=1e-9)
        np.testing.assert_allclose(one.thresholds, other.thresholds, rtol=1e-9)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("fading: ricean, k_factor: 3", "channel.fading: must be one of rayleigh, rician"),
        ("fading: rician", "channel.k_factor: is required with fading: rician"),
        ("fading: rician, k_factor: -1", "channel.k_factor: must be a K-factor"),
        ("fading: rician, k_factor: .nan", "channel.k_factor: must be a K-factor"),
        ("k_factor: 3", "channel.k_factor: applies to fading: rician, not rayleigh"),
        ("phases: 8", "channel.phases: applies to fading: rician, not rayleigh"),
        ("fading: rician, k_factor: 3, grid: 64", "channel.grid: applies to fading: rayleigh"),
        ("fading: rician, k_factor: 3, radii: 0", "channel.radii: must be an integer in 1..4096"),
        ("fading: rician, k_factor: 3, phases: 2.5", "channel.phases: "),
        ("fading: rician, k_factor: 3, radii: 512, phases: 16", "channel.phases: radii x phases"),
        ("fading: rician, k_factor: 3, rho: 1.5", "channel.rho: must be a correlation"),
        ("fading: rician, k_factor: 3, rho: [0.9, 0.9]", "channel.rho: must give one correlation "
         "per step between split stages (N = 4), got 2"),
        ("fading: rician, k_factor: 3, speed_mps: 1.5", "channel.carrier_hz: is required with "
         "the other of speed_mps and carrier_hz"),
        ("fading: rician, k_factor: 3, rho: 0.9, sampler: jakes", "channel.sampler: jakes draws"),
    ],
)  # fmt: skip
def test_bad_fields_are_one_clear_error(tmp_path, extra, message):
    rho = "" if ("rho" in extra or "speed" in extra) else ", rho: 0.9"
    path = _with_channel(tmp_path, f"{{kind: gauss-markov, mean_snr: 10, min_snr: 0.25{rho}, "
                         f"{extra}}}")  # fmt: skip
    result = runner.invoke(app, ["coinfer", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: {message}"), result.stderr
    assert result.stderr.count("\n") == 1


def test_rician_fading_needs_the_outage_floor(tmp_path):
    with pytest.raises(DivergentCost) as info:
        RicianGaussMarkov(10.0, 3.0, None, rho=0.9)
    assert info.value.field == "min_snr"
    path = _with_channel(tmp_path, "{kind: gauss-markov, fading: rician, k_factor: 3, "
                         "mean_snr: 10, rho: 0.9}")  # fmt: skip
    result = runner.invoke(app, ["coinfer", str(path)])
    assert result.exit_code == 2 and "channel.min_snr: is required with Rician" in result.stderr


@pytest.mark.parametrize(
    ("make", "field", "words"),
    [
        (lambda: RicianGaussMarkov(10.0, -1.0, 0.25, rho=0.9), "k_factor", "K-factor"),
        (lambda: RicianGaussMarkov(10.0, math.nan, 0.25, rho=0.9), "k_factor", "K-factor"),
        (lambda: RicianGaussMarkov(10.0, 3.0, 0.25, rho=1.5), "rho", "|rho| <= 1"),
        (lambda: RicianGaussMarkov(10.0, 3.0, 0.25, rho=(0.5, -1.01)), "rho[1]", "|rho| <= 1"),
        (lambda: RicianGaussMarkov(10.0, 3.0, -0.25, rho=0.9), "min_snr", ""),
        (lambda: RicianGaussMarkov(10.0, 3.0, 0.25, rho=0.9, radii=0), "radii", "1.."),
        (lambda: RicianGaussMarkov(10.0, 3.0, 0.25, 0.9, radii=512, phases=16), "phases", "4096"),
        (lambda: RicianGaussMarkov(10.0, 3.0, 0.25, speed_mps=-1.0, carrier_hz=2.4e9),
         "speed_mps", "non-negative"),
    ],
)  # fmt: skip
def test_bad_parameters_are_one_clear_error(make, field, words):
    with pytest.raises(InvalidSystem) as info:
        make()
    assert info.value.field == field and words in str(info.value)
    assert "\n" not in str(info.value)


def test_one_correlation_per_step_is_checked_against_the_layers():
    with pytest.raises(InvalidSystem, match="N = 4"):
        _system(RicianGaussMarkov(10.0, 3.0, 0.25, (0.9, 0.9)))


def test_a_sweep_point_takes_the_k_factor():
    from inferplan.experiments.coinference.point import build_system, coinference_point

    params = {"profile": "mlp-256x4", "channel": "gauss-markov", "rho": 0.95, "k_factor": 3.0}
    system = build_system(params)
    assert isinstance(system.channel, RicianGaussMarkov) and system.channel.k_factor == 3.0
    rows = coinference_point(params, 0, {"methods": ["optimal", "memoryless"]})
    curve = sorted((r for r in rows if r["record"] == "curve"), key=lambda r: r["M"])
    want = expected_costs(_system(RicianGaussMarkov(10.0, 3.0, 0.25, rho=0.95)))
    np.testing.assert_allclose([r["z_optimal"] for r in curve], want, rtol=1e-12)
    with pytest.raises(ValueError, match="k_factor apply to channel gauss-markov"):
        build_system({"channel": "rayleigh", "k_factor": 3.0})


def test_a_floor_far_in_the_tail_is_drawn_from_the_conditional_law():
    # P(SNR >= 50) = 8e-69 at stage 1: no rejection draw lands there; the exact conditional
    # law (the non-central chi-square above the floor, von Mises phases) is drawn instead.
    channel = RicianGaussMarkov(1.0, 3.0, 50.0, rho=0.0, radii=2, phases=2)
    gains = channel.sample_gains(np.random.default_rng(0), 2_000, [1e-3])
    x, low = 8 * np.abs(gains[:, 0]) ** 2, 8 * 50.0  # 2 |h|^2 / sigma^2, sigma^2 = 1/4
    tail = stats.ncx2.sf(low, 2.0, 6.0)
    assert x.min() >= low
    assert stats.kstest(x, lambda v: 1 - stats.ncx2.sf(v, 2.0, 6.0) / tail).pvalue > 1e-3
    assert np.mean(np.cos(np.angle(gains[:, 0]))) > 0.9  # about the line of sight
    with pytest.raises(InvalidSystem, match="beyond what the grid resolves") as info:
        RicianGaussMarkov(1e-15, 3.0, 1e15, rho=0.9)
    assert info.value.field == "min_snr"


def test_a_floor_far_in_the_tail_is_planned_from_the_library_and_the_cli(tmp_path):
    # P(SNR >= 20) = 4e-19 at stage 1: the cells' masses are resolved (erfc differences; a
    # difference of erf near 1 rounds them all to 0, a NaN law), and so is every plan.
    channel = "{kind: gauss-markov, fading: rician, k_factor: 2, mean_snr: 1, min_snr: 20, "
    path = _with_channel(tmp_path, channel + "rho: 0.9}")
    system = load_system(path)
    costs = expected_costs(system)
    assert np.isfinite(costs).all() and np.all(costs > 0)
    out = _json(["coinfer", str(path), "--json"])
    np.testing.assert_allclose(out["costs"], costs, rtol=1e-12)
    assert out["placement"] == plan_placement(system).placement
