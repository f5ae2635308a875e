"""The pipeline model measured on the testbed: ``sudo python benchmarks/testbed.py [--plans 30]``.

Draws random plans and carries each out with ``inferplan run --testbed`` (links shaped by the
kernel, nodes held to their capacities by CPU quotas, nothing paced; docs/testbed.md):

- a model of 4 to 12 blocks built here: each block ``reps`` times ``Linear(w, w) + ReLU`` on
  ``r`` rows, so the activation between blocks is ``r * w`` float32 values, drawn log-uniformly
  from 1 KB to 10 MB (models whose compute would take more than 0.3 CPU seconds per inference
  here are drawn again);
- a random small network: source, one to three layers of one or two nodes, target, every node
  linked to every node of the next layer, capacities around ``Q / T`` and bandwidths around
  ``D / T`` (random factors), random prices, upgrades allowed;
- a target interval ``T`` drawn log-uniformly from 5 ms to 500 ms, planned by PSG.

Per plan it records the predicted and measured interval and latency (seconds of the dilated
run), the dilation, the largest activation on the path and the shortest stage. The latency
predicted is the pipeline's under the runtime's window: the source keeps at most ``2 * n``
inferences in flight for ``n`` path nodes, so once the pipeline is saturated Little's law gives
``2 n * interval``, and an inference alone takes the sum of its stages: the prediction is the
larger.

First it times the set-up plus teardown of a testbed for a 5-node path (10 times). Then it
writes ``OUT/testbed-study.csv`` and ``OUT/testbed-study.png`` (measured / predicted interval
against the largest activation and against the predicted interval) and prints a summary: the
share of plans whose stages are all 10 ms or longer that came within 10 %. The machine's load
average is printed with it; the study needs root (it is skipped with the reason otherwise).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]

from inferplan.codesign.provision import provision  # noqa: E402
from inferplan.errors import Infeasible  # noqa: E402
from inferplan.network import network_from_dict  # noqa: E402
from inferplan.profiles.cuts import parse_block_spec  # noqa: E402
from inferplan.runtime.pipeline import RunRequest, StageFailed, run_plan  # noqa: E402
from inferplan.runtime.testbed.linux import cpu_counts, missing, others_share  # noqa: E402

DEPTH1 = parse_block_spec("depth=1")
MODEL_FILE = '''"""A model drawn by benchmarks/testbed.py."""
import torch
from torch import nn

WIDTH, REPS = {width}, {reps}


def build():
    return nn.Sequential(*[
        nn.Sequential(*[m for _ in range(r) for m in (nn.Linear(WIDTH, WIDTH), nn.ReLU())])
        for r in REPS
    ])
'''


def _log_uniform(rng: Any, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def draw_model(rng: Any, folder: Path, index: int) -> tuple[str, tuple[int, int], float]:
    """A model file, its input shape and its CPU seconds per inference here (estimated)."""
    for _ in range(100):  # bounded: a few draws find a model within the CPU budget
        blocks = int(rng.integers(4, 13))
        width = int(rng.choice([32, 64, 128, 256]))
        activation_b = _log_uniform(rng, 1e3, 1e7)
        rows = max(1, round(activation_b / (4 * width)))
        reps = [int(rng.integers(1, 4)) for _ in range(blocks)]
        flops = sum(reps) * 2 * rows * width * width
        if flops / 10e9 <= 0.3:  # about 10 GFLOP/s on one core of a current machine
            break
    path = folder / f"model_{index}.py"
    path.write_text(MODEL_FILE.format(width=width, reps=reps))
    return f"{path}:build", (rows, width), flops


def draw_network(rng: Any, profile: Any, interval: float) -> dict[str, Any]:
    """A small layered network for ``profile`` at ``interval``."""
    total = sum(profile.flops)
    bits = statistics.median(profile.activation_bits)
    layers = [["s"]] + [[f"v{k}{j}" for j in range(int(rng.integers(1, 3)))]
                        for k in range(int(rng.integers(1, 4)))] + [["t"]]  # fmt: skip
    nodes = [{"id": v, "capacity": total / interval * rng.uniform(0.3, 1.5),
              "price": rng.uniform(0.5, 2.0) * interval / total}
             for layer in layers for v in layer]  # fmt: skip
    links = [{"source": u, "target": v, "capacity": bits / interval * rng.uniform(0.5, 3.0),
              "price": rng.uniform(0.5, 2.0) * interval / bits}
             for a, b in itertools.pairwise(layers) for u in a for v in b]  # fmt: skip
    return {"source": "s", "target": "t", "nodes": nodes, "links": links}


def one_plan(rng: Any, folder: Path, index: int, inferences: int,
             warmup: int) -> dict[str, Any] | None:  # fmt: skip
    from inferplan.profiles.from_torch import load_module_factory, profile_module

    spec, shape, _ = draw_model(rng, folder, index)
    profile = profile_module(load_module_factory(spec), [shape], blocks=DEPTH1,
                             tracer="fx").profile  # fmt: skip
    interval = _log_uniform(rng, 0.005, 0.5)
    for _ in range(20):  # bounded: most networks drawn have a plan
        network = network_from_dict(draw_network(rng, profile, interval))
        try:
            plan = provision(network, profile, interval=interval, method="psg", cuts="chain")
            break
        except Infeasible:
            continue
    else:
        return None
    request = RunRequest(network=network, model=spec, input_shapes=(shape,), blocks=DEPTH1,
                         plan=plan, inferences=inferences, warmup=warmup, testbed=True,
                         timeout_s=120.0)  # fmt: skip
    started = time.monotonic()
    before = cpu_counts()
    try:
        report = run_plan(request)
    except StageFailed as exc:
        print(f"plan {index}: failed: {exc}", file=sys.stderr)
        return None
    others = others_share(before, cpu_counts())
    stages = report.stages
    n = len(plan.path)
    alone = math.fsum(s.predicted_s for s in stages)
    latency = max(alone, 2 * n * report.predicted_interval)
    links = [s for s in stages if s.kind == "link"]
    held = [s for s in stages if s.predicted_s > 0]
    bottleneck = max(stages, key=lambda s: s.predicted_s)
    cut_bits = [profile.activation_bits[b] for b in plan.partition[:-1]]
    largest = max(cut_bits, default=profile.activation_bits[0]) / 8
    held_cpu = math.nan
    if bottleneck.cpu_s and bottleneck.quota:
        held_cpu = bottleneck.cpu_s / (bottleneck.quota * bottleneck.predicted_s)
    slowest = max(stages, key=lambda s: s.measured_s)
    return {
        "plan": index,
        "blocks": profile.n_blocks,
        "nodes": n,
        "largest_activation_B": largest,
        "target_interval_s": interval,
        "dilation": report.dilation,
        "predicted_interval_s": report.predicted_interval,
        "measured_interval_s": report.measured_interval,
        "interval_ratio": report.measured_interval / report.predicted_interval,
        "predicted_latency_s": latency,
        "measured_latency_s": report.latency_median_s,
        "latency_ratio": report.latency_median_s / latency,
        "shortest_stage_s": min(s.predicted_s for s in held),
        "bottleneck": f"{bottleneck.kind} {bottleneck.id}",
        "bottleneck_ratio": bottleneck.measured_s / bottleneck.predicted_s,
        "bottleneck_cpu_ratio": held_cpu,
        "slowest": f"{slowest.kind} {slowest.id}",
        "slowest_ratio": slowest.measured_s / slowest.predicted_s if slowest.predicted_s else 0,
        "stages": " ".join(
            f"{s.id}:{s.predicted_s * 1e3:.1f}/{s.measured_s * 1e3:.1f}"
            + (f"/cpu{s.cpu_s * 1e3:.1f}/q{s.quota:.2f}" if s.cpu_s and s.quota else "")
            for s in stages
        ),
        "links": len(links),
        "outputs_match": report.outputs_match,
        "others_share": others,
        "load": os.getloadavg()[0],
        "wall_s": time.monotonic() - started,
    }


def setup_teardown(repeats: int = 10) -> list[float]:
    """Seconds of set-up plus teardown of a testbed for a 5-node path (5 quota'd hosts, 4
    shaped links), ``repeats`` times (pyroute2 imported before the first)."""
    import pyroute2  # noqa: F401

    from inferplan.runtime.testbed.linux import HostSpec, LinkSpec, Testbed, host_address

    hosts = [HostSpec(host_address(k), 0.15) for k in range(5)]
    links = [LinkSpec(host_address(k), host_address(k + 1), 1e7) for k in range(4)]
    took = []
    for _ in range(repeats):
        bed = Testbed(hosts, links, period_s=0.01)
        bed.setup()
        bed.teardown()
        took.append(bed.setup_s + bed.teardown_s)
    return took


def figure(rows: list[dict[str, Any]], path: Path) -> None:
    from matplotlib.ticker import NullFormatter

    from inferplan.plots._mpl import styled_figure

    with styled_figure([path], figsize=(6.5, 2.6)) as fig:
        left, right = fig.subplots(1, 2, sharey=True)
        axes = ((left, "largest_activation_B", "largest activation on the path (B)"),
                (right, "predicted_interval_s", "predicted interval (s)"))  # fmt: skip
        for ax, key, label in axes:
            long = [r for r in rows if r["shortest_stage_s"] >= 0.010]
            short = [r for r in rows if r["shortest_stage_s"] < 0.010]
            ax.scatter([r[key] for r in long], [r["interval_ratio"] for r in long], s=10,
                       label="stages >= 10 ms")  # fmt: skip
            ax.scatter([r[key] for r in short], [r["interval_ratio"] for r in short], s=10,
                       marker="x", label="a stage < 10 ms")  # fmt: skip
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # decades only: they collide
            ax.axhspan(0.9, 1.1, color="0.9", zorder=0)
            ax.axhline(1.0, color="0.5", linewidth=0.6)
            ax.set_xlabel(label)
        left.set_ylabel("measured / predicted interval")
        left.legend(frameon=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=30)
    parser.add_argument("--inferences", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("testbed-study"))
    args = parser.parse_args()
    lacks = missing()
    if lacks:
        print("skipped: the testbed needs " + "; ".join(lacks))
        return 0
    import numpy as np

    took = setup_teardown()
    print(f"set-up + teardown of a 5-node path: least {min(took):.3f} s, median "
          f"{statistics.median(took):.3f} s of {len(took)}; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    rng = np.random.default_rng(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="inferplan-study-") as tmp:
        for index in range(10 * args.plans):  # bounded: a few draws have no plan
            if len(rows) == args.plans:
                break
            row = one_plan(rng, Path(tmp), index, args.inferences, args.warmup)
            if row is None:
                continue
            rows.append(row)
            print(f"plan {index}: k {row['dilation']:.3g}, interval {row['interval_ratio']:.3f}, "
                  f"latency {row['latency_ratio']:.3f}, shortest stage "
                  f"{row['shortest_stage_s'] * 1e3:.1f} ms, bottleneck {row['bottleneck']}, "
                  f"others took {row['others_share']:.0%} of the cores, load "
                  f"{row['load']:.1f}", flush=True)  # fmt: skip
    with open(args.out / "testbed-study.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    figure(rows, args.out / "testbed-study.png")
    long = [r for r in rows if r["shortest_stage_s"] >= 0.010]
    within = [r for r in long if abs(r["interval_ratio"] - 1) <= 0.10]
    print(f"{len(rows)} plans; {len(long)} with every stage >= 10 ms, of which {len(within)} "
          f"({len(within) / max(1, len(long)):.0%}) within 10 % of the predicted interval; "
          f"median interval ratio {statistics.median(r['interval_ratio'] for r in rows):.3f}, "
          f"median latency ratio {statistics.median(r['latency_ratio'] for r in rows):.3f}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip
    quiet = [r for r in long if r["others_share"] <= 0.10]
    print(f"of the {len(long)}, {len(quiet)} ran while the machine's other processes took at "
          f"most 10 % of its cores; {sum(abs(r['interval_ratio'] - 1) <= 0.10 for r in quiet)} "
          f"of them within 10 %; the others' median share over all plans "
          f"{statistics.median(r['others_share'] for r in rows):.0%}")  # fmt: skip
    print(f"written: {args.out / 'testbed-study.csv'}, {args.out / 'testbed-study.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
