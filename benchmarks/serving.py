"""Benchmark of the serving planner: ``python benchmarks/serving.py [--seeds K] [--pipelines any]``.

A 70B decoder (``examples/llama-70b.yaml``: 80 layers), the 3-type catalog
``examples/gpus.yaml`` (L4, A10G, A100-80GB at 1, 2, 4 and 8 units) and a 24-node network: a
source, four tiers of 6, 6, 5 and 5 nodes, a target, every node of a tier linked to every node
of the next (random 10-100 Gbit/s, 5-50 µs). The workload is ``examples/chat-workload.yaml``
(two classes, TTFT 2 s, TPOT 50 ms) at 4 requests/s. Prints, per seed, the wall seconds of one
``plan_serving`` call with the default batches (1, 2, ..., 256), the plan's $/h, batch and
stages; with ``--pipelines any``, of many pipelines (replicas, docs/serving.md), with the
status, the gap, the paths searched one by one and each replica's stages and rate.
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
    parser.add_argument("--pipelines", choices=("1", "any"), default="1")
    parser.add_argument(
        "--rate", type=float, action="append", help="requests/s (repeatable; 4 if none)"
    )
    parser.add_argument(
        "--time-limit", type=float, default=120.0, help="--pipelines any: seconds a plan may search"
    )
    args = parser.parse_args()
    if args.pipelines == "any":
        many(args)
        return
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


def many(args: argparse.Namespace) -> None:
    decoder = load_decoder("examples/llama-70b.yaml")
    catalog = load_catalog("examples/gpus.yaml")
    base = load_workload("examples/chat-workload.yaml")
    print(f"{'rate':>5} {'seed':>4} {'paths':>5} {'seconds':>8} {'status':>10} {'gap':>6} "
          f"{'searched':>8} {'$/h':>7}  replicas (batch, requests/s: stages)")  # fmt: skip
    for rate in args.rate or [4.0]:
        workload = dataclasses.replace(base, requests_per_s=rate)
        for seed in range(args.seeds):
            net = network(seed)
            start = time.perf_counter()
            plan = plan_serving(net, decoder, workload, catalog=catalog, pipelines="any",
                                time_limit=args.time_limit)  # fmt: skip
            seconds = time.perf_counter() - start
            replicas = "; ".join(
                f"b{r.batch} {r.requests_per_s:.3g}/s: "
                + ", ".join(f"{s.node}:{s.hardware.label}x{s.layers}L"
                            for s in r.stages if s.hardware)
                for r in plan.replicas)  # fmt: skip
            gap = "-" if plan.gap is None else f"{plan.gap:.2g}"
            print(f"{rate:5g} {seed:4d} {plan.paths:5d} {seconds:8.2f} {plan.status:>10} "
                  f"{gap:>6} {plan.paths_searched:8d} {plan.price_per_hour:7.2f}  {replicas}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
