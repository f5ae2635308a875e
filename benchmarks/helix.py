"""Helix's layout problem: ``python benchmarks/helix.py FILE --time-limit S --json``.

FILE is a cluster in the JSON form of Helix's instances (``layers``, ``nodes`` with ``throughput``
tables by layer count, ``edges`` as ``[from, to, tokens/s]`` with ``source`` and ``sink``). Prints
the best layout's exact max flow, the certified bound, the status, the seconds and the layout
``{node: [first_layer, k]}``; with a ``helix`` entry or ``baselines`` in the file, also their
layouts' max flows. ``--generate SEED`` instead writes a harder member of the family to FILE:
3 regions with slow links between them, 42 nodes of 7 GPU types. ``--seeds A B`` solves the
generated members A..B instead (FILE is then ignored) and prints one row per seed: flow, bound,
gap, seconds, status and the load average (the same keys, one JSON object a line, with
``--json``). ``--baselines`` adds Helix's own methods run here: Helix's MILP (HiGHS,
``--helix-milp-seconds S``, default 150), Petals, Swarm.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import numpy as np

from inferplan.codesign.pipelines.helix import LayoutInstance, LayoutNode, layout_flow, solve_layout
from inferplan.codesign.pipelines.helix_baselines import helix_milp, petals_layout, swarm_layout
from inferplan.errors import InferplanError

# GPU types: tokens/s holding one layer, the decay with more layers, the most layers memory holds.
GPUS = {
    "A100": (24000.0, 1.05, 12),
    "V100": (9000.0, 1.08, 6),
    "A10": (8500.0, 1.1, 5),
    "L4": (7500.0, 1.1, 7),
    "A6000": (12000.0, 1.07, 10),
    "T4": (5700.0, 1.15, 4),
    "RTX3090": (8000.0, 1.1, 5),
}
FAST = 61035.15625  # tokens/s inside a region
ENDS = 5e8


def generate(seed: int) -> dict[str, Any]:
    """A cluster of 42 nodes of 7 GPU types in 3 regions, slow links between regions."""
    rng = np.random.default_rng(seed)
    names = list(GPUS)
    nodes: dict[str, Any] = {}
    region: dict[str, int] = {}
    for i in range(42):
        gpu = names[i % 7] if i < 14 else names[int(rng.integers(7))]
        peak, decay, most = GPUS[gpu]
        nodes[str(i)] = {
            "type": gpu,
            "throughput": {str(k): peak / k**decay for k in range(1, most + 1)},
        }
        region[str(i)] = i % 3
    slow = {(a, b): float(rng.uniform(150.0, 900.0)) for a in range(3) for b in range(3) if a != b}
    edges = []
    for u in nodes:
        edges.append(["source", u, ENDS if region[u] == 0 else slow[(0, region[u])]])
        edges.append([u, "sink", ENDS if region[u] == 0 else slow[(region[u], 0)]])
        for v in nodes:
            if u != v:
                same = region[u] == region[v]
                edges.append([u, v, FAST if same else slow[(region[u], region[v])]])
    return {"name": f"helix-42-3regions-seed{seed}", "layers": 80, "nodes": nodes, "edges": edges}


def instance(data: Any, path: str) -> LayoutInstance:
    """The file's cluster, or ``InferplanError`` naming the field that is wrong."""

    def bad(where: str, what: str) -> InferplanError:
        return InferplanError(what, source=path, field=where)

    if not isinstance(data, dict) or not isinstance(data.get("layers"), int):
        raise bad("layers", "must be a positive integer")
    if not isinstance(data.get("nodes"), dict) or not data["nodes"]:
        raise bad("nodes", "must be a non-empty object of nodes")
    nodes = []
    for v, n in data["nodes"].items():
        table = n.get("throughput") if isinstance(n, dict) else None
        if not isinstance(table, dict) or not table:
            raise bad(f"nodes.{v}.throughput", "must be a non-empty object {layers: tokens/s}")
        try:
            nodes.append(LayoutNode(str(v), {int(k): float(t) for k, t in table.items()}))
        except (TypeError, ValueError):
            raise bad(
                f"nodes.{v}.throughput", "keys must be layer counts and values numbers"
            ) from None
    edges: dict[tuple[str, str], float] = {}
    for i, e in enumerate(data.get("edges", [])):
        if not (isinstance(e, list) and len(e) == 3 and isinstance(e[2], (int, float))):
            raise bad(f"edges[{i}]", "must be [from, to, tokens/s]")
        edges[(str(e[0]), str(e[1]))] = float(e[2])
    try:
        return LayoutInstance(data["layers"], tuple(nodes), edges)
    except InferplanError as err:
        raise err.located(path) from None


def seeds(first: int, last: int, time_limit: float, *, as_json: bool) -> int:
    """Solve the generated members ``first..last``, one row each."""
    if not as_json:
        print("seed  flow        bound       gap %     seconds  status      load")
    for seed in range(first, last + 1):
        best = solve_layout(instance(generate(seed), f"seed {seed}"), time_limit_s=time_limit)
        load = os.getloadavg()[0]
        row = {
            "seed": seed,
            "flow": best.flow,
            "bound": best.bound,
            "gap": best.gap,
            "status": best.status,
            "seconds": round(best.seconds, 3),
            "load": round(load, 2),
        }
        if as_json:
            print(json.dumps(row), flush=True)
        else:
            print(
                f"{seed:<5} {best.flow:<11.2f} {best.bound:<11.2f} {100 * best.gap:<9.2f} "
                f"{best.seconds:<8.1f} {best.status:<11} {load:.2f}",
                flush=True,
            )
    return 0


def seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse refuses anything else, exit 2)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def baselines(inst: LayoutInstance, milp_seconds: float) -> dict[str, dict[str, Any]]:
    """Helix's MILP (HiGHS, ``milp_seconds``), Petals' and Swarm's layouts, run here."""
    ours = helix_milp(inst, time_limit_s=milp_seconds)
    return {
        "helix_milp": {
            "flow": ours.flow,
            "bound": ours.bound,
            "status": ours.status,
            "seconds": round(ours.seconds, 3),
        },
        "petals": {"flow": petals_layout(inst).flow},
        "swarm": {"flow": swarm_layout(inst).flow},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--time-limit", type=float, default=150.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--generate", type=int, metavar="SEED")
    ap.add_argument("--seeds", type=int, nargs=2, metavar=("A", "B"))
    ap.add_argument("--baselines", action="store_true", help="also Helix's MILP, Petals, Swarm")
    ap.add_argument("--helix-milp-seconds", type=seconds, default=150.0, metavar="S")
    args = ap.parse_args()
    if args.seeds is not None:
        return seeds(args.seeds[0], args.seeds[1], args.time_limit, as_json=args.json)
    if args.generate is not None:
        with open(args.file, "w") as out:
            json.dump(generate(args.generate), out)
        return 0
    try:
        with open(args.file) as f:
            data = json.load(f)
        inst = instance(data, args.file)
        best = solve_layout(inst, time_limit_s=args.time_limit)
    except (OSError, ValueError) as err:
        print(f"error: {args.file}: {err}", file=sys.stderr)
        return 2
    except InferplanError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    out: dict[str, Any] = {
        "flow": best.flow,
        "bound": best.bound,
        "status": best.status,
        "seconds": round(best.seconds, 3),
        "layout": {v: list(r) for v, r in best.layout.items()},
    }
    others = {"helix": data.get("helix", {}), **data.get("baselines", {})}
    compared = {
        name: layout_flow(inst, {v: (int(r[0]), int(r[1])) for v, r in o["layout"].items()})
        for name, o in others.items()
        if isinstance(o, dict) and "layout" in o
    }
    if compared:
        out["compared"] = compared
    if args.baselines:
        try:
            out["baselines"] = baselines(inst, args.helix_milp_seconds)
        except InferplanError as err:
            print(f"error: {args.file}: {err}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(out))
    else:
        gap = 100 * best.gap if best.flow > 0 else float("inf")
        print(f"flow {best.flow:.3f}  bound {best.bound:.3f}  gap {gap:.3f} %", end="  ")
        print(f"{best.status}  {best.seconds:.1f} s")
        for name, flow in compared.items():
            print(f"{name}: {flow:.3f}")
        for name, b in out.get("baselines", {}).items():
            print(f"{name} (ours): " + "  ".join(f"{key} {value}" for key, value in b.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
