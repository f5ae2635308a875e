"""Benchmark of ``inferplan run``: ``python benchmarks/runtime_pipeline.py [--quick]``.

Prints two tables:

(a) emulated runs: plans that PSG makes for the test models on chain networks (2 or 3 nodes,
    so 3 or 5 pipeline stages) at targets of 20 to 50 ms, cut at ideals of the layer graph
    (``graph``, the default) or between blocks (``chain``), each carried out by ``run_plan``
    (one process per node on 127.0.0.1, gloo), with the predicted and the measured interval
    (steady state after the warm-up), their gap, the latency and whether the outputs matched.
(b) runtime overhead without emulation: a model whose blocks take microseconds, so the
    measured interval and the stage times are the runtime's own cost per inference per stage
    (the transfer through gloo on loopback, the queues and bookkeeping).

The machine is shared: a busy neighbour shows up as a larger measured interval.
Run from the repository root (the models live in ``tests/runtime/models.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from tests.runtime.pipeline_support import chain  # noqa: E402

from inferplan.network import network_from_dict  # noqa: E402
from inferplan.runtime.pipeline import RunReport, RunRequest, run_plan  # noqa: E402

MODELS = {
    "resnet": ("tests.runtime.models:resnet", (1, 3, 16, 16), 2),
    "unet": ("tests.runtime.models:unet", (1, 3, 16, 16), None),
    "mlp": ("tests.runtime.models:mlp", (1, 16), None),
    "inception": ("tests.runtime.models:inception", (1, 3, 8, 8), 2),
}

# model, path, capacity (FLOP/s), bandwidth (bit/s), target interval (s), cuts
PLANS = [
    ("resnet", ("s", "t"), 2e7, 8e6, 0.020, "graph"),
    ("inception", ("s", "a", "t"), 2e7, 8e6, 0.040, "graph"),
    ("resnet", ("s", "a", "t"), 2e7, 8e6, 0.020, "graph"),
    ("resnet", ("s", "a", "t"), 1e7, 4e6, 0.050, "graph"),
    ("unet", ("s", "a", "t"), 1e7, 8e6, 0.030, "graph"),
    ("mlp", ("s", "a", "t"), 1e5, 2e4, 0.025, "graph"),
    ("inception", ("s", "a", "t"), 2e7, 8e6, 0.040, "chain"),
]


def request(model: str, path: tuple[str, ...], capacity: float, bandwidth: float,
            interval: float, *, inferences: int, emulate: bool,
            cuts: str | None = None) -> RunRequest:  # fmt: skip
    spec, shape, depth = MODELS[model]
    return RunRequest(
        network=network_from_dict(chain(path, capacity, bandwidth)),
        model=spec,
        input_shapes=(shape,),
        blocks=depth,
        interval=interval,
        inferences=inferences,
        warmup=10,
        emulate=emulate,
        cuts=cuts,  # type: ignore[arg-type]
    )


def emulated(quick: bool) -> None:
    print("(a) emulated runs: predicted vs measured steady-state interval")
    print(f"{'model':9} {'cuts':5} {'stages':>6} {'K':>4} {'predicted':>10} {'measured':>10} "
          f"{'gap':>7} {'lat. med':>9} {'lat. p95':>9} {'worst stage':>12} "
          f"{'outputs':>8}")  # fmt: skip
    for model, path, capacity, bandwidth, target, cuts in PLANS[: 2 if quick else None]:
        k = 40 if quick else 100
        report = run_plan(request(model, path, capacity, bandwidth, target, inferences=k,
                                  emulate=True, cuts=cuts))  # fmt: skip
        worst = max(s.measured_s / s.predicted_s - 1 for s in report.stages if s.predicted_s)
        gap = report.measured_interval / report.predicted_interval - 1
        print(f"{model:9} {report.plan.cuts:5} {len(report.stages):>6} {k:>4} "
              f"{report.predicted_interval * 1e3:>8.2f}ms {report.measured_interval * 1e3:>8.2f}ms "
              f"{gap:>+7.1%} {report.latency_median_s * 1e3:>7.1f}ms "
              f"{report.latency_p95_s * 1e3:>7.1f}ms {worst:>+12.1%} "
              f"{'match' if report.outputs_match else 'DIFFER':>8}")  # fmt: skip
        stages(report)


def stages(report: RunReport) -> None:
    for s in report.stages:
        print(f"{'':8} {s.kind} {s.id:8} planned {s.predicted_s * 1e3:8.3f} ms  "
              f"measured {s.measured_s * 1e3:8.3f} ms")  # fmt: skip


def overhead(quick: bool) -> None:
    print("\n(b) runtime overhead without emulation (MLP, microseconds of compute per block)")
    print(f"{'nodes':>5} {'K':>5} {'interval':>10} {'slowest node':>13} {'slowest link':>13} "
          f"{'lat. med':>9}")  # fmt: skip
    for path in (("s", "t"), ("s", "a", "t"), ("s", "a", "b", "t")):
        k = 200 if quick else 1000
        # the whole model fits the source: the other nodes only forward (pure runtime cost)
        report = run_plan(request("mlp", path, 1e5, 1e9, 0.1, inferences=k, emulate=False))
        nodes = [s.measured_s for s in report.stages if s.kind == "node"]
        links = [s.measured_s for s in report.stages if s.kind == "link"]
        print(f"{len(path):>5} {k:>5} {report.measured_interval * 1e6:>8.0f}us "
              f"{max(nodes) * 1e6:>11.0f}us {max(links) * 1e6:>11.0f}us "
              f"{report.latency_median_s * 1e6:>7.0f}us")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer plans and inferences")
    args = parser.parse_args()
    started = time.monotonic()
    emulated(args.quick)
    overhead(args.quick)
    print(f"\n({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
