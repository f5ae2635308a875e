"""What explaining a plan costs: ``python benchmarks/explain.py [--quick]``.

On the paper's instance family (tiered networks x VGG-16 / ResNet-50 x alpha in {0.25, 0.4,
0.6, 0.8}, the target ``alpha T*``) and on the two-branch layer graph of ``examples/`` (its
ideals), prints per instance kind the median and largest CPU seconds of one PSG solve and of
:func:`inferplan.codesign.explain.explain_plan` on its plan (the runners-up, the binding
constraints and the margins: ``2 (L - 1)`` solves for a path of ``L`` nodes, plus one per
margin), their ratio, and the median number of re-solves. Times are the fewest CPU seconds of
three calls of a compiled instance, after a warm-up; the machine is shared, so quote them with
the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

import inferplan
from inferplan.codesign import compile_instance, solve_psg, throughput_optimal
from inferplan.codesign.explain import explain_plan
from memory import best_of  # this folder's: the fewest CPU seconds of a few calls

ALPHAS = (0.25, 0.4, 0.6, 0.8)
EXAMPLES = Path(__file__).parents[1] / "examples"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two seeds instead of ten")
    seeds = range(2 if parser.parse_args().quick else 10)
    kinds: dict[str, list[tuple[float, float, int]]] = {}
    cases = [(f"tiered x {name}", inferplan.tiered(seed=seed), inferplan.load_profile(name))
             for name in ("vgg16", "resnet50") for seed in seeds]  # fmt: skip
    two = inferplan.load_profile(EXAMPLES / "two-branch.yaml")
    cases += [("tiered x two-branch (ideals)", inferplan.tiered(seed=seed), two) for seed in seeds]
    for kind, net, profile in cases:
        inst = compile_instance(net, profile)
        t_star = throughput_optimal(inst).interval
        for alpha in ALPHAS:
            beta = alpha * t_star
            plan = solve_psg(inst, beta)
            solve = best_of(lambda inst=inst, beta=beta: solve_psg(inst, beta), 3)
            why = best_of(lambda inst=inst, plan=plan: explain_plan(inst, plan), 3)
            found = explain_plan(inst, plan)
            resolves = 2 * (len(plan.path) - 1) + 1 + sum(c.marginal is not None
                                                          for c in found.binding)  # fmt: skip
            kinds.setdefault(kind, []).append((solve, why, resolves))
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| instances | PSG solve (median / max) | explain (median / max) | ratio (median) "
          "| re-solves (median) |")
    print("| --- | --- | --- | --- | --- |")
    for kind, rows in kinds.items():
        solves, whys, counts = zip(*rows, strict=True)
        ratio = statistics.median(w / s for s, w in zip(solves, whys, strict=True))
        print(f"| {kind} ({len(rows)}) | {statistics.median(solves) * 1e3:.2f} / "
              f"{max(solves) * 1e3:.2f} ms | {statistics.median(whys) * 1e3:.1f} / "
              f"{max(whys) * 1e3:.1f} ms | {ratio:.1f}x | {statistics.median(counts):g} |")


if __name__ == "__main__":
    main()
