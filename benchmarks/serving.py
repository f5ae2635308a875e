"""Benchmark of the serving planner: ``python benchmarks/serving.py [--seeds K]``.

A 70B decoder (``examples/llama-70b.yaml``: 80 layers), the 3-type catalog
``examples/gpus.yaml`` (L4, A10G, A100-80GB at 1, 2, 4 and 8 units) and a 24-node network: a
source, four tiers of 6, 6, 5 and 5 nodes, a target, every node of a tier linked to every node
of the next (random 10-100 Gbit/s, 5-50 µs). The workload is ``examples/chat-workload.yaml``
(two classes, TTFT 2 s, TPOT 50 ms) at 4 requests/s. Prints, per seed, the wall seconds of one
``plan_serving`` call with the default batches (1, 2, ..., 256), the plan's $/h, batch and
stages.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time

import numpy as np

from inferplan.codesign.serving import plan_serving
from inferplan.codesign.serving.files import load_catalog, load_decoder, load_workload
from inferplan.network import Network
from inferplan.network.network import Link, Node

TIERS = (6, 6, 5, 5)


def network(seed: int) -> Network:
    rng = np.random.default_rng(seed)
    tiers = [["s"], *[[f"n{t}_{k}" for k in range(n)] for t, n in enumerate(TIERS)], ["t"]]
    nodes = [Node(v, 1e12) for tier in tiers for v in tier]
    links = [Link(u, v, float(rng.uniform(10e9, 100e9)), delay_s=float(rng.uniform(5e-6, 5e-5)))
             for a, b in itertools.pairwise(tiers) for u in a for v in b]  # fmt: skip
    return Network(nodes, links, "s", "t")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    decoder = load_decoder("examples/llama-70b.yaml")
    catalog = load_catalog("examples/gpus.yaml")
    base = load_workload("examples/chat-workload.yaml")
    print(f"{'rate':>5} {'seed':>4} {'nodes':>5} {'links':>5} {'seconds':>8} {'$/h':>7} "
          f"{'batch':>5}  stages")  # fmt: skip
    for rate in (4.0,):
        workload = dataclasses.replace(base, requests_per_s=rate)
        for seed in range(args.seeds):
            net = network(seed)
            start = time.perf_counter()
            plan = plan_serving(net, decoder, workload, catalog=catalog)
            seconds = time.perf_counter() - start
            stages = ", ".join(f"{s.node}:{s.hardware.label}x{s.layers}L"
                               for s in plan.stages if s.hardware)  # fmt: skip
            print(
                f"{rate:5g} {seed:4d} {len(net.node_ids):5d} {net.link_tail.size:5d} "
                f"{seconds:8.2f} {plan.price_per_hour:7.2f} {plan.batch:5d}  {stages}"
            )


if __name__ == "__main__":
    main()
