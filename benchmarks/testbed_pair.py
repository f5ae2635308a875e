"""Device-edge co-inference measured on the testbed: ``sudo python benchmarks/testbed_pair.py``.

For the MLP and AlexNet examples (``examples/edge-mlp.yaml`` with ``mlp-1024x8``,
``examples/edge-alexnet.yaml`` with ``alexnet``) and every strategy of the registry
(:data:`inferplan.coinference.STRATEGIES`), runs ``device run --testbed``
(:func:`~inferplan.runtime.testbed.pair.run_on_testbed`: the device and the edge held to
``f_l`` and ``f_c`` by CPU quotas, each upload shaped to the Shannon rate of its SNR, nothing
paced; docs/testbed.md) and records the measured mean cost per inference with its 95 %
confidence interval, and with the download's share (``Z``), beside the expected ``E[eta_S]``
and ``Z(M) = c(M) + E[eta_S]``; whether ``Z(M)`` lies in the measured interval; the dilation
and the mean overheads of the device, the upload and the edge over their model.

Writes ``OUT/testbed-pair.csv`` and ``OUT/testbed-pair.png`` (measured against expected, per
strategy, one panel per example) and prints a line per run with the load average; needs root
(skipped with the reason otherwise).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]

from inferplan.coinference import STRATEGIES  # noqa: E402
from inferplan.runtime.testbed.linux import missing  # noqa: E402

EXAMPLES = (("mlp", "mlp-1024x8", "edge-mlp.yaml"), ("alexnet", "alexnet", "edge-alexnet.yaml"))


def one_run(name: str, model: str, system_file: Path, method: str, inferences: int,
            seed: int) -> dict[str, Any]:  # fmt: skip
    from inferplan.runtime.layered import ModelSpec, build_layers, load_model_system
    from inferplan.runtime.testbed.pair import run_on_testbed

    spec = ModelSpec(model)
    system = load_model_system(system_file, build_layers(spec, weights=False).profile)
    started = time.monotonic()
    run = run_on_testbed(system, spec, method=method, inferences=inferences, seed=seed)
    d = run.to_dict()
    low, high = d["ci95"]
    download = d["mean_total_cost"] - d["mean_cost"]
    bed = d["testbed"]
    parts = d["overhead_parts_s"]
    return {
        "example": name,
        "method": method,
        "placement": d["placement"],
        "inferences": d["completed"],
        "expected_cost": d["expected_cost"],
        "measured_cost": d["mean_cost"],
        "ci_low": low,
        "ci_high": high,
        "expected_Z": d["expected_total_cost"],
        "measured_Z": d["mean_total_cost"],
        "Z_ci_low": low + download,
        "Z_ci_high": high + download,
        "Z_in_ci": low + download <= d["expected_total_cost"] <= high + download,
        "ratio": d["mean_total_cost"] / d["expected_total_cost"],
        "modelled_cost_of_draws": d["modelled_cost"],
        "dilation": bed["dilation"],
        "device_over_s": parts["device"],
        "upload_over_s": parts["upload"],
        "edge_over_s": parts["edge"],
        "rate_change_median_s": bed["rate_change_s"]["median"],
        "outputs_match": d["outputs_match"],
        "load": os.getloadavg()[0],
        "wall_s": time.monotonic() - started,
    }


def figure(rows: list[dict[str, Any]], path: Path) -> None:
    from inferplan.plots._mpl import styled_figure

    names = list(dict.fromkeys(r["example"] for r in rows))
    with styled_figure([path], figsize=(6.5, 2.8)) as fig:
        axes = fig.subplots(1, len(names), squeeze=False)[0]
        for ax, name in zip(axes, names, strict=True):
            mine = [r for r in rows if r["example"] == name]
            xs = range(len(mine))
            measured = [r["measured_Z"] for r in mine]
            errors = [[r["measured_Z"] - r["Z_ci_low"] for r in mine],
                      [r["Z_ci_high"] - r["measured_Z"] for r in mine]]  # fmt: skip
            ax.errorbar(xs, measured, yerr=errors, fmt="o", markersize=3, capsize=2,
                        label="measured (95 % CI)")  # fmt: skip
            ax.scatter(xs, [r["expected_Z"] for r in mine], marker="_", s=120, color="k",
                       label="Z(M)", zorder=3)  # fmt: skip
            ax.set_xticks(list(xs), [r["method"] for r in mine], rotation=60, ha="right",
                          fontsize=6)  # fmt: skip
            ax.set_title(name, fontsize=8)
        axes[0].set_ylabel("cost per inference")
        axes[0].legend(frameon=False, fontsize=6)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inferences", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", nargs="*", default=[e[0] for e in EXAMPLES])
    parser.add_argument("--methods", nargs="*", default=list(STRATEGIES))
    parser.add_argument("--out", type=Path, default=Path("testbed-pair"))
    args = parser.parse_args()
    lacks = missing()
    if lacks:
        print("skipped: the testbed needs " + "; ".join(lacks))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, model, system in EXAMPLES:
        if name not in args.examples:
            continue
        for method in args.methods:
            row = one_run(name, model, ROOT / "examples" / system, method, args.inferences,
                          args.seed)  # fmt: skip
            rows.append(row)
            print(f"{name} {method}: M {row['placement']}, Z measured {row['measured_Z']:.5g} "
                  f"[{row['Z_ci_low']:.5g}, {row['Z_ci_high']:.5g}] against Z(M) "
                  f"{row['expected_Z']:.5g} ({row['ratio']:.3f}x), k {row['dilation']:.3g}, "
                  f"over the model: device {1e3 * row['device_over_s']:.2f} ms, upload "
                  f"{1e3 * row['upload_over_s']:.2f} ms, edge {1e3 * row['edge_over_s']:.2f} ms;"
                  f" load {row['load']:.1f}", flush=True)  # fmt: skip
    with open(args.out / "testbed-pair.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    figure(rows, args.out / "testbed-pair.png")
    inside = sum(r["Z_in_ci"] for r in rows)
    print(f"{len(rows)} runs; Z(M) inside the measured 95 % CI in {inside}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip
    print(f"written: {args.out / 'testbed-pair.csv'}, {args.out / 'testbed-pair.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
