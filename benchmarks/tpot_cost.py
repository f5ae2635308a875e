"""The cost of a TPOT bound: ``python benchmarks/tpot_cost.py [--out PNG] [--csv CSV]``.

For a 7B and a 70B decoder (``examples/llama-7b.yaml``, ``examples/llama-70b.yaml``) on the
public catalog ``examples/public-gpus.yaml`` (L4, A10G, A100-40GB, H100-SXM, 1 to 8 GPUs a
node), the least $/h that serves the chat mix of ``examples/chat-workload.yaml`` (70 % 512 +
128 tokens, 30 % 2048 + 256 tokens; its TTFT bound dropped, so that the TPOT bound alone binds)
at 2 requests/s, against the TPOT bound. The network is a chain of four node slots with links
of 400 Gbit/s and 5 µs between them (one server's GPUs): a plan may pipeline over up to four
nodes. Each point is ``plan_serving(..., objective="cost")`` (exact over the default batches);
the table gives the chosen GPUs per stage and the batch, and the figure annotates them where
they change along the curve. A bound no plan meets is left out (with what binds).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "src"))

from inferplan.codesign.serving import plan_serving  # noqa: E402
from inferplan.codesign.serving.files import (  # noqa: E402
    load_catalog,
    load_decoder,
    load_workload,
)
from inferplan.errors import Infeasible  # noqa: E402
from inferplan.network import Network  # noqa: E402
from inferplan.network.network import Link, Node  # noqa: E402

MODELS = {"7B": "examples/llama-7b.yaml", "70B": "examples/llama-70b.yaml"}
RATE = 2.0
SLOTS = 4
BOUNDS_MS = (5, 7, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100, 125, 150, 200, 300)


def chain(slots: int = SLOTS) -> Network:
    """Source, ``slots`` node slots in a chain, target; 400 Gbit/s, 5 µs links."""
    ids = ["s", *[f"g{k}" for k in range(slots)], "t"]
    nodes = [Node(v, 1e12) for v in ids]
    links = [Link(a, b, 400e9, delay_s=5e-6) for a, b in itertools.pairwise(ids)]
    return Network(nodes, links, "s", "t")


def mix(plan) -> str:
    """The GPUs of each stage (``2xH100-SXM + 1xA10G``)."""
    return " + ".join(s.hardware.label for s in plan.stages if s.hardware)


def curve(model: str) -> list[tuple[float, float | None, str, int, str]]:
    """``(bound s, $/h or None, mix, batch, what binds when none)`` per TPOT bound."""
    decoder = load_decoder(str(ROOT / MODELS[model]))
    catalog = load_catalog(ROOT / "examples" / "public-gpus.yaml")
    base = load_workload(ROOT / "examples" / "chat-workload.yaml")
    net = chain()
    rows = []
    for ms in BOUNDS_MS:
        work = dataclasses.replace(base, requests_per_s=RATE, ttft_s=None, tpot_s=ms / 1e3)
        try:
            plan = plan_serving(net, decoder, work, catalog=catalog)
        except Infeasible as exc:
            rows.append((ms / 1e3, None, "", 0, str(exc.details.get("binding", exc))))
            continue
        rows.append((ms / 1e3, plan.price_per_hour, mix(plan), plan.batch, ""))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="Write the figure here (PNG).")
    parser.add_argument("--csv", type=Path, help="Write the table here.")
    args = parser.parse_args()
    curves = {m: curve(m) for m in MODELS}
    lines = ["model,tpot_bound_s,cost_per_hour,mix,batch,binding"]
    for model, rows in curves.items():
        for bound, cost, gpus, batch, binding in rows:
            price = "" if cost is None else f"{cost:.3f}"
            lines.append(f"{model},{bound:g},{price},{gpus},{batch or ''},{binding}")
            shown = "no plan (" + binding + ")" if cost is None else f"${cost:7.2f}/h  {gpus}"
            print(f"{model:>4} TPOT <= {bound * 1e3:5.0f} ms: {shown}"
                  + (f"  batch {batch}" if batch else ""))  # fmt: skip
    if args.csv:
        args.csv.write_text("\n".join(lines) + "\n")
    if args.out:
        plot(curves, args.out)


def plot(curves, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(11, 4.2))
    for ax, (model, rows) in zip(axes, curves.items(), strict=True):
        pts = [(b * 1e3, c, g, n) for b, c, g, n, _ in rows if c is not None]
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="post", marker="o")
        last = None
        for x, y, gpus, batch in pts:
            label = f"{gpus}, b={batch}"
            if label != last:
                ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 6),
                            fontsize=7, rotation=20)  # fmt: skip
                last = label
        ax.set_xscale("log")
        ax.set_xlabel("TPOT bound (ms)")
        ax.set_ylabel("$/h (on-demand)")
        ax.set_title(f"{model} decoder, chat mix at {RATE:g} requests/s")
        ax.grid(True, which="both", alpha=0.3)
        if pts:
            ax.set_ylim(0, max(p[1] for p in pts) * 1.25)
    fig.tight_layout()
    fig.savefig(out, dpi=130)


if __name__ == "__main__":
    main()
