"""Benchmark of ``inferplan run --workload``: ``python benchmarks/serving_run.py [--quick]
[--testbed]``.

Serving plans of a tiny LLaMA-style decoder (4 layers, hidden 64, random weights) on the
three-node chain of ``examples/tiny-serving-network.yaml`` with each node's memory set (600,
300 or 175 kB) so that the plan runs on one, two or three nodes (the stages column: how many
it took), at decode batches 2 to 8 and three prompt/output mixes; each is served under
``--emulate`` (every stage paced to its planned step) or, with ``--testbed``, on the testbed
(each rank in its namespace and cgroup, the hidden states over links the kernel shapes; the
chain's links then without their 1 ms delay, which the testbed cannot emulate without netem,
and the run's time dilated, its record undilated).

Per plan the table gives the measured TPOT (the mean over output tokens after each request's
first) and tokens/s (over the span from the first arrival to the last token) beside the
predicted ones for the run (``predicted_run``: the plan's schedule replayed on the run's own
arrivals, :mod:`inferplan.codesign.serving.replay`), the planner's steady-state TPOT at the
workload's rate (``steady``), and the terms they are made of, measured and predicted: the
arrival rate the run's requests came at (``run``), the sequences per decode step, the decode
step (rank 0's wall time per step against the plan's ``D``), the stages' time in sends
(``send``), the share of time in prefills (``rho``), the sequences in flight a prefill holds up
(``pf n``) and the TPOT the measured steps make (``TPOT s``), and the TTFT measured against
the replay's (median and mean over the requests). ``ok`` says whether both TPOT and
tokens/s are within 10 % of the run's predictions; ``--json`` prints every run's record. The
machine is shared: a busy neighbour shows up as a longer step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "src"))

from inferplan.cli.serving_run import _request, serve  # noqa: E402

SHAPE = ["num_hidden_layers=4", "hidden_size=64", "intermediate_size=128",
         "num_attention_heads=4", "num_key_value_heads=2", "vocab_size=256",
         "max_position_embeddings=512"]  # fmt: skip
MIXES = {
    "short": "requests_per_s: {rate}\nclasses:\n"
             "  - {{prompt_tokens: 16, output_tokens: 8, share: 0.6}}\n"
             "  - {{prompt_tokens: 32, output_tokens: 16, share: 0.4}}\n",
    "long-out": "requests_per_s: {rate}\nclasses:\n"
                "  - {{prompt_tokens: 8, output_tokens: 24, share: 1.0}}\n",
    "long-in": "requests_per_s: {rate}\nclasses:\n"
               "  - {{prompt_tokens: 96, output_tokens: 6, share: 1.0}}\n",
}  # fmt: skip
MEMORY = {1: "600e3", 2: "300e3", 3: "175e3"}
CASES = [  # (nodes' memory setting, batch, mix, requests/s)
    (1, 4, "short", 2.0), (2, 4, "short", 2.0), (3, 2, "short", 1.5),
    (1, 8, "short", 3.0), (2, 8, "short", 3.0), (3, 2, "short", 1.0),
    (1, 8, "long-out", 2.0), (2, 4, "long-out", 1.0), (3, 2, "long-out", 1.0),
    (1, 4, "long-in", 1.0), (2, 2, "long-in", 1.0), (1, 2, "long-in", 0.8),
]  # fmt: skip


def within(measured: float, predicted: float, tolerance: float = 0.10) -> bool:
    """Whether ``measured`` is within ``tolerance`` of ``predicted`` (relative)."""
    return abs(measured / predicted - 1) <= tolerance


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="The first two plans only.")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--json", action="store_true", help="Every run's record, one a line.")
    parser.add_argument("--memory", type=int, choices=sorted(MEMORY),
                        help="Only the plans of this memory setting (1, 2 or 3).")  # fmt: skip
    parser.add_argument("--only", help="Only these plans, by their 0-based index (1,4,5).")
    parser.add_argument("--testbed", action="store_true",
                        help="On the testbed (as root), the links without delay.")  # fmt: skip
    args = parser.parse_args()
    picked = range(len(CASES)) if args.only is None else [int(k) for k in args.only.split(",")]
    cases = [CASES[k] for k in picked if args.memory is None or CASES[k][0] == args.memory]
    if args.quick:
        cases = cases[:2]
    base = (ROOT / "examples" / "tiny-serving-network.yaml").read_text()
    if args.testbed:
        base = base.replace("delay_s: 0.001", "delay_s: 0")
    mode = "on the testbed" if args.testbed else "emulated"
    print(f"load average {os.getloadavg()[0]:.1f}, {args.requests} requests a plan, {mode}")
    print(f"{'st':>2} {'b':>2} {'mix':>8} {'rate':>4} {'run':>4} {'batch':>5} "
          f"{'D meas':>7} {'D pred':>7} {'send':>6} {'rho m':>5} {'rho p':>5} "
          f"{'TPOT m':>7} {'TPOT p':>7} {'gap':>5} {'steady':>7} "
          f"{'tok/s m':>7} {'tok/s p':>7} {'gap':>5} "
          f"{'pf n':>4} {'TPOT s':>6} {'TTFTmd m':>8} {'TTFTmd p':>8} {'TTFT m':>7} "
          f"{'TTFT p':>7} {'k':>4} {'ok':>3} match")  # fmt: skip
    hits = 0
    with tempfile.TemporaryDirectory() as tmp:
        for nodes, batch, mix, rate in cases:
            net = Path(tmp) / f"net{nodes}.yaml"
            net.write_text(base.replace("memory: 300e3", f"memory: {MEMORY[nodes]}"))
            work = Path(tmp) / f"{mix}-{rate}.yaml"
            work.write_text(MIXES[mix].format(rate=rate))
            _, run, summary = _request(net, "transformers:LlamaConfig", work, args.requests,
                                       SHAPE, [batch], not args.testbed, 0, 180.0,
                                       args.testbed)  # fmt: skip
            out = serve(run, summary)
            pred, steps = summary["predicted_run"], out["steps"]
            tpot_gap = out["tpot_mean"] / pred["tpot"] - 1
            tok_gap = out["tokens_per_s"] / pred["tokens_per_s"] - 1
            ok = within(out["tpot_mean"], pred["tpot"]) and within(
                out["tokens_per_s"], pred["tokens_per_s"]
            )
            hits += ok
            ms = 1e3
            print(f"{len(run.stages):>2} {batch:>2} {mix:>8} {rate:>4g} "
                  f"{out['arrival_rate']:>4.2f} "
                  f"{steps['decode_batch']:>5.2f} {steps['decode_step_s'] * ms:>5.1f}ms "
                  f"{pred['decode_step_s'] * ms:>5.1f}ms {steps['send_s'] * ms:>4.1f}ms "
                  f"{steps['prefill_busy']:>5.2f} {pred['prefill_busy']:>5.2f} "
                  f"{out['tpot_mean'] * ms:>5.1f}ms {pred['tpot'] * ms:>5.1f}ms {tpot_gap:>+5.0%} "
                  f"{summary['predicted_tpot'] * ms:>5.1f}ms "
                  f"{out['tokens_per_s']:>7.1f} {pred['tokens_per_s']:>7.1f} {tok_gap:>+5.0%} "
                  f"{steps['prefill_in_flight']:>4.2f} {steps['tpot_from_steps'] * ms:>4.1f}ms "
                  f"{out['ttft'] * ms:>6.1f}ms {pred['ttft_median'] * ms:>6.1f}ms "
                  f"{out['ttft_mean'] * ms:>5.1f}ms {pred['ttft'] * ms:>5.1f}ms "
                  f"{out.get('testbed', {}).get('dilation', 1.0):>4.2f} "
                  f"{'yes' if ok else 'no':>3} {out['tokens_match']}", flush=True)  # fmt: skip
            if args.json:
                print(json.dumps({"case": [nodes, batch, mix, rate], "measured": out,
                                  "predicted_run": pred}, default=str))  # fmt: skip
    print(f"{hits} of {len(cases)} plans within 10 % on TPOT and tokens/s")


if __name__ == "__main__":
    main()
