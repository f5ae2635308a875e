"""Benchmarks of joint provisioning: ``python benchmarks/services.py [--quick] [--time-limit S]``.

Prints two tables:

(a) the issue's size: 10 services on a random layered DAG of 300 nodes and 3,000 links
    (``layered_dag``), each a random profile of N = 50 blocks (FLOPs 1e8-1e10, activations
    1e5-1e8 bits) from ``s`` to ``t`` at half its own T* (``alpha = 0.5``): the fast planner's
    time, cost, stated lower bound and gap; the MILP's size, time and outcome under
    ``--time-limit`` seconds (default 120).
(b) sizes where the MILP finishes: 3 services on layered DAGs of 30 nodes / 150 links, N = 10,
    3 seeds: both planners' times, the fast planner's true excess over the optimum and the
    gap it stated.

Times are wall seconds of one call on a compiled problem (``JointProblem``), the problem's
compilation shown apart. The machine is shared: timings are noisy. ``--quick`` runs (a) with a
30 s limit and (b) with 1 seed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import inferplan
from inferplan.codesign.services.fast import solve_joint_fast
from inferplan.codesign.services.joint import JointProblem, Service
from inferplan.codesign.services.milp import JointMilp, solve_joint_milp
from inferplan.errors import InvalidArgument


def _problem(
    nodes: int, links: int, blocks: int, count: int, seed: int, alpha: float = 0.5
) -> tuple[JointProblem, float]:
    net = inferplan.layered_dag(nodes, links, seed=seed)
    rng = np.random.default_rng(seed)
    services = []
    for k in range(count):
        profile = inferplan.Profile(
            f"random-{k}",
            flops=tuple(rng.uniform(1e8, 1e10, blocks)),
            activation_bits=tuple(rng.uniform(1e5, 1e8, blocks + 1)),
        )
        t_star = inferplan.throughput(net, profile).interval
        services.append(Service(f"svc{k}", profile, "s", "t", alpha * t_star))
    start = time.perf_counter()
    problem = JointProblem(net, services, require_acyclic=True)
    return problem, time.perf_counter() - start


def headline(time_limit: float) -> None:
    problem, compiled = _problem(300, 3000, 50, 10, seed=1)
    print("(a) 10 services, layered DAG 300 nodes / 3,000 links, N = 50, alpha = 0.5")
    print(f"    compile: {compiled:.2f} s")
    start = time.perf_counter()
    fast = solve_joint_fast(problem)
    took = time.perf_counter() - start
    print(f"    fast: {took:.2f} s, cost {fast.cost:.6g}, lower bound {fast.lower_bound:.6g}, "
          f"gap {fast.gap:.2%} ({fast.status})")  # fmt: skip
    start = time.perf_counter()
    milp = JointMilp(problem)
    built = time.perf_counter() - start
    rows = milp.need.shape[0] + milp.balance.shape[0] + milp.once.shape[0]
    print(f"    MILP: {milp.columns:,} columns, {rows:,} rows, built in {built:.1f} s")
    del milp
    start = time.perf_counter()
    try:
        exact = solve_joint_milp(problem, time_limit=time_limit)
        took = time.perf_counter() - start
        print(f"    MILP: {took:.1f} s ({exact.status}), cost {exact.cost:.6g}, lower bound "
              f"{exact.lower_bound:.6g}, gap {exact.gap:.2%}")  # fmt: skip
    except InvalidArgument as exc:
        took = time.perf_counter() - start
        print(f"    MILP: {took:.1f} s, no plan: {exc.message}")


def small(seeds: int) -> None:
    print("(b) 3 services, layered DAG 30 nodes / 150 links, N = 10, alpha = 0.5")
    print("    seed  fast s  MILP s  fast excess  stated gap  fast status")
    excess, fast_s, milp_s = [], [], []
    for seed in range(seeds):
        problem, _ = _problem(30, 150, 10, 3, seed=seed)
        start = time.perf_counter()
        fast = solve_joint_fast(problem)
        fast_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        exact = solve_joint_milp(problem)
        milp_s.append(time.perf_counter() - start)
        assert fast.lower_bound <= exact.cost * (1 + 1e-6), "the bound must stay below"
        excess.append(fast.cost / exact.cost - 1 if exact.cost > 0 else 0.0)
        print(f"    {seed:4d}  {fast_s[-1]:6.2f}  {milp_s[-1]:6.2f}  {excess[-1]:11.2%}  "
              f"{fast.gap:10.2%}  {fast.status} (MILP {exact.status})")  # fmt: skip
    print(f"    median: fast {statistics.median(fast_s):.2f} s, MILP {statistics.median(milp_s):.2f} s, "  # noqa: E501
          f"excess {statistics.median(excess):.2%}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 30 s limit and 1 seed")
    parser.add_argument("--time-limit", type=float, default=None, help="MILP seconds in (a)")
    args = parser.parse_args()
    limit = args.time_limit or (30.0 if args.quick else 120.0)
    small(1 if args.quick else 3)
    headline(limit)


if __name__ == "__main__":
    main()
