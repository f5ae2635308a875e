"""Benchmark of device-edge co-inference: ``python benchmarks/runtime_edge.py [--quick]``.

Every edge is a real ``inferplan edge serve`` process on 127.0.0.1; devices are this process
(a) and (b), or eight ``device`` worker processes (c). Prints three tables:

(a) emulated runs of ``mlp-1024x8`` (examples/edge-mlp.yaml) and ``alexnet``
    (examples/edge-alexnet.yaml) for each method: measured mean cost per inference with its
    95 % CI beside the analytic ``E[eta_S]``, the overhead (measured minus modelled cost of
    the same inferences), whether ``E[eta_S] + overhead`` lies in the CI, the latency over
    the model as a share of the per-inference time and split into its parts: upload
    (transport the modelled upload could not hide), edge (the edge's service time over its
    modelled compute) and device.
(b) the transport overhead alone, without emulation: per-request time of an edge-only
    inference on the MLP minus the edge's own service time (HTTP round trip, safetensors both
    ways).
(c) one edge, eight concurrent devices (separate processes, started together), emulated:
    throughput of the edge and its p50 / p99 service time, and every device's failures.

The machine is shared (2 cores): numbers are noisy; ``--quick`` runs fewer inferences.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
MODELS = {"mlp-1024x8": ROOT / "examples" / "edge-mlp.yaml",
          "alexnet": ROOT / "examples" / "edge-alexnet.yaml"}  # fmt: skip
METHODS = ("optimal", "1sla", "edge-only", "device-only")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Edge:
    """``inferplan edge serve`` in its own process group; stopped on exit."""

    def __init__(self, model: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "inferplan", "edge", "serve", str(MODELS[model]), model,
                   "--port", str(self.port)]  # fmt: skip
        self.process = subprocess.Popen(command, env=ENV, start_new_session=True,
                                        stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 180
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the edge for {model} exited")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the edge did not start") from None
                time.sleep(0.3)

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as answer:
            return dict(json.load(answer))

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def __enter__(self) -> Edge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _device(model: str) -> tuple[Any, Any]:
    from inferplan.runtime.layered import ModelSpec, build_layers, load_model_system

    layered = build_layers(ModelSpec(model), weights=False)
    return load_model_system(MODELS[model], layered.profile), layered


def emulated(quick: bool, models: tuple[str, ...] = tuple(MODELS)) -> None:
    from inferplan.runtime.device import run_device
    from inferplan.runtime.layered import build_layers

    print("(a) emulated runs: measured beside expected (cost = 0.5 s + 0.5 J per inference)\n")
    print(
        "| model | method | M | K | latency ms | mean cost (95 % CI) | E[eta_S] | overhead "
        "| E + overhead in CI | overhead / latency | of it ms: upload, edge, device "
        "| upload / latency | splits | outputs equal |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    counts = {"mlp-1024x8": 60 if quick else 300, "alexnet": 20 if quick else 80}
    for model in models:
        count = counts[model]
        system, _ = _device(model)
        with Edge(model) as edge:
            for method in METHODS:
                layered = build_layers(_spec(model), weights=False)
                run = run_device(system, layered, edge.url, method=method, inferences=count,
                                 seed=1)  # fmt: skip
                d = run.to_dict()
                low, high = d["ci95"]
                shifted = d["expected_cost"] + d["overhead_cost"]
                inside = "yes" if low <= shifted <= high else "no"
                splits = ", ".join(f"{n}:{c}" for n, c in d["splits"].items())
                upload = d["overhead_parts_s"]["upload"]
                parts = ", ".join(
                    f"{1e3 * d['overhead_parts_s'][p]:.2f}" for p in ("upload", "edge", "device")
                )
                print(f"| {model} | {method} | {d['placement']} | {count} | "
                      f"{1e3 * d['mean_latency_s']:.1f} | {d['mean_cost']:.5f} "
                      f"({low:.5f}-{high:.5f}) | {d['expected_cost']:.5f} | "
                      f"{d['overhead_cost']:.5f} | {inside} | {100 * d['overhead_share']:.1f} % | "
                      f"{parts} | {100 * upload / d['mean_latency_s']:.1f} % | "
                      f"{splits} | {d['outputs_match']} |", flush=True)  # fmt: skip
    print()


def _spec(model: str) -> Any:
    from inferplan.runtime.layered import ModelSpec

    return ModelSpec(model)


def overhead(quick: bool) -> None:
    from inferplan.runtime.device import run_device

    count = 100 if quick else 400
    print("(b) transport overhead without emulation (mlp-1024x8, edge-only: one request per "
          "inference)\n")  # fmt: skip
    system, layered = _device("mlp-1024x8")
    with Edge("mlp-1024x8") as edge:
        run = run_device(system, layered, edge.url, method="edge-only", inferences=count,
                         emulate=False, verify=False)  # fmt: skip
    transport = sorted(r.upload_s for r in run.records)  # request + answer, minus edge work
    edge_s = sorted(r.edge_s for r in run.records)
    mid = len(transport) // 2
    print("| inferences | transport median | transport p90 | edge service median |")
    print("|---|---|---|---|")
    print(
        f"| {count} | {1e3 * transport[mid]:.2f} ms | "
        f"{1e3 * transport[int(0.9 * len(transport))]:.2f} ms | {1e3 * edge_s[mid]:.2f} ms |\n"
    )


def worker(url: str, model: str, count: int, seed: int) -> None:
    """A device process: build, say ready, wait for 'go' on stdin, run, print the JSON."""
    from inferplan.runtime.device import run_device

    system, layered = _device(model)
    print("ready", flush=True)
    sys.stdin.readline()
    run = run_device(system, layered, url, method="optimal", inferences=count, seed=seed,
                     verify=False)  # fmt: skip
    print(json.dumps(run.to_dict()), flush=True)


def concurrent(quick: bool) -> None:
    model, devices, count = "mlp-1024x8", 8, 25 if quick else 100
    print(f"(c) one edge, {devices} concurrent devices ({model}, optimal, emulated, "
          f"{count} inferences each)\n")  # fmt: skip
    with Edge(model) as edge:
        command = [sys.executable, __file__, "--worker", edge.url, model, str(count)]
        procs = [
            subprocess.Popen([*command, str(k)], env=ENV, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
            for k in range(devices)
        ]  # fmt: skip
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        started = time.monotonic()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, _ = p.communicate(timeout=900)
            results.append(json.loads(out.strip().splitlines()[-1]))
        wall = time.monotonic() - started
        stats = edge.stats()
    done = sum(r["completed"] for r in results)
    failed = sum(len(r["failed"]) for r in results)
    service = stats["service_s"]
    latency = sum(r["mean_latency_s"] for r in results) / len(results)
    print(
        "| devices | inferences | failed | wall s | throughput /s | device latency ms "
        "| edge p50 ms | edge p99 ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| {devices} | {done} | {failed} | {wall:.1f} | {done / wall:.1f} | "
        f"{1e3 * latency:.1f} | {1e3 * service['p50']:.2f} | {1e3 * service['p99']:.2f} |\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer inferences")
    parser.add_argument("--worker", nargs=4, metavar=("URL", "MODEL", "K", "SEED"),
                        help=argparse.SUPPRESS)  # fmt: skip
    parser.add_argument("--only", choices=("a", "b", "c"), help="run one table")
    parser.add_argument("--model", choices=tuple(MODELS), help="table (a) for one model only")
    args = parser.parse_args()
    if args.worker:
        url, model, count, seed = args.worker
        worker(url, model, int(count), int(seed))
        return
    sys.path.insert(0, str(ROOT / "src"))
    if args.only in (None, "a"):
        emulated(args.quick, (args.model,) if args.model else tuple(MODELS))
    for key, part in (("b", overhead), ("c", concurrent)):
        if args.only in (None, key):
            part(args.quick)


if __name__ == "__main__":
    main()
