"""Flow plans (many pipelines at once) on the co-design study's tiered networks:
``python benchmarks/flows.py [--seeds 10] [--model vgg16] [--large] [--measured]``.

For each tiered network (seeds 0..S-1) it solves the largest flow and the least-cost flow
provisioning of 2 and 3 times the one-path throughput (``--multiples``), and prints the median
and largest time per solve, with the median flow over the one path's rate and how many
provisioning plans are certified optimal. ``--large`` also runs one layered DAG of
1,000 nodes and 10,000 links with a 50-block model under a time limit, and says where the time
goes: compiling, building the MILP, HiGHS. ``--measured`` plans under per-node loads instead:
every node's blocks measured at their FLOPs over its capacity times a random factor in
0.5..2 per block and node (seeded), the one path's throughput under the same times.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import inferplan
from inferplan.codesign import compile_instance
from inferplan.codesign.pipelines import flow
from inferplan.codesign.timing import FLOPS_OVER_CAPACITY, MeasuredBlocks
from inferplan.errors import InferplanError


def timed_highs() -> list[float]:
    """Wrap HiGHS to record the seconds of each call."""
    spent: list[float] = []
    inner = flow.highs

    def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    flow.highs = wrapped  # type: ignore[assignment]
    return spent


def measured(net: inferplan.Network, profile: inferplan.Profile, seed: int) -> MeasuredBlocks:
    """Each node's seconds per block: its FLOPs over the node's capacity, each times a random
    factor in 0.5..2."""
    rng = np.random.default_rng(seed)
    return MeasuredBlocks.of({n.id: [f / n.capacity * rng.uniform(0.5, 2.0)
                                     for f in profile.flops] for n in net.nodes})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--model", default="vgg16")
    parser.add_argument("--large", action="store_true")
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--multiples", type=float, nargs="+", default=[2.0, 3.0])
    parser.add_argument("--measured", action="store_true")
    args = parser.parse_args()
    spent = timed_highs()
    profile = getattr(inferplan, args.model)()
    t_flow, gain = [], []
    t_prov: dict[float, list[float]] = {m: [] for m in args.multiples}
    certified = dict.fromkeys(args.multiples, 0)
    for seed in range(args.seeds):
        net = inferplan.tiered(seed=seed)
        times = measured(net, profile, seed) if args.measured else FLOPS_OVER_CAPACITY
        inst = compile_instance(net, profile, require_acyclic=False, node_time=times)
        one = inferplan.throughput(net, profile, node_time=times).throughput
        start = time.perf_counter()
        best = flow.flow_throughput(inst)
        t_flow.append(time.perf_counter() - start)
        gain.append(best.throughput / one)
        for m in args.multiples:
            start = time.perf_counter()
            try:
                plan = flow.flow_provision(inst, m * one, time_limit=args.time_limit)
                certified[m] += plan.status == "optimal"
            except InferplanError as exc:
                print(f"seed {seed}, {m:g}x: {exc}")
            t_prov[m].append(time.perf_counter() - start)
    print(f"{args.model} on {args.seeds} tiered networks"
          + (" (measured block times: per-node loads)" if args.measured else ""))
    print(
        f"  flow T*:        median {statistics.median(t_flow):.3f} s, max {max(t_flow):.3f} s; "
        f"flow / one path: median {statistics.median(gain):.3f}, max {max(gain):.3f}"
    )
    for m, times in t_prov.items():
        print(f"  provision {m:g}x:   median {statistics.median(times):.3f} s, max "
              f"{max(times):.3f} s; {certified[m]} of {args.seeds} optimal")  # fmt: skip
    if not args.large:
        return
    rng = np.random.default_rng(0)
    blocks = 50
    big = inferplan.Profile(
        "synthetic-50",
        flops=tuple(rng.uniform(1e8, 1e9, blocks)),
        activation_bits=tuple(rng.uniform(1e4, 1e6, blocks + 1)),
    )
    start = time.perf_counter()
    net = inferplan.layered_dag(1000, 10_000, seed=0)
    inst = compile_instance(net, big, require_acyclic=False)
    compiled = time.perf_counter() - start
    spent.clear()
    start = time.perf_counter()
    try:
        plan = flow.flow_throughput(inst, time_limit=args.time_limit)
        said = f"{plan.status}, flow {plan.throughput:.4g}/s, gap {plan.gap:.2g}"
    except InferplanError as exc:
        said = str(exc)
    total = time.perf_counter() - start
    print(
        f"1,000 nodes / 10,000 links / N = {blocks}: compile {compiled:.2f} s, flow T* "
        f"{total:.2f} s of which HiGHS {sum(spent):.2f} s (building the MILP the rest): {said}"
    )


if __name__ == "__main__":
    main()
