"""Flow plans run: ``python benchmarks/flow_runs.py [--plans 24] [--inferences 150] [--json]
[--testbed [--dilation K]]``.

Generates small networks where many pipelines beat one path (seeded; only those whose flow
``T*`` is at least 5 % above the one-path ``T*`` are kept), plans the largest flow on each
(:func:`~inferplan.codesign.pipelines.flow.flow_throughput`), runs it with emulated capacities
(:func:`~inferplan.runtime.flows.run_flow`: one rank per node, closed loop) and prints the
measured throughput beside the predicted one, with the share of plans within 10 %.

Three kinds of network, on an 8-block MLP (:func:`model`):

* ``parallel``: 2-4 nodes side by side between a weak source and target, each able to hold the
  whole model: the flow splits over paths;
* ``replicated``: a chain ``s, a, {b0, b1[, b2]}, c, t`` whose nodes hold only part of the
  model (memory), the middle ones slow: a stage replicated on parallel nodes;
* ``layered``: two layers of 2-3 nodes, every link between consecutive layers, random
  capacities, bandwidths and memories.

Capacities are drawn so that a stage takes 5-40 ms and a transfer 1-20 ms, times that pacing
holds on a busy machine. For a plan measured more than 10 % off, the elements whose measured
time per inference exceeds the planned one by more than 5 % are listed (the explanation).

With ``--testbed`` (root) each plan runs on the kernel-shaped testbed instead of emulated
capacities (:mod:`inferplan.runtime.testbed.flows`), its time dilated at least ``--dilation``
times; its times and throughputs are then the run's own, and a node's explanation adds the
CPU its range took per inference and the quota it started with.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from torch import nn

import inferplan
from inferplan.codesign.instance import compile_instance
from inferplan.codesign.pipelines.flow import flow_throughput
from inferplan.network import load_network
from inferplan.profiles.from_torch import profile_module
from inferplan.runtime.flows import run_flow
from inferplan.runtime.pipeline import RunRequest, StageFailed

WIDTH, DEPTH = 64, 8
MODEL = f"{Path(__file__).resolve()}:model"


def model() -> nn.Sequential:
    """``DEPTH`` blocks of ``Linear(WIDTH, WIDTH)`` and a ReLU."""
    return nn.Sequential(*[nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU())
                           for _ in range(DEPTH)])  # fmt: skip


def _profile() -> Any:
    with torch.device("meta"):
        m = model()
    return profile_module(m, [(1, WIDTH)]).profile


def _node(rng: random.Random, name: str, work: float, share: float | None = None,
          slow: tuple[float, float] = (0.005, 0.04)) -> dict[str, Any]:  # fmt: skip
    """A node that runs the whole model in a time drawn from ``slow`` (s); with ``share``, the
    memory for that share of the model's parameters."""
    out: dict[str, Any] = {"id": name, "capacity": work / rng.uniform(*slow), "price": 1.0}
    if share is not None:
        out["memory"] = share
    return out


def _link(rng: random.Random, u: str, v: str, bits: float,
          slow: tuple[float, float] = (0.001, 0.02)) -> dict[str, Any]:  # fmt: skip
    return {"source": u, "target": v, "capacity": bits / rng.uniform(*slow), "price": 1.0}


def network(kind: str, seed: int, profile: Any) -> dict[str, Any]:
    """A network of ``kind`` drawn from ``seed`` for ``profile``."""
    rng = random.Random(f"{kind}-{seed}")
    work = float(sum(profile.flops))
    bits = float(max(profile.activation_bits[1:-1]))
    need = float(sum(profile.params)) * 4 + 4 * WIDTH * 8  # the weights and a little more
    weak = {"slow": (1.0, 2.0)}  # a source and a target that can hardly compute
    nodes = [_node(rng, "s", work, **weak), _node(rng, "t", work, **weak)]  # type: ignore[arg-type]
    links = []
    if kind == "parallel":
        middle = [f"m{k}" for k in range(rng.randint(2, 4))]
        nodes += [_node(rng, v, work) for v in middle]
        links += [_link(rng, "s", v, bits) for v in middle]
        links += [_link(rng, v, "t", bits) for v in middle]
    elif kind == "replicated":
        for end in nodes:  # the source and the target hold their tensors and no block
            end["memory"] = 2 * bits / 8
        wide = [f"b{k}" for k in range(rng.randint(2, 3))]
        part = rng.uniform(0.35, 0.45)
        nodes += [_node(rng, "a", work, need * part, slow=(0.003, 0.01)),
                  _node(rng, "c", work, need * part, slow=(0.003, 0.01))]  # fmt: skip
        nodes += [_node(rng, v, work, need * rng.uniform(0.35, 0.5), slow=(0.03, 0.08))
                  for v in wide]  # fmt: skip
        links += [_link(rng, "s", "a", bits), _link(rng, "c", "t", bits)]
        links += [_link(rng, "a", v, bits) for v in wide] + [_link(rng, v, "c", bits)
                                                              for v in wide]  # fmt: skip
    else:
        first = [f"x{k}" for k in range(rng.randint(2, 3))]
        second = [f"y{k}" for k in range(rng.randint(2, 3))]
        nodes += [_node(rng, v, work, need * rng.uniform(0.4, 1.2)) for v in first + second]
        links += [_link(rng, "s", v, bits) for v in first]
        links += [_link(rng, u, v, bits) for u in first for v in second]
        links += [_link(rng, v, "t", bits) for v in second]
    return {"source": "s", "target": "t", "nodes": nodes, "links": links}


def _explain(report: Any) -> list[str]:
    """The elements measured more than 5 % slower per inference than planned."""
    out = []
    for n in report.nodes:
        if n["planned_s"] > 0 and n["inferences"] and n["measured_s"] > 1.05 * n["planned_s"]:
            alone = f"work alone {n['real_s'] * 1e3:.2f} ms"
            if "cpu_s" in n and n["quota_last"]:  # the time its quota promises, CPU / quota
                alone = (f"CPU {n['cpu_s'] * 1e3:.1f} ms under a quota of "
                         f"{n['quota_last']:.2f}: {n['cpu_s'] / n['quota_last'] * 1e3:.1f} ms")
            out.append(f"node {n['id']} {n['measured_s'] * 1e3:.1f} ms vs "
                       f"{n['planned_s'] * 1e3:.1f} ms planned ({alone})")  # fmt: skip
    for e in report.links:
        if e["planned_s"] > 0 and e["measured_s"] > 1.05 * e["planned_s"]:
            out.append(f"link {e['id']} {e['measured_s'] * 1e3:.1f} ms vs "
                       f"{e['planned_s'] * 1e3:.1f} ms planned")  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=24, help="plans to run (default 24)")
    parser.add_argument("--inferences", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="one JSON object per plan")
    parser.add_argument("--testbed", action="store_true",
                        help="on the kernel-shaped testbed (root), not emulated")
    parser.add_argument("--dilation", type=float, default=None,
                        help="with --testbed: stretch each run's time at least this much")
    parser.add_argument("--only", nargs="*", default=None, metavar="PLAN",
                        help="run only these plans (e.g. layered-10), of the same draw")
    args = parser.parse_args(argv)
    profile = _profile()
    rows = []
    kinds = ["parallel", "replicated", "layered"]
    seed = 0
    with tempfile.TemporaryDirectory() as tmp:
        while len(rows) < args.plans and seed < 50 * args.plans:
            kind, number = kinds[seed % 3], seed // 3
            raw = network(kind, number, profile)
            seed += 1
            path = Path(tmp, "net.json")
            path.write_text(json.dumps(raw))
            net = load_network(path)
            try:
                one = inferplan.throughput(net, profile).throughput
            except inferplan.errors.InferplanError:
                one = 0.0
            try:
                flow = flow_throughput(compile_instance(net, profile, require_acyclic=False,
                                                        cuts="chain"))  # fmt: skip
            except inferplan.errors.Infeasible:
                continue
            if flow.throughput < 1.05 * one:
                continue
            if args.only is not None and f"{kind}-{number}" not in args.only:
                rows.append({"skipped": True})  # counted as the full draw counts it
                continue
            request = RunRequest(network=net, model=MODEL, input_shapes=((1, WIDTH),),
                                 inferences=args.inferences, warmup=args.warmup,
                                 timeout_s=60.0, testbed=args.testbed,
                                 dilation=args.dilation)  # fmt: skip
            try:
                report = run_flow(request)
            except StageFailed as exc:  # a row that says why, and the study goes on
                row = {"plan": f"{kind}-{number}", "kind": kind, "failed": str(exc)}
                rows.append(row)
                print(json.dumps(row) if args.json else f"{row['plan']:>14} failed: {exc}",
                      flush=True)  # fmt: skip
                continue
            error = report.measured_throughput / report.predicted_throughput - 1
            used = sum(1 for d in report.dispatched if d)
            held = Counter(report.plan.layout.values())
            replicated = sum(1 for n in held.values() if n > 1)
            row = {"plan": f"{kind}-{number}", "kind": kind, "nodes": len(raw["nodes"]),
                   "pipelines": used, "replicated_ranges": replicated, "one_path": one,
                   "predicted": report.predicted_throughput,
                   "measured": report.measured_throughput, "error": error,
                   "outputs_match": report.outputs_match, "dilation": report.dilation,
                   "explained": _explain(report) if abs(error) > 0.10 else []}  # fmt: skip
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{row['plan']:>14} {row['nodes']:>2} nodes {used:>2} pipelines "
                      f"{replicated} replicated  one path "
                      f"{one:8.2f}  flow {row['predicted']:8.2f}  measured "
                      f"{row['measured']:8.2f} ({error:+.1%})  outputs "
                      f"{'match' if row['outputs_match'] else 'DIFFER'}"
                      + ("  " + "; ".join(row["explained"]) if row["explained"] else ""),
                      flush=True)  # fmt: skip
    rows = [r for r in rows if "skipped" not in r]
    failed = sum(1 for r in rows if "failed" in r)
    within = sum(1 for r in rows if "failed" not in r and abs(r["error"]) <= 0.10)
    load = os.getloadavg()[0]
    summary = {"plans": len(rows), "within_10pct": within, "failed": failed,
               "share": within / len(rows) if rows else math.nan, "load": load}  # fmt: skip
    print(json.dumps(summary) if args.json else
          f"{within} of {len(rows)} plans within 10 % ({summary['share']:.0%}), {failed} failed; "
          f"load {load:.2f}")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
