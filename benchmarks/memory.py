"""Node memory in PSG and T*: ``python benchmarks/memory.py [--quick]``.

Prints two tables:

(a) the paper's instance family (tiered networks x VGG-16 / ResNet-50 x alpha in {0.25, 0.4,
    0.6, 0.8}) solved by PSG on each engine three ways: without memory, with memory limits
    alone (every node half to twice the whole model's need, not for sale), and with memory
    for sale (a price per byte on every node, a third of them in 1 GB modules): the median
    time per solve and its ratio to the solve without memory (target: at most 2x).
(b) PSG and T* on a random layered DAG of 5,000 nodes / 50,000 links with N = 200 blocks, a
    memory limit on every node (target: at most 2 s per compiled PSG solve), beside the same
    network without memory; and with memory for sale on 1 % of the nodes (priced into
    tables, ``O(N^2)`` each).

Times are the fewest CPU seconds of a few solves of a compiled instance (the kernels compiled
or loaded first); the machine is shared, so quote them with the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import inferplan
from inferplan import Network
from inferplan.codesign import compile_instance, solve_psg, throughput_optimal
from inferplan.codesign.engine.compiled import available
from inferplan.network.costs import ModuleCost
from inferplan.profiles import memory_need

ALPHAS = (0.25, 0.4, 0.6, 0.8)
ENGINES = ("compiled", "numpy") if available() else ("numpy",)


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    """Fewest CPU seconds of ``repeat`` calls of ``fn``, after one warm-up call (CPU time: the
    shared machine's load stretches wall times several-fold)."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def with_memory(net: Network, need: float, seed: int, *, priced: float) -> Network:
    """``net`` with a memory on every node, from half to twice ``need`` bytes; a fraction
    ``priced`` of them sells memory (a price per byte, or 1 GB modules for one in three)."""
    rng = np.random.default_rng(seed)
    n = len(net.node_ids)
    memory = need * rng.uniform(0.5, 2.0, n)
    sells = rng.random(n) < priced
    price = np.where(sells, rng.uniform(1e-9, 1e-8, n), np.nan)
    modules = {int(k): ModuleCost(1e9, 5.0) for k in np.flatnonzero(sells)[::3]}
    return Network.from_columns(
        node_ids=net.node_ids, node_capacity=net.node_capacity, node_price=net.node_price,
        link_source=[net.node_ids[k] for k in net.link_tail.tolist()],
        link_target=[net.node_ids[k] for k in net.link_head.tolist()],
        link_capacity=net.link_capacity, link_price=net.link_price, source=net.source,
        target=net.target, node_costs=net.node_costs, link_costs=net.link_costs,
        link_delay=net.link_delay, node_memory=memory, node_memory_price=price,
        node_memory_costs=modules,
    )  # fmt: skip


def paper_family(networks: int, repeat: int) -> None:
    print(f"(a) paper family, {networks} tiered networks x 2 models x {len(ALPHAS)} alphas: "
          "median ms per PSG solve")  # fmt: skip
    for engine in ENGINES:
        times: dict[str, list[float]] = {"none": [], "limits": [], "for sale": []}
        for seed in range(networks):
            net = inferplan.tiered(seed=seed)
            for profile in (inferplan.vgg16(), inferplan.resnet50()):
                need = float(memory_need(profile)[0, -1])
                forms = {"none": net, "limits": with_memory(net, need, seed, priced=0.0),
                         "for sale": with_memory(net, need, seed, priced=1.0)}  # fmt: skip
                base = compile_instance(net, profile)
                t_star = throughput_optimal(base).interval
                for name, form in forms.items():
                    inst = compile_instance(form, profile)
                    for alpha in ALPHAS:
                        solve = partial(_solve, inst, alpha * t_star, engine)
                        times[name].append(best_of(solve, repeat))
        plain = statistics.median(times["none"])
        for name, series in times.items():
            median = statistics.median(series)
            print(f"  {engine:8s} {name:9s} {1e3 * median:8.2f} ms  {median / plain:5.2f}x")


def _solve(inst: Any, beta: float, engine: str) -> None:
    with contextlib.suppress(inferplan.Infeasible):  # nothing fits, or caps: timed all the same
        solve_psg(inst, beta, engine=engine)


def large(nodes: int, links: int, blocks: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    profile = inferplan.Profile(
        f"random-{blocks}",
        flops=tuple(rng.uniform(1e8, 1e10, blocks)),
        activation_bits=tuple(rng.uniform(1e5, 1e8, blocks + 1)),
        params=tuple(int(p) for p in rng.integers(10_000, 5_000_000, blocks)),
    )
    net = inferplan.layered_dag(nodes, links, seed=1)
    need = float(memory_need(profile)[0, -1])
    print(f"(b) {nodes:,} nodes / {links:,} links, N = {blocks}: ms per solve "
          f"(whole model needs {need / 1e6:.0f} MB)")  # fmt: skip
    forms = {"no memory": net, "limits on every node": with_memory(net, 0.015 * need, 2, priced=0),
             "limits, 1% for sale": with_memory(net, 0.015 * need, 2, priced=0.01)}  # fmt: skip
    base = compile_instance(net, profile)
    beta = 0.5 * throughput_optimal(base).interval
    for name, form in forms.items():
        inst = compile_instance(form, profile)
        row = []
        for engine in ENGINES:
            if engine == "numpy" and nodes > 1000:
                continue  # the all-pairs engine takes minutes here
            psg = best_of(partial(_solve, inst, beta, engine), repeat)
            tstar = best_of(partial(throughput_optimal, inst, engine=engine), repeat)
            row.append(f"PSG {engine} {1e3 * psg:8.1f}   T* {engine} {1e3 * tstar:8.1f}")
        print(f"  {name:22s} " + "   ".join(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller series")
    quick = parser.parse_args().quick
    print(f"load average {os.getloadavg()[0]:.1f}")
    paper_family(networks=2 if quick else 10, repeat=3)
    if quick:
        large(1000, 10000, 100, repeat=2)
    else:
        large(5000, 50000, 200, repeat=3)


if __name__ == "__main__":
    main()
