"""Start-up time of the command line: ``python benchmarks/startup.py [--runs 5]``.

Runs each command in a fresh process ``--runs`` times and prints the fewest seconds (wall
clock, process start to exit) against its target:

==============================================================  ========
command                                                         target
==============================================================  ========
``python -c "import inferplan"``                                0.3 s
``inferplan --help``                                            0.3 s
``inferplan provision examples/network.json vgg16 --throughput 30``  0.8 s
==============================================================  ========

The commands run as ``python -m inferplan`` with this interpreter, from the repository root
(so ``examples/`` resolves). The fewest seconds of several runs is the least disturbed by other
work on the machine; on a shared machine it is still an upper bound of the unloaded time. The
last column is the fewest CPU seconds (user + system) of one run, which a loaded machine
inflates far less: with spare cores, wall time is about that plus the process start. Exit
status 1 if a command fails (its output is printed), 0 otherwise: the targets are reported, not
enforced.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES: list[tuple[str, list[str], float]] = [
    ("import inferplan", ["-c", "import inferplan"], 0.3),
    ("inferplan --help", ["-m", "inferplan", "--help"], 0.3),
    (
        "inferplan provision examples/network.json vgg16 --throughput 30",
        ["-m", "inferplan", "provision", "examples/network.json", "vgg16", "--throughput", "30"],
        0.8,
    ),
]


def best_of(args: list[str], runs: int) -> tuple[float, float]:
    """The fewest wall-clock seconds of ``runs`` fresh ``python ARGS`` processes, and the
    fewest CPU seconds (user + system) of one of them."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get(
        "PYTHONPATH", "")]).rstrip(os.pathsep), "COLUMNS": "80"}  # fmt: skip
    times, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, check=False)  # fmt: skip
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return min(times), min(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per command")
    runs = parser.parse_args().runs
    # one untimed run each: the first process after an install writes bytecode caches
    for _, args, _ in CASES:
        best_of(args, 1)
    width = max(len(name) for name, _, _ in CASES)
    print(f"{'command':<{width}}  {'best of ' + str(runs):>10}  {'target':>7}  met  {'cpu':>7}")
    for name, args, target in CASES:
        try:
            seconds, cpu = best_of(args, runs)
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        met = "yes" if seconds <= target else "NO "
        print(f"{name:<{width}}  {seconds:>8.3f} s  {target:>5.1f} s  {met}  {cpu:>5.3f} s")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"(load average {load:.1f} on {os.cpu_count()} cores while measuring)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
