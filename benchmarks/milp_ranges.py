"""The MILP against PSG on random instances over real-world ranges:
``python benchmarks/milp_ranges.py [--instances 80] [--seed 0]``.

Small random DAGs (2-6 nodes, 1-5 blocks) with capacities 1e6-1e15 FLOP/s, bandwidths
1e3-1e12 bit/s and prices 1e-15-1e-3, each drawn log-uniformly per element, then the same with
every range widened by 60 decades either way; targets ``alpha T*`` with ``alpha`` in
[0.01, 1.2]. For each instance the MILP's outcome is compared with PSG's exact optimum and
counted: optimal and equal to PSG (to a relative 1e-8), "optimal" but dearer than PSG (a wrong
answer), below PSG (impossible), uncertified, time limit, the same refusal as PSG
(infeasible, beyond floating point), or an error PSG does not raise. Also prints the MILP's
median and largest time per solve.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import numpy as np

import inferplan
from inferplan.codesign import compile_instance, solve_milp, solve_psg, throughput_optimal
from inferplan.errors import InferplanError

REL = 1e-8


def instance(rng: np.random.Generator, spread: float) -> tuple[object, float]:
    def log_uniform(low: float, high: float) -> float:
        return float(10.0 ** rng.uniform(np.log10(low) - spread, np.log10(high) + spread))

    n = int(rng.integers(2, 7))
    ids = [f"n{k}" for k in range(n)]
    pairs = {(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.5}
    pairs |= {(k, k + 1) for k in range(n - 1)}

    def price() -> float:
        return 0.0 if rng.random() < 0.1 else log_uniform(1e-15, 1e-3)

    net = inferplan.Network(
        nodes=tuple(inferplan.Node(v, log_uniform(1e6, 1e15), price()) for v in ids),
        links=tuple(inferplan.Link(ids[u], ids[v], log_uniform(1e3, 1e12), price())
                    for u, v in sorted(pairs)),
        source=ids[0], target=ids[-1],
    )  # fmt: skip
    blocks = int(rng.integers(1, 6))
    profile = inferplan.Profile(
        "wide",
        flops=tuple(10.0 ** rng.uniform(6, 12, blocks)),
        activation_bits=tuple(10.0 ** rng.uniform(3, 9, blocks + 1)),
    )
    inst = compile_instance(net, profile)
    return inst, float(rng.uniform(0.01, 1.2)) * throughput_optimal(inst).interval


def outcome(inst: object, beta: float) -> tuple[str, float]:
    try:
        psg = solve_psg(inst, beta)  # type: ignore[arg-type]
    except InferplanError as error:
        psg = type(error).__name__
    start = time.perf_counter()
    try:
        plan = solve_milp(inst, beta)  # type: ignore[arg-type]
    except InferplanError as error:
        plan = type(error).__name__
    except Exception as error:
        plan = f"crash {type(error).__name__}"
    took = time.perf_counter() - start
    if isinstance(psg, str) or isinstance(plan, str):
        if psg == plan:
            return f"same refusal ({psg})", took
        return f"MILP {plan} where PSG gives {psg if isinstance(psg, str) else 'a plan'}", took
    status = getattr(plan, "status", "optimal")
    if plan.cost < psg.cost * (1 - 1e-12):
        return "below PSG (impossible)", took
    if status != "optimal":
        return status, took
    if plan.cost <= psg.cost * (1 + REL) or plan.cost == psg.cost:
        return "optimal, equal to PSG", took
    return f"optimal but dearer than PSG (wrong; up to {plan.cost / psg.cost:.3g}x)", took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=80)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for spread, label in ((0.0, "real-world ranges"), (60.0, "ranges widened by 60 decades")):
        rng = np.random.default_rng(args.seed)
        counts: collections.Counter[str] = collections.Counter()
        times, worst = [], 1.0
        for _ in range(args.instances):
            inst, beta = instance(rng, spread)
            with np.errstate(all="ignore"):
                kind, took = outcome(inst, beta)
            if kind.startswith("optimal but dearer"):
                worst = max(worst, float(kind.split("up to ")[1].rstrip("x)")))
                kind = "optimal but dearer than PSG (wrong)"
            counts[kind] += 1
            times.append(took)
        print(f"\n{label}: {args.instances} instances")
        for kind, count in counts.most_common():
            print(f"  {count:4d}  {kind}")
        if worst > 1:
            print(f"  worst wrong plan: {worst:.6g}x PSG's optimum")
        print(f"  MILP time per solve: median {statistics.median(times) * 1e3:.1f} ms, "
              f"max {max(times) * 1e3:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
