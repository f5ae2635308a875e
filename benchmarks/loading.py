"""From file to plan at internet scale: ``python benchmarks/loading.py [--quick] [--runs 3]``.

For random layered DAGs (``layered_dag``) of 5,000 nodes / 50,000 links and 50,000 nodes /
500,000 links and a random profile of N = 200 blocks, prints one table per size:

- ``layered_dag``: generating the network, in this process;
- ``load_network``, ``compile_instance`` and one PSG solve (``solve_psg`` on the compiled
  instance), in this process, for the JSON file ``save_network`` writes and (when the code
  supports it and pyarrow is installed) for the Parquet and CSV tables of
  ``save_network(..., tables=True)``;
- ``json.load`` of the JSON file with the standard library, in a fresh process: the cost of
  parsing alone, the yardstick of the targets;
- ``inferplan provision NET PROFILE --interval BETA --json`` end to end in a fresh process,
  for each form: wall time and the peak resident memory (RSS) of the whole process.

Every time is the least of ``--runs`` runs (the machine is shared: the least run is the least
disturbed by other work); peak RSS is the child's ``ru_maxrss``. The targets of issue 17 are
printed beside the measurements: provision from JSON at most 3x the time and 2x the memory of
``json.load``; provision from Parquet at most 1 s; ``compile_instance`` at most 0.3 s and
``layered_dag`` at most 1 s at 50,000 / 500,000. They are reported, not enforced.

``--quick`` measures the 5,000 / 50,000 size only. Also runs on code without the table form
(the "before" numbers): those rows are then left out.

``--costs`` measures networks whose elements carry cost functions instead, at 50,000 nodes /
500,000 links / N = 200 (``--quick``: 5,000 / 50,000): (a) 1 % of the nodes and links with
a cost function (capped linear, tiers, and one in ten of them modules) and (b) every node and
link with one (capped linear and tiers, alternately). For each, the JSON file and the Parquet
tables are loaded, compiled and solved by PSG on the compiled engine (when numba is installed
and its cost tables fit) in a fresh process: seconds per step (``process``: the whole process
from its first import), the peak RSS once loaded and compiled (``MiB``) and at the end (the
process's ``VmHWM``: Linux only).
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import inferplan
from inferplan.codesign import compile_instance, solve_psg, throughput_optimal

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = 200

# Runs a command and prints its wall seconds and peak RSS (MiB): the child is this helper's
# only child, so RUSAGE_CHILDREN's maxrss is that command's peak.
_MEASURE = (
    "import resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "wall = time.perf_counter() - start\n"
    "if done.returncode:\n"
    "    sys.exit(done.stderr.decode())\n"
    "print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
)


def least(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """The least seconds of ``runs`` calls of ``fn``, and the last call's result."""
    best, out = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def process(args: list[str], runs: int) -> tuple[float, float]:
    """The least wall seconds and least peak RSS (MiB) of ``runs`` fresh processes."""
    # without PYTHONDONTWRITEBYTECODE: an install has its bytecode caches, and with it set
    # every process would compile each module it imports from source
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = {**inherited, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get(
        "PYTHONPATH", "")]).rstrip(os.pathsep)}  # fmt: skip
    walls, rss = [], []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", _MEASURE, *args], env=env,
                              capture_output=True, text=True, check=True)  # fmt: skip
        wall, peak = map(float, done.stdout.split())
        walls.append(wall)
        rss.append(peak)
    return min(walls), min(rss)


def profile() -> inferplan.Profile:
    rng = np.random.default_rng(0)
    return inferplan.Profile(
        f"random-{BLOCKS}",
        flops=tuple(rng.uniform(1e8, 1e10, BLOCKS)),
        activation_bits=tuple(rng.uniform(1e5, 1e8, BLOCKS + 1)),
    )


def has_tables() -> bool:
    if "tables" not in inspect.signature(inferplan.save_network).parameters:
        return False
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def measure(n_nodes: int, n_links: int, runs: int, folder: Path) -> None:
    prof = profile()
    generate, net = least(lambda: inferplan.layered_dag(n_nodes, n_links, seed=1), runs)
    beta = 0.5 * throughput_optimal(compile_instance(net, prof)).interval
    prof_file = folder / "profile.json"
    inferplan.save_profile(prof, prof_file)
    files = {"JSON": folder / "net.json"}
    inferplan.save_network(net, files["JSON"])
    if has_tables():
        files["Parquet"] = folder / "parquet" / "net.json"
        files["CSV"] = folder / "csv" / "net.json"
        for form in ("Parquet", "CSV"):
            files[form].parent.mkdir()
            save: Any = inferplan.save_network
            save(net, files[form], tables=form.lower())
    size = files["JSON"].stat().st_size / 2**20
    print(f"\n{n_nodes:,} nodes / {n_links:,} links / N = {BLOCKS} "
          f"(JSON file {size:.0f} MiB), least of {runs} runs")  # fmt: skip
    rows = [["layered_dag", f"{generate:.3f}", ""]]
    stdlib = "import json, sys; json.load(open(sys.argv[1]))"
    parse, parse_rss = process([sys.executable, "-c", stdlib, str(files["JSON"])], runs)
    rows.append(["json.load (stdlib, own process)", f"{parse:.3f}", f"{parse_rss:.0f}"])
    for form, path in files.items():
        load, loaded = least(lambda p=path: inferplan.load_network(p), runs)
        compile_s, inst = least(lambda n=loaded: compile_instance(n, prof), runs)
        solve, _ = least(lambda i=inst: solve_psg(i, beta), runs)
        wall, rss = process([sys.executable, "-m", "inferplan", "provision", str(path),
                             str(prof_file), "--interval", repr(beta), "--json"], runs)  # fmt: skip
        rows += [
            [f"{form}: load_network", f"{load:.3f}", ""],
            [f"{form}: compile_instance", f"{compile_s:.3f}", ""],
            [f"{form}: PSG solve", f"{solve:.3f}", ""],
            [f"{form}: inferplan provision (own process)", f"{wall:.3f}", f"{rss:.0f}"],
        ]
        if form == "JSON":
            rows.append(["  vs json.load", f"{wall / parse:.1f}x", f"{rss / parse_rss:.1f}x"])
    width = max(len(r[0]) for r in rows)
    print(f"{'step':<{width}}  {'seconds':>8}  {'peak MiB':>8}")
    for name, secs, mib in rows:
        print(f"{name:<{width}}  {secs:>8}  {mib:>8}")
    sys.stdout.flush()


def costed(net: inferplan.Network, share: float, seed: int) -> inferplan.Network:
    """``net`` with cost functions on a ``share`` of its nodes and links: capped linear and
    convex tiers alternately (below a share of 1, one in ten of them a module cost)."""
    from inferplan.network.costs import CapacityCost, LinearCost, ModuleCost, TieredCost

    rng = np.random.default_rng(seed)

    def costs(capacity: np.ndarray, price: np.ndarray) -> dict[int, CapacityCost]:
        chosen = np.flatnonzero(rng.random(capacity.size) < share) if share < 1 else (
            np.arange(capacity.size))  # fmt: skip
        out: dict[int, CapacityCost] = {}
        for r, k in enumerate(chosen.tolist()):
            c, p = float(capacity[k]), float(price[k])
            if share < 1 and r % 10 == 9:
                out[k] = ModuleCost(size=c / 2, price=p * c / 2)
            elif r % 2:
                out[k] = TieredCost(upto=(c, 4 * c), prices=(p, 2 * p, 4 * p))
            else:
                out[k] = LinearCost(p, 20 * c)
        return out

    return inferplan.Network.from_columns(
        node_ids=net.node_ids, node_capacity=net.node_capacity, node_price=net.node_price,
        link_source=[net.node_ids[k] for k in net.link_tail.tolist()],
        link_target=[net.node_ids[k] for k in net.link_head.tolist()],
        link_capacity=net.link_capacity, link_price=net.link_price, source=net.source,
        target=net.target, node_costs=costs(net.node_capacity, net.node_price),
        link_costs=costs(net.link_capacity, net.link_price),
    )  # fmt: skip


_STEPS = (
    "import json, sys, time\n"
    "def peak():  # this process's own (ru_maxrss counts the parent's pages before exec)\n"
    "    status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
    "    return int(status.split()[0]) / 1024\n"
    "t0 = time.perf_counter()\n"
    "import inferplan\n"
    "from inferplan.codesign import compile_instance, solve_psg\n"
    "from inferplan.codesign.engine.compiled import available, fits\n"
    "t1 = time.perf_counter()\n"
    "net = inferplan.load_network(sys.argv[1])\n"
    "t2 = time.perf_counter()\n"
    "inst = compile_instance(net, inferplan.load_profile(sys.argv[2]))\n"
    "t3 = time.perf_counter()\n"
    "loaded = peak()\n"
    "engine = 'compiled' if available() and fits(inst) else 'numpy'\n"
    "plan = solve_psg(inst, float(sys.argv[3]), engine=engine)\n"
    "t4 = time.perf_counter()\n"
    "print(json.dumps({'load': t2 - t1, 'compile': t3 - t2, 'solve': t4 - t3, 'total': t4 - t0,\n"
    "    'engine': engine, 'cost': plan.cost, 'loaded': loaded,\n"
    "    'rss': peak()}))\n"
)


def cost_steps(paths: dict[str, Path], prof_file: Path, beta: float, runs: int) -> None:
    """Load, compile and PSG-solve each file in a fresh process: the least seconds of each
    step over ``runs`` and the least peak RSS."""
    import json

    # without PYTHONDONTWRITEBYTECODE: an install has its bytecode caches, and with it set
    # every process would compile each module it imports from source
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = {**inherited, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get(
        "PYTHONPATH", "")]).rstrip(os.pathsep)}  # fmt: skip
    print(f"{'form':<8} {'load':>7} {'compile':>8} {'PSG':>7} {'process':>8} {'MiB':>6} "
          f"{'peak MiB':>9}  engine, plan cost")  # fmt: skip
    for form, path in paths.items():
        seen: list[dict[str, Any]] = []
        for _ in range(runs):
            args = [sys.executable, "-c", _STEPS, str(path), str(prof_file), repr(beta)]
            done = subprocess.run(args, env=env, capture_output=True, text=True)
            if done.returncode:
                print(f"{form:<8} failed: {done.stderr.strip().splitlines()[-1]}")
                break
            seen.append(json.loads(done.stdout))
        if not seen:
            continue
        best = {key: min(s.get(key, math.nan) for s in seen) for key in (
            "load", "compile", "solve", "total", "loaded", "rss")}  # fmt: skip
        print(f"{form:<8} {best['load']:>7.3f} {best['compile']:>8.3f} {best['solve']:>7.3f} "
              f"{best['total']:>8.3f} {best['loaded']:>6.0f} {best['rss']:>9.0f}  "
              f"{seen[-1]['engine']}, {seen[-1]['cost']:.6g}")  # fmt: skip
        sys.stdout.flush()


def costs(n_nodes: int, n_links: int, runs: int) -> None:
    """The cost-function networks (see the module docstring), each share in its own folder."""
    prof = profile()
    base = inferplan.layered_dag(n_nodes, n_links, seed=1)
    beta = 0.5 * throughput_optimal(compile_instance(base, prof)).interval
    for share, name in ((0.01, "(a) 1 %"), (1.0, "(b) 100 %")):
        with tempfile.TemporaryDirectory() as folder:
            net = costed(base, share, seed=2)
            prof_file = Path(folder) / "profile.json"
            inferplan.save_profile(prof, prof_file)
            paths = {"JSON": Path(folder) / "net.json"}
            inferplan.save_network(net, paths["JSON"])
            if has_tables():
                paths["Parquet"] = Path(folder) / "parquet" / "net.json"
                paths["Parquet"].parent.mkdir()
                save: Any = inferplan.save_network
                save(net, paths["Parquet"], tables=True)
            print(f"\n{name} of the elements with a cost function: {n_nodes:,} nodes / "
                  f"{n_links:,} links / N = {BLOCKS}, seconds (least of {runs} runs)")  # fmt: skip
            cost_steps(paths, prof_file, beta, runs)


PARSERS = {
    "json (stdlib)": "import json; json.loads(open(path, 'rb').read())",
    "orjson": "import orjson; orjson.loads(open(path, 'rb').read())",
    "msgspec": "import msgspec; msgspec.json.decode(open(path, 'rb').read())",
    "pyarrow.json": (
        "import os, pyarrow.json as j; j.read_json(path, read_options=j.ReadOptions("
        "block_size=os.path.getsize(path) + 1)).to_pylist()"
    ),
}


def parsers(runs: int) -> None:
    """Parsing the 50,000 / 500,000 network file (nodes and links into Python objects) with
    each candidate parser, in a fresh process each: time and peak RSS."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "net.json"
        inferplan.save_network(inferplan.layered_dag(50_000, 500_000, seed=1), path)
        print(f"\nparsing the 50,000 / 500,000 JSON file ({path.stat().st_size / 2**20:.0f} MiB) "
              f"to Python objects, fresh process each, least of {runs} runs")  # fmt: skip
        print(f"{'parser':<14}  {'seconds':>8}  {'peak MiB':>8}")
        for name, code in PARSERS.items():
            try:
                wall, rss = process([sys.executable, "-c", f"path = {str(path)!r}; {code}"], runs)
            except subprocess.CalledProcessError as exc:
                print(f"{name:<14}  failed: {exc.stderr.strip().splitlines()[-1]}")
                continue
            print(f"{name:<14}  {wall:>8.3f}  {rss:>8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the 5,000 / 50,000 size only")
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (least kept)")
    parser.add_argument("--parsers", action="store_true", help="compare JSON parsers only")
    parser.add_argument("--costs", action="store_true", help="networks with cost functions only")
    args = parser.parse_args()
    if args.parsers:
        parsers(args.runs)
        return
    if args.costs:
        costs(*((5_000, 50_000) if args.quick else (50_000, 500_000)), args.runs)
        return
    sizes = [(5_000, 50_000)] + ([] if args.quick else [(50_000, 500_000)])
    for n_nodes, n_links in sizes:
        with tempfile.TemporaryDirectory() as folder:
            measure(n_nodes, n_links, args.runs, Path(folder))


if __name__ == "__main__":
    main()
