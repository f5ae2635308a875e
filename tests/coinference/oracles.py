"""Independent brute-force references for the co-inference solvers (small discrete instances).

Nothing here uses the solver's arrays (``System.stage_costs``, thresholds, ...): costs are
recomputed from the raw parameters with the formulas of docs/model.md, part B.
"""

from __future__ import annotations

import itertools
import math

from inferplan.coinference import Discrete, System


def eta(system: System, n: int, snr: float) -> float:
    """Energy-time cost of splitting at stage ``n`` (1-based) when the SNR is ``snr``."""
    d, e, layers = system.device, system.edge, system.layers
    bt, be = 1.0 - system.energy_weight, system.energy_weight
    rate = d.bandwidth_hz * math.log2(1.0 + snr)
    upload_s = layers.input_bits[n - 1] / rate
    local = sum(layers.cycles[: n - 1])
    remote = sum(layers.cycles[n - 1 :])
    time = local / d.cpu_hz + upload_s + remote / e.cpu_hz
    energy = d.kappa * local * d.cpu_hz**2 + d.tx_power_w * upload_s
    return bt * time + be * energy


def placement_cost(system: System, m: int) -> float:
    return sum(system.layers.param_bits[:m]) / system.downlink_bps / system.inferences_per_update


def _levels(system: System, n: int) -> list[tuple[float, float]]:
    channel = system.channels[n - 1]
    assert isinstance(channel, Discrete)
    return list(zip(channel.snr, channel.prob, strict=True))


def policy_cost(system: System, m: int, stop: dict[tuple[int, int], bool]) -> float:
    """Expected ETC of a deterministic policy: ``stop[(n, level)]`` for stages ``n <= m``."""
    cost = sum(p * eta(system, m + 1, s) for s, p in _levels(system, m + 1))
    for n in range(m, 0, -1):
        cost = sum(
            p * (eta(system, n, s) if stop[(n, k)] else cost)
            for k, (s, p) in enumerate(_levels(system, n))
        )
    return cost


def brute_force_min_etc(system: System, m: int) -> float:
    """Minimum expected ETC over every deterministic stopping policy (stage x SNR level)."""
    keys = [(n, k) for n in range(1, m + 1) for k in range(len(_levels(system, n)))]
    best = math.inf
    for choice in itertools.product((False, True), repeat=len(keys)):
        best = min(best, policy_cost(system, m, dict(zip(keys, choice, strict=True))))
    return best


def threshold_rule_cost(system: System, thresholds: tuple[float, ...]) -> float:
    """Expected ETC of "stop at the first n with snr >= thresholds[n-1]", by enumeration."""
    m = len(thresholds)
    stop = {
        (n, k): s >= thresholds[n - 1]
        for n in range(1, m + 1)
        for k, (s, _) in enumerate(_levels(system, n))
    }
    return policy_cost(system, m, stop)


def agreement_probability(
    system: System, first: tuple[float, ...], second: tuple[float, ...]
) -> float:
    """P(two threshold rules split at the same stage), summed over every joint SNR outcome."""
    m = len(first)
    total = 0.0
    for outcome in itertools.product(*(_levels(system, n) for n in range(1, m + 1))):
        prob = math.prod(p for _, p in outcome)

        def split(
            thresholds: tuple[float, ...], outcome: tuple[tuple[float, float], ...] = outcome
        ) -> int:
            return next((n for n, (s, _) in enumerate(outcome, 1) if s >= thresholds[n - 1]), m + 1)

        total += prob * (split(first) == split(second))
    return total


# ------------------------------------------------------------------ channels with memory


def markov_paths(
    snr: tuple[float, ...],
    transitions: list[list[list[float]]],
    initial: tuple[float, ...],
    stages: int,
) -> list[tuple[tuple[int, ...], float]]:
    """Every state path over ``stages`` stages with its probability under the chain
    (``transitions[n - 1]`` takes stage ``n`` to ``n + 1``)."""
    out = []
    for path in itertools.product(range(len(snr)), repeat=stages):
        prob = initial[path[0]]
        for n in range(1, stages):
            prob *= transitions[n - 1][path[n - 1]][path[n]]
        if prob > 0:
            out.append((path, prob))
    return out


def markov_policy_cost(
    system: System,
    snr: tuple[float, ...],
    paths: list[tuple[tuple[int, ...], float]],
    m: int,
    stop: dict[tuple[int, int], bool],
) -> float:
    """Expected ETC of "split at the first n <= m with stop[(n, state)]", over every path."""
    total = 0.0
    for path, prob in paths:
        n = next((n for n in range(1, m + 1) if stop[(n, path[n - 1])]), m + 1)
        total += prob * eta(system, n, snr[path[n - 1]])
    return total


def markov_brute_force(
    system: System,
    snr: tuple[float, ...],
    transitions: list[list[list[float]]],
    initial: tuple[float, ...],
    m: int,
) -> tuple[float, list[dict[tuple[int, int], bool]]]:
    """The least expected ETC over every stopping decision per (stage, state), and every
    decision table that reaches it (within 1e-12 relative)."""
    paths = markov_paths(snr, transitions, initial, m + 1)
    keys = [(n, k) for n in range(1, m + 1) for k in range(len(snr))]
    results = []
    for choice in itertools.product((False, True), repeat=len(keys)):
        stop = dict(zip(keys, choice, strict=True))
        results.append((markov_policy_cost(system, snr, paths, m, stop), stop))
    best = min(cost for cost, _ in results)
    return best, [stop for cost, stop in results if cost <= best * (1 + 1e-12) + 1e-300]


def markov_history_optimum(
    system: System,
    snr: tuple[float, ...],
    transitions: list[list[list[float]]],
    initial: tuple[float, ...],
    m: int,
) -> float:
    """The least expected ETC over every rule that may look at the whole SNR history (an
    expectimax over the tree of histories, not over states)."""

    def value(history: tuple[int, ...]) -> float:
        n = len(history)
        now = eta(system, n, snr[history[-1]])
        if n == m + 1:
            return now
        row = transitions[n - 1][history[-1]]
        go_on = sum(p * value((*history, j)) for j, p in enumerate(row) if p > 0)
        return min(now, go_on)

    return sum(p * value((k,)) for k, p in enumerate(initial) if p > 0)
