"""Benchmarks of the latency planners: ``python benchmarks/latency.py [--quick]``.

Prints three tables, CPU seconds (``time.process_time``, the machine being shared):

(a) ``provision(..., latency=L)`` (PSG under a latency bound) on the paper's instance family:
    tiered networks x VGG-16 / ResNet-50, ``beta = 0.5 T*``, ``L`` = 0.9, 0.75 and 0.5 times
    the latency of the cheapest plan for ``beta`` alone; median and 90th percentile per solve
    of a compiled instance, each solve's least CPU time of three (target: median at most
    5 ms).
(b) the same on a random layered DAG of 1,000 nodes / 10,000 links, N = 50, linear costs,
    ``L`` = 0.75 times that latency (target: at most 5 s).
(c) ``inferplan latency`` (the least-latency deployment, no interval) at 5,000 nodes / 50,000
    links / N = 200 (target: at most 1 s), the solve alone on a compiled instance.
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import inferplan
from inferplan.codesign import compile_instance, solve_psg, throughput_optimal
from inferplan.codesign.latency.bound import solve_latency
from inferplan.codesign.latency.least import least_latency
from run import _profile  # the scaling benchmarks' random profiles (benchmarks/run.py)


def _cpu(call: object) -> float:
    start = time.process_time()
    call()  # type: ignore[operator]
    return time.process_time() - start


def paper(seeds: int) -> None:
    times: list[float] = []
    statuses: dict[str, int] = {}
    for seed in range(seeds):
        for profile in (inferplan.vgg16(), inferplan.resnet50()):
            inst = compile_instance(inferplan.tiered(seed=seed), profile)
            beta = 0.5 * throughput_optimal(inst).interval
            free = solve_psg(inst, beta)
            assert free.latency is not None
            for share in (0.9, 0.75, 0.5):
                bound = share * free.latency
                plan = solve_latency(inst, beta, latency=bound)
                statuses[plan.status] = statuses.get(plan.status, 0) + 1
                times.append(min(_cpu(partial(solve_latency, inst, beta, latency=bound))
                                 for _ in range(3)))  # fmt: skip
    times.sort()
    p90 = times[int(0.9 * (len(times) - 1))]
    print("(a) paper-size, latency-bounded PSG: "
          f"{len(times)} solves, median {1e3 * statistics.median(times):.2f} ms, "
          f"p90 {1e3 * p90:.2f} ms, statuses {statuses}")  # fmt: skip


def large(nodes: int, links: int, blocks: int) -> None:
    inst = compile_instance(inferplan.layered_dag(nodes, links, seed=1), _profile(blocks))
    beta = 0.5 * throughput_optimal(inst).interval
    free = solve_psg(inst, beta)
    assert free.latency is not None
    bound = 0.75 * free.latency
    found: list[inferplan.Plan] = []
    seconds = _cpu(lambda: found.append(solve_latency(inst, beta, latency=bound)))
    plan = found[0]
    print(f"(b) {nodes} nodes / {links} links / N = {blocks}, latency-bounded PSG: "
          f"{seconds:.2f} s CPU, status {plan.status}, cost {plan.cost:.6g} "
          f"(interval alone {free.cost:.6g})")  # fmt: skip


def fastest(nodes: int, links: int, blocks: int) -> None:
    inst = compile_instance(inferplan.layered_dag(nodes, links, seed=2), _profile(blocks))
    least_latency(inst)  # warm the instance's cached arrays
    best = min(_cpu(lambda: least_latency(inst)) for _ in range(2))
    print(f"(c) {nodes} nodes / {links} links / N = {blocks}, least latency: {best:.2f} s CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller series")
    quick = parser.parse_args().quick
    paper(3 if quick else 10)
    large(300, 3_000, 30) if quick else large(1_000, 10_000, 50)
    fastest(1_000, 10_000, 50) if quick else fastest(5_000, 50_000, 200)


if __name__ == "__main__":
    main()
