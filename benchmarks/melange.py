"""Mélange's GPU-mix problem: ``python benchmarks/melange.py CONFIG [--json] [--fractional]``.

Reads a Mélange input file (JSON or YAML: ``gpu_info``, ``workload_distribution``,
``total_request_rate``, ``slice_factor``) and prints the cheapest mix of GPUs that serves it:
with ``--json``, ``{"counts": {type: n}, "cost": $/h, "status": ...}``; otherwise a table of the
counts and of which type serves each bucket. ``--fractional`` lets a bucket's rate be split
freely across types instead of in ``slice_factor`` slices. A bad file is one ``error:`` line
(exit 2); a rate no mix serves prints its status ``infeasible`` and exits 3.

``--generate OUT [--seed N]`` writes a random problem in Mélange's format: 10 GPU types and
8 x 8 buckets (``--types``, ``--buckets``), slice factor 4. ``--timing [--seeds K]`` solves K such
problems (seeds 0 .. K-1), sliced and fractional, and prints each solve's wall seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from inferplan.codesign.serving.gpu_mix import GpuMix, solve_gpu_mix
from inferplan.codesign.serving.melange_file import load_melange, melange_from_dict
from inferplan.documents import write_document
from inferplan.errors import InferplanError

INFEASIBLE = 3


def generate(seed: int, types: int = 10, buckets: int = 8, slice_factor: int = 4) -> dict[str, Any]:
    """A random Mélange-format problem: bucket ``(i, j)`` has inputs and outputs of about
    ``2**(i+4)`` and ``2**(j+3)`` tokens; a type of speed ``s`` and memory ``m`` (both log-uniform)
    sustains ``s / (input / 8 + output)`` requests/s of it, less the larger the requests are
    beyond its memory (0 beyond four times it), and costs about its speed to the power 0.8 ($/h,
    with noise): dearer GPUs are faster, not proportionally."""
    rng = np.random.default_rng(seed)
    prompt = 2.0 ** (np.arange(buckets) + 4)
    output = 2.0 ** (np.arange(buckets) + 3)
    size = prompt[:, None] + output[None, :]
    gpu_info = {}
    for t in range(types):
        speed = 10 ** rng.uniform(2.5, 4.0)  # output tokens/s at batch
        memory = 10 ** rng.uniform(2.5, 4.5)  # tokens of context it keeps at speed
        tput = speed / (prompt[:, None] / 8 + output[None, :]) / np.maximum(1, size / memory)
        tput = np.where(size > 4 * memory, 0.0, np.round(tput, 3))
        price = round(float(speed**0.8 / 60 * rng.uniform(0.8, 1.25)), 2)
        gpu_info[f"GPU{t}"] = {"cost": price, "tputs": tput.tolist()}
    shares = rng.dirichlet(np.full(buckets * buckets, 0.5)).reshape(buckets, buckets)
    shares[0, 0] += 1 - shares.sum()
    return {"gpu_info": gpu_info, "workload_distribution": shares.tolist(),
            "total_request_rate": 200.0, "slice_factor": slice_factor}  # fmt: skip


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """The process's standard output sent to the null device: the HiGHS in scipy prints a
    debugging line from C++ when it re-solves a solution's LP (it would corrupt ``--json``)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _table(mix: GpuMix) -> str:
    lines = [f"status {mix.status}, cost {mix.cost:.4g} $/h (lower bound {mix.lower_bound:.6g})"]
    lines += [f"  {name}: {n}" for name, n in mix.count_of().items()]
    for bucket, row in zip(mix.bucket_names, mix.served, strict=True):
        parts = [f"{t} {rate:.4g}/s" for t, rate in zip(mix.type_names, row, strict=True) if rate]
        lines.append(f"  bucket {bucket}: {', '.join(parts) or '-'}")
    if mix.reason:
        lines.append(f"  {mix.reason}")
    return "\n".join(lines)


def timing(seeds: int) -> None:
    print("10 GPU types, 8 x 8 buckets, slice factor 4 (wall seconds of solve_gpu_mix)")
    for seed in range(seeds):
        problem = melange_from_dict(generate(seed), source=f"seed {seed}")
        out = [f"seed {seed}:"]
        for fractional in (False, True):
            start = time.perf_counter()
            with _quiet_stdout():
                mix = solve_gpu_mix(problem, fractional=fractional)
            took = time.perf_counter() - start
            kind = "fractional" if fractional else "sliced"
            out.append(f"{kind} {took:.3f} s, {mix.cost:.2f} $/h ({mix.status})")
        print("  ".join(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", help="a Mélange input file")
    parser.add_argument("--json", action="store_true", help="print counts, cost and status")
    parser.add_argument("--fractional", action="store_true", help="split buckets freely")
    parser.add_argument("--time-limit", type=float, default=None, help="seconds for HiGHS")
    parser.add_argument("--generate", metavar="OUT", help="write a random problem")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--types", type=int, default=10)
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--timing", action="store_true", help="time random problems")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args(argv)
    if args.timing:
        timing(args.seeds)
        return 0
    try:
        if args.generate:
            write_document(generate(args.seed, args.types, args.buckets), Path(args.generate))
            return 0
        if args.config is None:
            parser.error("give a CONFIG file, --generate OUT or --timing")
        problem = load_melange(args.config)
        with _quiet_stdout():
            mix = solve_gpu_mix(problem, fractional=args.fractional, time_limit=args.time_limit)
    except InferplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        plain = mix.to_dict()
        print(json.dumps({key: plain[key] for key in ("counts", "cost", "status")}))
    else:
        print(_table(mix))
    if mix.status == "infeasible":
        print(f"error: {args.config}: {mix.reason}", file=sys.stderr)
        return INFEASIBLE
    return 0


if __name__ == "__main__":
    sys.exit(main())
