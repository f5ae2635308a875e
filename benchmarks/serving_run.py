"""Benchmark of ``inferplan run --workload``: ``python benchmarks/serving_run.py [--quick]``.

Serving plans of a tiny LLaMA-style decoder (4 layers, hidden 64, random weights) on the
three-node chain of ``examples/tiny-serving-network.yaml`` with each node's memory set (600,
300 or 175 kB) so that the plan runs on fewer or more nodes (the stages column: how many it
took), at several decode batches and two prompt/output mixes; each is served under
``--emulate`` (every stage paced to its planned step) and the table gives the measured TPOT
(median over the requests) and tokens/s beside the predicted ones, and whether every token
equals the unsplit model's. tokens/s is measured over the span from the first arrival to the
last token of a finite run (its ramp-up and drain included); the prediction is the workload's
rate times the mean output tokens (the steady state). The machine is shared:
a busy neighbour shows up as a longer TPOT.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "src"))

from inferplan.cli.serving_run import _request  # noqa: E402
from inferplan.runtime.serving import run_serving  # noqa: E402

SHAPE = ["num_hidden_layers=4", "hidden_size=64", "intermediate_size=128",
         "num_attention_heads=4", "num_key_value_heads=2", "vocab_size=256",
         "max_position_embeddings=512"]  # fmt: skip
MIXES = {
    "short": "requests_per_s: {rate}\nclasses:\n"
             "  - {{prompt_tokens: 16, output_tokens: 8, share: 0.6}}\n"
             "  - {{prompt_tokens: 32, output_tokens: 16, share: 0.4}}\n",
    "long-out": "requests_per_s: {rate}\nclasses:\n"
                "  - {{prompt_tokens: 8, output_tokens: 24, share: 1.0}}\n",
}  # fmt: skip
MEMORY = {1: "600e3", 2: "300e3", 3: "175e3"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument(
        "--memory",
        type=int,
        choices=sorted(MEMORY),
        help="Only the cases of this memory setting (1, 2 or 3).",
    )
    args = parser.parse_args()
    cases = [(1, 4, "short", 2.0), (2, 4, "short", 2.0), (2, 8, "short", 3.0),
             (3, 2, "short", 1.0), (2, 4, "long-out", 1.0), (1, 8, "long-out", 2.0),
             (3, 2, "long-out", 1.0)]  # fmt: skip
    if args.memory is not None:
        cases = [c for c in cases if c[0] == args.memory]
    if args.quick:
        cases = cases[:2]
    base = (ROOT / "examples" / "tiny-serving-network.yaml").read_text()
    print(
        f"{'memory':>6} {'batch':>5} {'mix':>8} {'rate':>5} {'stages':>6} {'TPOT meas':>10} "
        f"{'TPOT pred':>10} {'gap':>6} {'tok/s meas':>10} {'tok/s pred':>10} {'match':>5}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for nodes, batch, mix, rate in cases:
            net = Path(tmp) / f"net{nodes}.yaml"
            net.write_text(base.replace("memory: 300e3", f"memory: {MEMORY[nodes]}"))
            work = Path(tmp) / f"{mix}-{rate}.yaml"
            work.write_text(MIXES[mix].format(rate=rate))
            _, run, summary = _request(net, "transformers:LlamaConfig", work, args.requests,
                                       SHAPE, [batch], True, 0, 120.0)  # fmt: skip
            out = run_serving(run)
            gap = out["tpot"] / summary["predicted_tpot"] - 1
            print(f"{MEMORY[nodes]:>6} {batch:>5} {mix:>8} {rate:>5g} {len(run.stages):>6} "
                  f"{out['tpot'] * 1e3:>8.1f}ms {summary['predicted_tpot'] * 1e3:>8.1f}ms "
                  f"{gap:>+6.0%} {out['tokens_per_s']:>10.1f} "
                  f"{summary['predicted_tokens_per_s']:>10.1f} {out['tokens_match']!s:>5}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
