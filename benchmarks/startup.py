"""Start-up time of the command line: ``python benchmarks/startup.py [--runs 5]``.

Runs each command in a fresh process ``--runs`` times and prints the fewest seconds (wall
clock, process start to exit) against its target:

==============================================================  ========
command                                                         target
==============================================================  ========
``python -c "import inferplan"``                                0.3 s
``inferplan --help``                                            0.15 s
``inferplan provision examples/network.json vgg16 --throughput 30``  0.5 s
``inferplan run`` refusing a plan for another network           1.5 s
``inferplan run`` refusing a missing inputs file                1.5 s
``inferplan device run`` refusing an unreachable edge           1.5 s
``inferplan edge serve`` refusing a port in use                 1.5 s
``inferplan edge serve`` refusing a system file's layers (x2)   1.5 s
``inferplan split`` refusing a missing plan file                1.5 s
==============================================================  ========

The system files refused are a discrete channel's and a Rayleigh one's, whose check integrates
its expected upload cost (scipy). The refusals (exit code 2) come before torch is imported;
``--torch`` adds, for comparison, ``python -c "import torch"``, the least any command that runs
a model takes.

``--ready`` also times how soon the torch commands are ready (fewest of ``--runs``, wall and
CPU seconds of every process, the ranks included):

* ``inferplan run`` of the 3-node MLP plan of ``examples/runtime-network.json`` (10
  inferences): from the process start to the stream's start (every rank ready; the run calls
  its progress with 0 then) and to the end;
* ``inferplan edge serve examples/edge-mlp.yaml mlp-1024x8``: from the process start until
  ``GET /health`` answers.

The commands run as ``python -m inferplan`` with this interpreter, from the repository root
(so ``examples/`` resolves). The fewest seconds of several runs is the least disturbed by other
work on the machine; on a shared machine it is still an upper bound of the unloaded time. The
last column is the fewest CPU seconds (user + system) of one run, which a loaded machine
inflates far less: with spare cores, wall time is about that plus the process start. The
processes run without ``PYTHONDONTWRITEBYTECODE`` (an install has its bytecode caches). Exit
status 1 if a command fails (its output is printed), 0 otherwise: the targets are reported, not
enforced.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES: list[tuple[str, list[str], float]] = [
    ("import inferplan", ["-c", "import inferplan"], 0.3),
    ("inferplan --help", ["-m", "inferplan", "--help"], 0.15),
    (
        "inferplan provision examples/network.json vgg16 --throughput 30",
        ["-m", "inferplan", "provision", "examples/network.json", "vgg16", "--throughput", "30"],
        0.5,
    ),
]


def refusals(folder: Path, busy_port: int) -> list[tuple[str, list[str], float]]:
    """The refusals of the torch commands (files written to ``folder``; ``busy_port`` is
    bound by this process)."""
    plan = folder / "plan.json"
    plan.write_text(json.dumps({"path": ["s", "x", "t"], "partition": [1, 2, 4],
                                "interval": 0.1}))  # fmt: skip
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    edge = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    # examples/system-small.yaml's 3 layers against a 4-block model, with its discrete channel
    # and with a Rayleigh one (the system's check integrates its expected upload cost)
    small = (ROOT / "examples" / "system-small.yaml").read_text(encoding="utf-8")
    rayleigh = folder / "system-rayleigh.yaml"
    rayleigh.write_text(small.replace("channel: {kind: discrete, snr: [0.5, 2.0, 10.0], "
                                      "prob: [0.2, 0.5, 0.3]}",
                                      "channel: {kind: rayleigh, mean_snr: 10.0, min_snr: 0.25}"),
                        encoding="utf-8")  # fmt: skip
    serve = ["-m", "inferplan", "edge", "serve"]
    layers = ["mlp-16x4", "--port", edge.rpartition(":")[2]]
    run = ["-m", "inferplan", "run", "examples/runtime-network.json", "tests.runtime.models:mlp",
           "--input-shape", "1,16"]  # fmt: skip
    return [
        ("inferplan run: a plan for another network", [*run, "--plan", str(plan)], 1.5),
        ("inferplan run: a missing inputs file",
         [*run, "--interval", "0.1", "--inputs", str(folder / "missing.pt")], 1.5),
        ("inferplan device run: an unreachable edge",
         ["-m", "inferplan", "device", "run", "examples/edge-mlp.yaml", "mlp-1024x8", "--edge",
          edge, "--retries", "0"], 1.5),
        ("inferplan edge serve: a port in use",
         ["-m", "inferplan", "edge", "serve", "examples/edge-mlp.yaml", "mlp-1024x8", "--port",
          str(busy_port)], 1.5),
        ("inferplan edge serve: a system's layers (discrete channel)",
         [*serve, "examples/system-small.yaml", *layers], 1.5),
        ("inferplan edge serve: a system's layers (Rayleigh channel)",
         [*serve, str(rayleigh), *layers], 1.5),
        ("inferplan split: a missing plan file",
         ["-m", "inferplan", "split", "tests.runtime.models:mlp", "--plan",
          str(folder / "none.json"), "-o", str(folder / "out"), "--input-shape", "1,16"], 1.5),
    ]  # fmt: skip


# a 3-rank run in one process: prints when the stream starts and when the run ends (epoch s)
RUN = """
import json, sys, time
from inferplan.network import load_network
from inferplan.runtime.pipeline import RunRequest, run_plan
started = []
request = RunRequest(network=load_network("examples/runtime-network.json"),
                     model="tests.runtime.models:mlp", input_shapes=((1, 16),), interval=0.01,
                     inferences=10, warmup=2)
report = run_plan(request, progress=lambda done: started or started.append(time.time()))
print(json.dumps({"ready": started[0], "done": time.time(), "ok": report.outputs_match}))
"""


def _env() -> dict[str, str]:
    # Without PYTHONDONTWRITEBYTECODE: an install has its bytecode caches (the untimed first
    # run of each command writes them), and with the variable set every process would compile
    # every module it imports from source, which is not what a user's start-up costs.
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**inherited, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT),
            os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep), "COLUMNS": "80"}  # fmt: skip


def _cpu(before: resource.struct_rusage) -> float:
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def run_ready(runs: int) -> tuple[float, float, float]:
    """The fewest seconds from the start of a 3-rank ``run_plan`` process to its stream's
    start and to its end, and the fewest CPU seconds of the process and its ranks."""
    ready, done, cpu = [], [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.time()
        out = subprocess.run([sys.executable, "-c", RUN], cwd=ROOT, env=_env(),
                             capture_output=True, text=True, check=False)  # fmt: skip
        cpu.append(_cpu(before))
        if out.returncode != 0:
            raise RuntimeError(f"the run failed:\n{out.stderr}")
        times = json.loads(out.stdout.splitlines()[-1])
        ready.append(times["ready"] - start)
        done.append(times["done"] - start)
    return min(ready), min(done), min(cpu)


def edge_ready(runs: int) -> tuple[float, float]:
    """The fewest seconds from the start of ``inferplan edge serve`` until ``GET /health``
    answers, and the fewest CPU seconds it took by then."""
    ready, cpu = [], []
    for _ in range(runs):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.time()
        proc = subprocess.Popen([sys.executable, "-m", "inferplan", "edge", "serve",
                                 "examples/edge-mlp.yaml", "mlp-1024x8", "--port", str(port)],
                                cwd=ROOT, env=_env(), stderr=subprocess.PIPE)  # fmt: skip
        try:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"edge serve ended: {proc.stderr.read().decode()}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                        break
                except OSError:
                    time.sleep(0.02)
            ready.append(time.time() - start)
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            cpu.append(_cpu(before))  # what it took to get ready: it idles after
    return min(ready), min(cpu)


def best_of(args: list[str], runs: int, *, exit_code: int = 0) -> tuple[float, float]:
    """The fewest wall-clock seconds of ``runs`` fresh ``python ARGS`` processes, and the
    fewest CPU seconds (user + system) of one of them."""
    env = _env()
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, check=False)  # fmt: skip
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != exit_code:
            raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return min(times), min(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command")
    parser.add_argument("--torch", action="store_true", help="also time import torch")
    parser.add_argument("--ready", action="store_true",
                        help="also time a 3-rank run and edge serve until ready")  # fmt: skip
    options = parser.parse_args()
    runs = options.runs
    with tempfile.TemporaryDirectory() as tmp, socket.create_server(("127.0.0.1", 0)) as busy:
        cases = [(name, args, target, 0) for name, args, target in CASES]
        cases += [
            (name, args, target, 2)
            for name, args, target in refusals(Path(tmp), busy.getsockname()[1])
        ]
        if options.torch:
            cases.append(("import torch", ["-c", "import torch"], math.inf, 0))
        # one untimed run each: the first process after an install writes bytecode caches
        for _, args, _, code in cases:
            best_of(args, 1, exit_code=code)
        width = max(len(name) for name, *_ in cases)
        print(f"{'command':<{width}}  {'best of ' + str(runs):>10}  {'target':>7}  met  "
              f"{'cpu':>7}")  # fmt: skip
        for name, args, target, code in cases:
            try:
                seconds, cpu = best_of(args, runs, exit_code=code)
            except RuntimeError as exc:
                print(exc, file=sys.stderr)
                return 1
            met = "yes" if seconds <= target else "NO "
            print(f"{name:<{width}}  {seconds:>8.3f} s  {target:>5.2f} s  {met}  {cpu:>5.3f} s")
    if options.ready:
        print(f"\n{'until ready (best of ' + str(runs) + ')':<{width}}  {'ready':>10}  "
              f"{'end':>9}  {'cpu':>9}")  # fmt: skip
        try:
            ready, done, cpu = run_ready(runs)
            print(f"{'inferplan run, 3 ranks, 10 inferences':<{width}}  {ready:>8.3f} s  "
                  f"{done:>7.3f} s  {cpu:>7.3f} s")  # fmt: skip
            ready, cpu = edge_ready(runs)
            print(f"{'inferplan edge serve mlp-1024x8':<{width}}  {ready:>8.3f} s  "
                  f"{'':>9}  {cpu:>7.3f} s")  # fmt: skip
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"(load average {load:.1f} on {os.cpu_count()} cores while measuring)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
