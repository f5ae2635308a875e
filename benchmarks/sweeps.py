"""Benchmarks of the sweep engine's bookkeeping: ``python benchmarks/sweeps.py [--quick]``.

Prints, for grids of growing size (one ``range`` axis, a custom study that does nothing,
``_echo``), each measured in a fresh process:

- ``expand s`` and ``expand MiB``: seconds of ``load_spec`` (reading the spec, sizing it,
  building every point with its id and seed) and the growth of the process's peak resident
  memory while it ran. This is what the limit of ``MAX_POINTS`` (1,000,000) points per sweep
  bounds.
- ``run us/point``: microseconds per point of ``run_sweep`` in process: the engine's own cost
  per point (run the point, store its line, collect its row).

and the seconds to refuse a spec of 10^12 points (sized, not built).

The machine is shared: timings are noisy.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STUDY = "inferplan.experiments.engine:_echo"


def _spec(directory: Path, points: int) -> Path:
    path = directory / f"spec-{points}.yaml"
    path.write_text(f"study: {STUDY}\noptions: {{a: 1}}\ngrid:\n  x: {{range: [0, {points}]}}\n")
    return path


def measure(path: Path, run: bool) -> dict[str, float]:
    """In this process: expand the spec at ``path`` (and run it if ``run``)."""
    from inferplan.errors import InvalidFile
    from inferplan.experiments import load_spec, run_sweep

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    try:
        sweep = load_spec(path)
    except InvalidFile:
        return {"refuse_s": time.perf_counter() - start}
    out = {
        "expand_s": time.perf_counter() - start,
        "expand_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024,
    }
    if run:
        start = time.perf_counter()
        run_sweep(sweep, path.with_suffix(".out"), jobs=1)
        out["run_us"] = (time.perf_counter() - start) / len(sweep.points) * 1e6
    return out


def _in_process(path: Path, run: bool) -> dict[str, float]:
    code = f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import sweeps; "
    code += f"print(json.dumps(sweeps.measure(sweeps.Path({str(path)!r}), {run})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller grids")
    args = parser.parse_args()
    sizes = [1_000, 10_000, 100_000] if args.quick else [1_000, 10_000, 100_000, 1_000_000]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        print(f"{'points':>10} {'expand s':>9} {'expand MiB':>11} {'run us/point':>13}", flush=True)
        for size in sizes:
            got = _in_process(_spec(directory, size), run=size <= 100_000)
            run = f"{got['run_us']:13.0f}" if "run_us" in got else f"{'-':>13}"
            print(f"{size:>10,} {got['expand_s']:9.2f} {got['expand_mib']:11.0f} {run}", flush=True)
        got = _in_process(_spec(directory, 10**12), run=False)
        print(f"refusing a spec of 10^12 points: {got['refuse_s']:.4f} s")


if __name__ == "__main__":
    main()
