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
