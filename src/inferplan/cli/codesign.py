"""``inferplan provision``, ``throughput`` and ``generate``: the co-design planner's commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.options import (
    JsonOpt,
    MethodChoice,
    NetworkArg,
    ProfileArg,
    ThroughputMethodChoice,
    TieBreakChoice,
    blame_network_file,
    method_help,
    throughput_method_help,
)
from inferplan.cli.render import console, print_json, table
from inferplan.units import si

# Each command imports the library when it runs, so that --help answers at once.


@app.command("provision")
@friendly_errors
def provision_command(
    network: NetworkArg,
    profile: ProfileArg,
    interval: Annotated[
        float | None,
        typer.Option(
            "--interval",
            help="Target output interval (s). Give exactly one of --interval and --throughput.",
        ),
    ] = None,
    throughput: Annotated[
        float | None,
        typer.Option(
            "--throughput",
            help="Target inferences per second. Give exactly one of --interval and --throughput.",
        ),
    ] = None,
    method: Annotated[MethodChoice, typer.Option("--method", help=method_help())] = "psg",
    as_json: JsonOpt = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Also draw the plan (png, pdf or svg file).")
    ] = None,
    tie_break: Annotated[
        TieBreakChoice | None,
        typer.Option(
            "--tie-break",
            help="PFP/PWF: which of several optimal deployments to use (default solver).",
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed for --tie-break random.", min=0)
    ] = None,
    time_limit: Annotated[
        float | None, typer.Option("--time-limit", help="MILP: seconds the solver may take.")
    ] = None,
) -> None:
    """Cheapest upgrades that reach a target throughput.

    The compute and bandwidth to buy, and where each block of the DNN runs.
    """
    from inferplan.codesign.provision import provision
    from inferplan.network.io import load_network
    from inferplan.profiles.io import load_profile

    net, prof = load_network(network), load_profile(profile)
    with blame_network_file(network):
        plan = provision(net, prof, interval=interval, throughput=throughput, method=method,
                         tie_break=tie_break, seed=seed, time_limit=time_limit)  # fmt: skip
    if plot is not None:
        from inferplan.plots import plot_plan  # matplotlib only when asked for

        plot_plan(net, plan, plot)
    if as_json:
        print_json(plan.to_dict())
        return
    console.print(
        f"[bold]{plan.method}[/] ({plan.status}): cost [bold]{plan.cost:.6g}[/], interval "
        f"{si(plan.interval, 's')} (target {si(plan.target_interval, 's')}, "
        f"{1 / plan.interval:.4g} inferences/s)"
    )
    rows = []
    prev = 0
    for node, done in zip(plan.path, plan.partition, strict=True):
        blocks = f"{prev + 1}..{done}" if done > prev else "-"
        rows.append([node, blocks, si(plan.node_upgrades.get(node, 0.0), "FLOP/s")])
        prev = done
    console.print(table("deployment", ["node", "blocks", "compute added"], rows))
    if plan.link_upgrades:
        console.print(table("bandwidth added", ["link", "amount"],
                            [[f"{u.source} -> {u.target}", si(u.amount, "bit/s")]
                             for u in plan.link_upgrades]))  # fmt: skip


@app.command("throughput")
@friendly_errors
def throughput_command(
    network: NetworkArg,
    profile: ProfileArg,
    method: Annotated[
        ThroughputMethodChoice, typer.Option("--method", help=throughput_method_help())
    ] = "psg",
    as_json: JsonOpt = False,
) -> None:
    """Throughput-optimal deployment (T*) as the network is.

    Where each block runs for the least interval, buying nothing.
    """
    from inferplan.codesign.provision import throughput as throughput_optimal
    from inferplan.network.io import load_network
    from inferplan.profiles.io import load_profile

    net, prof = load_network(network), load_profile(profile)
    with blame_network_file(network):
        best = throughput_optimal(net, prof, method=method)
    if as_json:
        print_json(best.to_dict())
        return
    console.print(f"T* = {si(best.interval, 's')} ({best.throughput:.4g} inferences/s)")
    rows, prev = [], 0
    for node, done in zip(best.path, best.partition, strict=True):
        rows.append([node, f"{prev + 1}..{done}" if done > prev else "-"])
        prev = done
    console.print(table("deployment", ["node", "blocks"], rows))


generate_app = typer.Typer(help="Generate networks.", rich_markup_mode=None, no_args_is_help=True)
app.add_typer(generate_app, name="generate")


@generate_app.command("tiered")
@friendly_errors
def generate_tiered(
    seed: Annotated[int, typer.Option("--seed", help="Random seed.", min=0)] = 0,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Output file.")] = None,
) -> None:
    """A network of the co-design paper's study (Section IV draws)."""
    from inferplan.network.generators import tiered
    from inferplan.network.io import save_network

    net = tiered(seed=seed)
    if output is None:
        print_json(net.to_dict())
    else:
        save_network(net, output)
