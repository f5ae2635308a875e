"""Benchmarks of the co-design solvers: ``python benchmarks/run.py [--quick]``.

Prints three tables:

(a) per-solve time on the paper's instance family (tiered networks x VGG-16 / ResNet-50 x
    alpha in {0.25, 0.4, 0.6, 0.8}) for PSG, PFP, PWF, T*, the MILP and the reference
    Algorithm 1; PSG and T* on both engines (``compiled``: the numba kernels, ``numpy``: the
    vectorised relaxation). Each instance is compiled once (``compile_instance``); the time is
    one call of the solver on the compiled instance, Plan included unless said otherwise,
    averaged over repeats; the table shows the median and 90th percentile over instances.
(b) scaling of PSG and T* on both engines on random layered DAGs (``layered_dag``) up to
    5,000 nodes / 50,000 links and N up to 500 blocks (linear costs): time per solve (best of
    a few) and peak memory of the solve (tracemalloc, numpy buffers included), with the
    growth exponents fitted on log-log scales in |E| (N = 200) and in N (1,000 nodes / 10,000
    links).
(c) speed-up of PSG (each engine) over the reference Algorithm 1. The reference runs where it
    finishes in reasonable time; beyond that its time is extrapolated from its measured time
    per transition (it relaxes exactly ``sum_v |out(v)| (N + 1 - i)`` transitions over the
    reachable states, counted here), and marked "est.".

The compiled engine needs numba (``pip install 'inferplan[fast]'``); without it only the numpy
rows are measured. Kernels are compiled (or loaded from their cache) before any timing.

The machine is shared: timings are noisy, and ``--quick`` runs smaller series.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import inferplan
from inferplan.codesign import (
    CodesignInstance,
    compile_instance,
    reference_psg,
    solve_milp,
    solve_pfp,
    solve_psg,
    solve_pwf,
    throughput_optimal,
)
from inferplan.codesign.engine.compiled import available
from inferplan.codesign.engine.psg import psg_path

ALPHAS = (0.25, 0.4, 0.6, 0.8)
ENGINES = ("compiled", "numpy") if available() else ("numpy",)


def per_call(fn: Callable[[], Any], repeat: int) -> float:
    """Mean seconds per call of ``fn`` over ``repeat`` calls, after one warm-up call."""
    fn()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def best_of(fn: Callable[[], Any], repeat: int, budget: float = 0.5) -> float:
    """Least seconds of at least ``repeat`` calls, more (up to 50) while the calls so far took
    under ``budget`` seconds: the least disturbed by other load on a shared machine."""
    times: list[float] = []
    while len(times) < repeat or (sum(times) < budget and len(times) < 50):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def peak_bytes(fn: Callable[[], Any]) -> int:
    """Peak memory allocated while ``fn`` runs (numpy buffers included)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[k])) for r in [header, *rows]) for k in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths, strict=True)))
    sys.stdout.flush()


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def paper_family(networks: int, heavy_every: int, repeat: int) -> None:
    cases: list[tuple[CodesignInstance, float]] = []
    for seed in range(networks):
        net = inferplan.tiered(seed=seed)
        for profile in (inferplan.vgg16(), inferplan.resnet50()):
            inst = compile_instance(net, profile)
            base = throughput_optimal(inst).interval
            cases.extend((inst, alpha * base) for alpha in ALPHAS)
    solvers: dict[str, tuple[Callable[[CodesignInstance, float], Any], int, int]] = {}
    for engine in ENGINES:  # name: (solver, use every k-th instance, repeats)
        solvers |= {
            f"PSG ({engine})": (partial(solve_psg, engine=engine), 1, repeat),
            f"PSG ({engine}), path only (no Plan)": (partial(psg_path, engine=engine), 1, repeat),
            f"T* ({engine})": (
                lambda inst, beta, e=engine: throughput_optimal(inst, engine=e),
                1,
                repeat,
            ),
        }
    solvers |= {
        "PFP": (solve_pfp, 1, repeat),
        "PWF": (solve_pwf, 1, max(1, repeat // 4)),
        "MILP": (solve_milp, heavy_every, 1),
        "reference (Alg. 1)": (reference_psg, heavy_every, 1),
    }
    rows = []
    for name, (solve, every, reps) in solvers.items():
        chosen = cases[::every]
        times = [per_call(lambda i=inst, b=beta, f=solve: f(i, b), reps) for inst, beta in chosen]
        deciles = statistics.quantiles(times, n=10) if len(times) > 1 else times * 9
        rows.append([name, str(len(chosen)), ms(statistics.median(times)), ms(deciles[-1])])
    table(
        f"(a) paper family: {len(cases)} instances ({networks} tiered networks x 2 models x "
        f"{len(ALPHAS)} alphas), time per solve of a compiled instance",
        ["solver", "instances", "median ms", "p90 ms"],
        rows,
    )


def _profile(n_blocks: int, seed: int = 0) -> inferplan.Profile:
    rng = np.random.default_rng(seed)
    return inferplan.Profile(
        f"random-{n_blocks}",
        flops=tuple(rng.uniform(1e8, 1e10, n_blocks)),
        activation_bits=tuple(rng.uniform(1e5, 1e8, n_blocks + 1)),
    )


def transitions(inst: CodesignInstance) -> int:
    """Transitions reference Algorithm 1 relaxes: each finite state times each out-link
    times each ``j >= i`` (the reachable block counts of a state graph on a DAG)."""
    W = inst.n_blocks + 1
    reach = np.zeros((len(inst.node_ids), W), dtype=bool)
    reach[inst.source, 0] = True
    total = 0
    for gen in inst.sweep:
        for v in gen.nodes:
            states = np.flatnonzero(reach[v])
            if not states.size:
                continue
            total += int(inst.out_links[v].size * (W - states).sum())
            reach[inst.link_dst[inst.out_links[v]], states.min() :] = True
    return total


def scaling(sizes: list[tuple[int, int]], blocks: list[int], fixed: tuple[int, int],
            reference_sizes: set[tuple[int, int, int]], repeat: int) -> None:  # fmt: skip
    runs = [(v, e, 200) for v, e in sizes] + [(*fixed, n) for n in blocks]
    runs += sorted(reference_sizes)
    results: dict[tuple[int, int, int], dict[str, float]] = {}
    rate = None  # reference seconds per transition, from the runs that finish
    rows = []
    for v, e, n in sorted(set(runs), key=lambda r: (r[2], r[1])):
        start = time.perf_counter()
        net = inferplan.layered_dag(v, e, seed=1)
        built = time.perf_counter() - start
        inst = compile_instance(net, _profile(n))
        beta = 0.5 * throughput_optimal(inst).interval
        measured: dict[str, float] = {}
        row = [f"{v:,}", f"{e:,}", str(n), f"{built:.2f}"]
        for engine in ENGINES:
            psg = partial(solve_psg, inst, beta, engine=engine)
            tstar = partial(throughput_optimal, inst, engine=engine)
            psg(), tstar()  # compile or load the kernels
            measured[f"psg {engine}"] = best_of(psg, repeat)
            measured[f"tstar {engine}"] = best_of(tstar, repeat)
            row += [ms(measured[f"psg {engine}"]), f"{peak_bytes(psg) / 2**20:.0f}"]
            row += [ms(measured[f"tstar {engine}"]), f"{peak_bytes(tstar) / 2**20:.0f}"]
        count = transitions(inst)
        if (v, e, n) in reference_sizes:
            start = time.perf_counter()
            reference_psg(inst, beta)
            ref_s, ref_note = time.perf_counter() - start, ""
            rate = ref_s / count
        else:
            ref_s, ref_note = (rate * count if rate else float("nan")), " est."
        results[(v, e, n)] = measured
        row += [f"{count:.3g}", f"{ref_s:.3g}{ref_note}"]
        row += [f"{ref_s / measured[f'psg {engine}']:,.0f}x{ref_note}" for engine in ENGINES]
        rows.append(row)
    header = ["nodes", "links", "N", "build s"]
    for engine in ENGINES:
        header += [f"PSG {engine} ms", "MB", f"T* {engine} ms", "MB"]
    header += ["transitions", "reference s"] + [f"speed-up {engine}" for engine in ENGINES]
    table(
        "(b)+(c) layered DAGs, linear costs: PSG and T* per solve (best of at least "
        f"{repeat} and up to 50 runs within 0.5 s), peak memory of the solve, reference "
        "Algorithm 1 and PSG's speed-up",
        header,
        rows,
    )
    fits = []
    for label, series in (
        ("|E| (N = 200)", [(e, results[(v, e, 200)]) for v, e in sizes]),
        (f"N ({fixed[0]:,} nodes, {fixed[1]:,} links)",
         [(n, results[(*fixed, n)]) for n in blocks]),
    ):  # fmt: skip
        x = np.log([s for s, _ in series])
        fits.append([label]
                    + [f"{np.polyfit(x, np.log([r[k] for _, r in series]), 1)[0]:.2f}"
                       for k in series[0][1]])  # fmt: skip
    table(
        "fitted growth exponents (time ~ size^k)",
        ["in", *(f"{k.replace('tstar', 'T*').replace('psg', 'PSG')} k" for k in measured)],
        fits,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small series (about a minute)")
    parser.add_argument("--part", choices=["a", "bc", "all"], default="all",
                        help="a: paper family; bc: scaling and speed-up")  # fmt: skip
    args = parser.parse_args()
    if args.part in ("a", "all"):
        if args.quick:
            paper_family(networks=10, heavy_every=8, repeat=20)
        else:
            paper_family(networks=50, heavy_every=4, repeat=50)
    if args.part == "a":
        return
    if args.quick:
        scaling(sizes=[(100, 1000), (500, 5000), (1000, 10000), (5000, 50000)],
                blocks=[50, 100, 200], fixed=(1000, 10000),
                reference_sizes={(100, 1000, 25)}, repeat=2)  # fmt: skip
    else:
        scaling(sizes=[(100, 1000), (300, 3000), (1000, 10000), (2000, 20000), (5000, 50000)],
                blocks=[25, 50, 100, 200, 500], fixed=(1000, 10000),
                reference_sizes={(100, 1000, 25), (100, 1000, 50), (300, 3000, 50)},
                repeat=3)  # fmt: skip


if __name__ == "__main__":
    main()
