"""``inferplan frontier``: least co-design cost against target throughput, or against the
latency bound at one throughput (``--latency-range``)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.flows import PipelinesOpt, refuse_one_path
from inferplan.cli.options import (
    CutsOpt,
    JsonOpt,
    MaxIdealsOpt,
    MethodChoice,
    NetworkArg,
    ProfileArg,
    blame_network_file,
    method_help,
    native_stdout_muted,
    with_model_options,
)
from inferplan.cli.render import console, cut_words, print_json, table, working, written
from inferplan.errors import InvalidArgument
from inferplan.units import COST_UNIT, cost, si

if TYPE_CHECKING:
    from inferplan.profiles.models import ModelOptions


@app.command("frontier")
@friendly_errors
@with_model_options
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
    latency_range: Annotated[
        tuple[float, float] | None,
        typer.Option(
            "--latency-range",
            metavar="LO HI",
            help="Sweep the latency bound (s) from LO to HI instead, at the throughput of "
            "--throughput or --interval.",
        ),
    ] = None,
    interval: Annotated[
        float | None,
        typer.Option("--interval", help="With --latency-range: the target output interval (s)."),
    ] = None,
    throughput: Annotated[
        float | None,
        typer.Option("--throughput", help="With --latency-range: target inferences per second."),
    ] = None,
    points: Annotated[
        int, typer.Option("--points", help="Rates (or latency bounds) in the sweep.")
    ] = 101,
    method: Annotated[
        MethodChoice, typer.Option("--method", help=method_help(exact_only=True))
    ] = "psg",
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Also draw the frontier to this image file.")
    ] = None,
    as_json: JsonOpt = False,
    cuts: CutsOpt = None,
    max_ideals: MaxIdealsOpt = None,
    pipelines: PipelinesOpt = "1",
    time_limit: Annotated[
        float | None,
        typer.Option("--time-limit", help="--pipelines any: seconds each point's MILP may take."),
    ] = None,
    *,
    model_options: ModelOptions,
) -> None:
    """Least cost against target throughput, or against latency.

    Exact solves over a range of rates (or, with --latency-range, of latency bounds at one
    rate), and where the optimal deployment changes.
    """
    from inferplan.codesign.frontier import cost_frontier, latency_frontier
    from inferplan.codesign.instance import compile_instance
    from inferplan.codesign.methods import get_method
    from inferplan.network.io import load_network
    from inferplan.profiles.models import model_profile

    if pipelines == "any":
        from inferplan.cli.flows import refuse_in_frontier

        refuse_in_frontier({"--latency-range": latency_range, "--interval": interval,
                            "--throughput": throughput, "--cuts": cuts,
                            "--max-ideals": max_ideals,
                            "--method": method if method != "psg" else None})  # fmt: skip
    else:
        refuse_one_path({"--time-limit": time_limit})
    beta = _latency_sweep(latency_range, interval, throughput, low, high)
    net, prof = load_network(network), model_profile(profile, model_options)
    what = f"{'latency' if beta is not None else 'cost'} frontier of {points} points"
    with blame_network_file(network), native_stdout_muted(), working(what):
        if pipelines == "any":
            from inferplan.codesign.frontier import flow_cost_frontier

            inst = compile_instance(net, prof, require_acyclic=False, cuts="chain")
            front = flow_cost_frontier(inst, low=low, high=high, points=points,
                                       time_limit=time_limit)  # fmt: skip
        else:
            inst = compile_instance(net, prof, require_acyclic=get_method(method).acyclic_only,
                                    cuts=cuts, max_ideals=max_ideals)  # fmt: skip
            if beta is None:
                front = cost_frontier(inst, low=low, high=high, points=points, method=method)
            else:
                front = latency_frontier(inst, beta, latency_range=latency_range,
                                         points=points, method=method)  # fmt: skip
    if plot is not None:
        from inferplan.plots import plot_frontier  # matplotlib only when asked for

        plot_frontier(front, plot, title=f"{prof.name} on {network.name}")
        written(plot)
    if as_json:
        print_json(front.to_dict())
        return
    first, last = front.points[0], front.points[-1]
    latency = front.sweep == "latency"

    def show(x: float) -> str:
        return si(x, "s") if latency else f"{x:.6g}"

    what = "latency bound" if latency else "target throughput"
    unit = "latency bound" if latency else "inferences/s"
    at = f" at {first.throughput:.6g} inferences/s" if latency else ""
    console.print(
        f"[bold]{front.method}[/]: {len(front.points)} exact solves from "
        f"{show(first.swept)} to {show(last.swept)}{at}, cost "
        f"{first.cost:.6g} to {cost(last.cost)}"
    )
    starts = [0, *(front.points.index(c.high) for c in front.changes)]
    ranges = [front.points[a:b] for a, b in itertools.pairwise([*starts, len(front.points)])]
    if pipelines == "any":
        rows = [[f"{show(run[0].swept)} .. {show(run[-1].swept)}",
                 f"{run[0].cost:.6g} .. {run[-1].cost:.6g}" if math.isfinite(run[-1].cost)
                 else "infeasible",
                 " ".join(f"{v}:{a + 1}..{b}" for v, a, b in run[0].layout) or "-",
                 ", ".join(dict.fromkeys(p.status for p in run))] for run in ranges]  # fmt: skip
        console.print(table(f"optimal layout by {what}",
                            [unit, f"cost ({COST_UNIT})", "layout", "status"], rows))  # fmt: skip
        return
    rows = [
        [
            f"{show(run[0].swept)} .. {show(run[-1].swept)}",
            f"{run[0].cost:.6g} .. {run[-1].cost:.6g}" if math.isfinite(run[-1].cost)
            else "infeasible",
            " -> ".join(run[0].path) or "-",
            cut_words(run[0].partition, run[0].ideals) if run[0].path else "-",
            ", ".join(dict.fromkeys(p.status for p in run)),
        ]
        for run in ranges
    ]  # fmt: skip
    columns = [unit, f"cost ({COST_UNIT})", "path", "cuts", "status"]
    console.print(table(f"optimal deployment by {what}", columns, rows))


def _latency_sweep(
    latency_range: tuple[float, float] | None,
    interval: float | None,
    throughput: float | None,
    low: float | None,
    high: float | None,
) -> float | None:
    """The target interval of a cost-latency sweep (``None`` for a cost-throughput one);
    the flags of the other sweep refused."""
    from inferplan.codesign.provision import target_interval

    if latency_range is None:
        given = "interval" if interval is not None else "throughput"
        if interval is not None or throughput is not None:
            raise InvalidArgument("only with --latency-range (the rates of a cost-throughput "
                                  "frontier are --from and --to)", field=given)  # fmt: skip
        return None
    if low is not None or high is not None:
        raise InvalidArgument("sweeps rates, --latency-range latency bounds: give one of them",
                              field="low" if low is not None else "high")  # fmt: skip
    if interval is None and throughput is None:
        raise InvalidArgument("needs the rate to hold: give --throughput or --interval",
                              field="latency_range")  # fmt: skip
    return target_interval(interval=interval, throughput=throughput)
