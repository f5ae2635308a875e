"""Channels with memory: ``python benchmarks/channels.py [--runs 5]``.

Prints the fewest CPU seconds of ``--runs`` runs (``time.process_time``, which a loaded machine
inflates far less than wall time) of each case against its target:

=================================================================  ===============
case                                                               target
=================================================================  ===============
backward induction with memory, ``M = 20`` stages, ``K = 16``      10 ms
Gauss-Markov AlexNet system at the default grid, built and planned 100 ms
simulator on the Markov chain (``M = 20``, ``K = 16``, optimal)     1e6 inferences/s
Rician AlexNet system (``examples/system-rician.yaml``), planned   100 ms
simulator on that Rician system (its recursion, optimal)           (none)
=================================================================  ===============

The Gauss-Markov case builds a new system each run (a new mean SNR, so no cached integral
helps): the 64 cells' upload costs, one transition matrix per layer from Clarke's model, and
the optimal placement (a backward induction for every ``M``). The simulator case times
:func:`~inferplan.coinference.simulate` of one million inferences, planning included. The
Rician cases build the example's system anew each run (32 x 16 cells, one step matrix per
layer from Clarke's model) and simulate 200,000 inferences of its process on a system built
once. Exit status 0: the targets are reported, not enforced.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from inferplan.coinference import (
    GaussMarkov,
    Markov,
    RicianGaussMarkov,
    default_system,
    mlp_layers,
    plan_placement,
    simulate,
)
from inferplan.coinference.markov_stopping import memory_thresholds


def least_cpu(run: Callable[[int], object], runs: int) -> float:
    """The fewest CPU seconds of ``runs`` calls ``run(k)``."""
    best = float("inf")
    for k in range(runs):
        start = time.process_time()
        run(k)
        best = min(best, time.process_time() - start)
    return best


def markov_system(states: int = 16, layers: int = 20, seed: int = 0):  # type: ignore[no-untyped-def]
    """A 20-layer MLP over a random banded 16-state chain."""
    rng = np.random.default_rng(seed)
    matrix = np.zeros((states, states))
    for k in range(states):
        band = slice(max(0, k - 2), min(states, k + 3))
        matrix[k, band] = rng.random(matrix[k, band].size) + 0.1
    matrix /= matrix.sum(axis=1, keepdims=True)
    snr = tuple(np.geomspace(0.3, 100.0, states).tolist())
    channel = Markov(snr, tuple(map(tuple, matrix.tolist())))
    return default_system(channel=channel, layers=mlp_layers(512, layers))


def _rician(k: int) -> RicianGaussMarkov:
    """``examples/system-rician.yaml``'s channel, its mean SNR moved by ``k`` (no cache helps)."""
    return RicianGaussMarkov(10.0 + 1e-6 * k, 3.0, 0.25, speed_mps=1.5, carrier_hz=2.4e9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    system = markov_system()
    induction = least_cpu(lambda k: memory_thresholds(system, 20), max(args.runs, 20))
    gauss = least_cpu(
        lambda k: plan_placement(
            default_system(
                channel=GaussMarkov(10.0 + 1e-6 * k, 0.25, speed_mps=3.0, carrier_hz=2.4e9)
            )
        ),
        args.runs,
    )
    inferences = 1_000_000
    sim = least_cpu(lambda k: simulate(system, ["optimal"], inferences=inferences, seed=k), 3)
    rician = least_cpu(lambda k: plan_placement(default_system(channel=_rician(k))), args.runs)
    example = default_system(channel=_rician(0))
    draws = 200_000
    rician_sim = least_cpu(lambda k: simulate(example, ["optimal"], inferences=draws, seed=k), 3)
    rows = [
        ("backward induction with memory, M = 20, K = 16", f"{induction * 1e3:.2f} ms", "10 ms"),
        ("Gauss-Markov AlexNet, default grid, built + planned", f"{gauss * 1e3:.1f} ms", "100 ms"),
        ("simulator, Markov chain M = 20, K = 16", f"{inferences / sim:.3g} inferences/s",
         "1e6 inferences/s"),
        ("Rician AlexNet (32 x 16 cells), built + planned", f"{rician * 1e3:.0f} ms", "100 ms"),
        ("simulator, that Rician system", f"{draws / rician_sim:.3g} inferences/s", "none"),
    ]  # fmt: skip
    for name, value, target in rows:
        print(f"{name:<55} {value:>22}   target {target}")


if __name__ == "__main__":
    main()
