"""The same plans bit for bit: ``python benchmarks/same_plans.py --save FILE`` on one commit,
``python benchmarks/same_plans.py --compare FILE`` on another.

Solves the example networks (``examples/network*.json``, ``cyclic.json``) and tiered networks
(seeds 0..``--seeds``-1) with VGG-16, ResNet-50 and a random chain of 12 blocks: ``T*`` (PSG
and the MILP), the least-latency deployment, and ``provision`` at 0.9, 0.6 and 0.3 of ``T*``
by every method (PSG, the MILP, PFP, PWF, the reference Algorithm 1), PSG and the MILP also
under a latency bound. Each record is the JSON of the plan (``Plan.to_dict``, floats as
``repr`` writes them, every bit) or of the error a solve raised (its type and message).
``--compare`` prints how many records are identical and the first ones that differ, and
exits 1 if any does.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import inferplan
from inferplan.errors import InferplanError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NETWORKS = ("network.json", "network-caps.json", "network-memory.json", "network-delays.json",
            "cyclic.json")  # fmt: skip
METHODS = ("psg", "milp", "pfp", "pwf", "psg-reference")


def _chain(blocks: int, seed: int) -> inferplan.Profile:
    rng = np.random.default_rng(seed)
    return inferplan.Profile(f"random-{blocks}", flops=tuple(rng.uniform(1e8, 1e10, blocks)),
                             activation_bits=tuple(rng.uniform(1e5, 1e8, blocks + 1)))  # fmt: skip


def _record(call: Callable[[], Any]) -> Any:
    try:
        return call().to_dict()
    except InferplanError as error:
        return {"error": type(error).__name__, "message": str(error)}


def records(seeds: int) -> Iterator[tuple[str, Any]]:
    """``(key, record)`` of every solve."""
    networks = [(name, inferplan.load_network(EXAMPLES / name)) for name in NETWORKS]
    networks += [(f"tiered-{seed}", inferplan.tiered(seed=seed)) for seed in range(seeds)]
    profiles = [inferplan.vgg16(), inferplan.resnet50(), _chain(12, 3)]
    for net_name, net in networks:
        for profile in profiles:
            key = f"{net_name}/{profile.name}"
            for method in ("psg", "milp"):
                yield (f"{key}/throughput/{method}",
                       _record(lambda: inferplan.throughput(net, profile, method=method)))  # noqa: B023  # fmt: skip
            yield f"{key}/latency_optimal", _record(lambda: inferplan.latency_optimal(net, profile))  # noqa: B023
            try:
                best = inferplan.throughput(net, profile, method="milp")
            except InferplanError:
                continue
            fastest = _record(lambda: inferplan.latency_optimal(net, profile))  # noqa: B023
            for share in (0.9, 0.6, 0.3):
                beta = best.interval / share
                for method in METHODS:
                    yield (f"{key}/provision/{share}/{method}",
                           _record(lambda: inferplan.provision(net, profile, interval=beta,  # noqa: B023
                                                               method=method)))  # noqa: B023  # fmt: skip
                if "latency" in fastest:
                    bound = 1.5 * fastest["latency"]
                    for method in ("psg", "milp"):
                        yield (f"{key}/provision/{share}/{method}/latency",
                               _record(lambda: inferplan.provision(net, profile, interval=beta,  # noqa: B023
                                                                   method=method, latency=bound)))  # noqa: B023  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--save", type=Path, help="write the records to this file")
    action.add_argument("--compare", type=Path, help="compare the records to this file")
    parser.add_argument("--seeds", type=int, default=8, help="tiered networks (default 8)")
    args = parser.parse_args()
    found = {key: json.loads(json.dumps(value)) for key, value in records(args.seeds)}
    if args.save:
        args.save.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        print(f"{len(found)} records written to {args.save}")
        return
    saved = json.loads(args.compare.read_text())
    differ = sorted(key for key in saved.keys() | found.keys() if saved.get(key) != found.get(key))
    print(f"{len(saved.keys() & found.keys()) - len(set(differ) & saved.keys() & found.keys())} "
          f"of {len(saved)} saved records identical, {len(found)} solved now, "
          f"{len(differ)} differ")  # fmt: skip
    for key in differ[:10]:
        print(f"  {key}: saved {saved.get(key)!r}\n  {' ' * len(key)}  now   {found.get(key)!r}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
