"""``inferplan frontier``: least co-design cost against target throughput."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.options import (
    BlocksOpt,
    ConfigOpt,
    CutsOpt,
    DecodeOpt,
    DtypeOpt,
    InputShapesOpt,
    JsonOpt,
    MaxIdealsOpt,
    MethodChoice,
    NetworkArg,
    ProfileArg,
    SeqLenOpt,
    blame_network_file,
    method_help,
    model_options,
)
from inferplan.cli.render import console, print_json, table, written


@app.command("frontier")
@friendly_errors
def frontier_command(
    network: NetworkArg,
    profile: ProfileArg,
    low: Annotated[
        float | None,
        typer.Option("--from", help="Lowest target throughput (inferences/s); default 1/T*."),
    ] = None,
    high: Annotated[
        float | None,
        typer.Option("--to", help="Highest target throughput (inferences/s); default 4/T*."),
    ] = None,
    points: Annotated[int, typer.Option("--points", help="Rates in the sweep.")] = 101,
    method: Annotated[
        MethodChoice, typer.Option("--method", help=method_help(exact_only=True))
    ] = "psg",
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Also draw the frontier to this image file.")
    ] = None,
    as_json: JsonOpt = False,
    cuts: CutsOpt = None,
    max_ideals: MaxIdealsOpt = None,
    input_shapes: InputShapesOpt = None,
    blocks: BlocksOpt = None,
    dtype: DtypeOpt = "float32",
    config: ConfigOpt = None,
    seq_len: SeqLenOpt = None,
    decode: DecodeOpt = False,
) -> None:
    """Least cost against target throughput.

    Exact solves over a range of rates, and where the optimal deployment changes.
    """
    from inferplan.codesign.frontier import cost_frontier
    from inferplan.codesign.instance import compile_instance
    from inferplan.codesign.methods import get_method
    from inferplan.network.io import load_network
    from inferplan.profiles.models import model_profile

    model = model_options(input_shapes, blocks, dtype, config, seq_len, decode)
    net, prof = load_network(network), model_profile(profile, model)
    with blame_network_file(network):
        inst = compile_instance(net, prof, require_acyclic=get_method(method).acyclic_only,
                                cuts=cuts, max_ideals=max_ideals)  # fmt: skip
        front = cost_frontier(inst, low=low, high=high, points=points, method=method)
    if plot is not None:
        from inferplan.plots import plot_frontier  # matplotlib only when asked for

        plot_frontier(front, plot, title=f"{prof.name} on {network.name}")
        written(plot)
    if as_json:
        print_json(front.to_dict())
        return
    first, last = front.points[0], front.points[-1]
    console.print(
        f"[bold]{front.method}[/]: {len(front.points)} exact solves from "
        f"{first.throughput:.4g} to {last.throughput:.4g} inferences/s, cost "
        f"{first.cost:.6g} to {last.cost:.6g}"
    )
    bounds = [first, *(c.high for c in front.changes)]
    ends = [*(c.low for c in front.changes), last]
    rows = [
        [
            f"{a.throughput:.6g} .. {b.throughput:.6g}",
            f"{a.cost:.6g} .. {b.cost:.6g}" if math.isfinite(b.cost) else "infeasible",
            " -> ".join(a.path) or "-",
            ",".join(str(k) for k in a.partition) or "-",
        ]
        for a, b in zip(bounds, ends, strict=True)
    ]
    console.print(table("optimal deployment by target throughput",
                        ["inferences/s", "cost", "path", "partition"], rows))  # fmt: skip
