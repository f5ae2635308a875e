"""``inferplan provision``, ``throughput``, ``latency`` and ``generate``: the co-design
planner's commands."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.flows import PipelinesOpt, refuse_one_path
from inferplan.cli.options import (
    PROFILE_HELP,
    CutsOpt,
    JsonOpt,
    MaxIdealsOpt,
    NetworkArg,
    ProfileArg,
    ProvisionMethodChoice,
    ThroughputMethodChoice,
    TieBreakChoice,
    blame_network_file,
    method_help,
    model_flags,
    native_stdout_muted,
    node_time_model,
    services_method_help,
    throughput_method_help,
    with_model_options,
)
from inferplan.cli.render import (
    console,
    cut_words,
    memory_table,
    plan_lines,
    plan_upgrades,
    print_json,
    stages_table,
    table,
    working,
    written,
)
from inferplan.errors import InvalidArgument
from inferplan.units import cost, latency_sum, link_name, si

NodeTimesOpt = Annotated[
    Path | None,
    typer.Option(
        "--node-times",
        help="Seconds each block takes on some nodes, measured there (a JSON or YAML file: "
        "block_seconds, node id -> one time per block; docs/codesign.md); the other nodes "
        "keep FLOPs over capacity. Cuts between blocks (chain). With --pipelines any: the "
        "flow plan's; with --services: every service's, which must all run this model.",
    ),
]

# Each command imports the library when it runs, so that --help answers at once.
if TYPE_CHECKING:
    from inferplan.codesign.plan import Bottleneck, Plan
    from inferplan.codesign.services.joint import Service, ServicesPlan
    from inferplan.network.network import Network
    from inferplan.profiles.models import ModelOptions


def _default_method(ctx: typer.Context, value: str | None) -> str:
    """``--method``'s default: ``psg`` for one profile, ``milp`` with ``--services`` (read
    here, so that an infeasible request's JSON names the method that ran)."""
    if value is not None:
        return value
    return "milp" if ctx.params.get("services") is not None else "psg"


@app.command("provision")
@friendly_errors
@with_model_options
def provision_command(
    network: NetworkArg,
    profile: Annotated[
        str | None, typer.Argument(help=f"{PROFILE_HELP} Omitted with --services.")
    ] = None,
    services: Annotated[
        Path | None,
        typer.Option(
            "--services",
            help="Services file (JSON or YAML): plan several DNN services on the network "
            "together, each with its profile, source, target and rate (and optionally a "
            "latency bound, honoured by --method milp).",
        ),
    ] = None,
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
    method: Annotated[
        ProvisionMethodChoice | None,
        typer.Option(
            "--method",
            help=f"{method_help()} (default psg). {services_method_help()} (default milp).",
            callback=_default_method,
        ),
    ] = None,
    as_json: JsonOpt = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Also draw the plan (png, pdf or svg file).")
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Also write the plan report: one self-contained HTML page (the network with "
            "the path, upgrades and bottleneck; stages with utilisation and headroom; costs).",
        ),
    ] = None,
    dot: Annotated[
        Path | None, typer.Option("--dot", help="Also write the plan as GraphViz DOT.")
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Also say why this plan: the best plan on another path and on other cuts, "
            "the constraints that bind and the marginal cost of the target and of each "
            "binding cap (exact re-solves; a section of the table output, 'explain' in "
            "--json; --report always has it).",
        ),
    ] = False,
    plot_states: Annotated[
        Path | None,
        typer.Option(
            "--plot-states",
            help="Also draw the state graph (v, i) with the plan's state path (small instances: "
            "at most 8 nodes and 600 transitions).",
        ),
    ] = None,
    tie_break: Annotated[
        TieBreakChoice | None,
        typer.Option(
            "--tie-break",
            help="PFP/PWF: which of several optimal deployments to use (default solver).",
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="Seed for --tie-break random, or of --method fast's orders.", min=0
        ),
    ] = None,
    time_limit: Annotated[
        float | None, typer.Option("--time-limit", help="MILP: seconds the solver may take.")
    ] = None,
    latency: Annotated[
        float | None,
        typer.Option(
            "--latency",
            help="Also bound the latency, the seconds one inference takes through the "
            "deployment (psg exact, milp exact on any network, pfp on its frozen "
            "deployment).",
        ),
    ] = None,
    cuts: CutsOpt = None,
    max_ideals: MaxIdealsOpt = None,
    pipelines: PipelinesOpt = "1",
    node_times: NodeTimesOpt = None,
    *,
    model_options: ModelOptions,
) -> None:
    """Cheapest upgrades that reach a target throughput.

    The compute and bandwidth to buy, and where each block of the DNN runs; with --services,
    for several DNN services sharing the network.
    """
    from inferplan.codesign.provision import provision, target_interval
    from inferplan.network.io import load_network
    from inferplan.profiles.models import model_profile

    if services is not None and pipelines == "any":
        raise InvalidArgument("not with --pipelines any: services share one path each (a flow "
                              "plan per service is not planned; docs/pipelines.md)",
                              field="services")  # fmt: skip
    if services is not None:
        _provision_services(network, services, profile, method, as_json, plot,
                            seed=seed, time_limit=time_limit, node_times=node_times,
                            single_only={"--interval": interval, "--throughput": throughput,
                                         "--tie-break": tie_break, "--latency": latency,
                                         **{model_flags()[name]: True
                                            for name in model_options.given()},
                                         "--cuts": cuts, "--max-ideals": max_ideals,
                                         "--report": report, "--dot": dot,
                                         "--plot-states": plot_states,
                                         "--explain": explain or None})  # fmt: skip
        return
    if profile is None:
        raise InvalidArgument("give a profile, or several services with --services",
                              field="profile")  # fmt: skip
    beta = target_interval(interval=interval, throughput=throughput)  # before profiling
    if pipelines == "any":
        from inferplan.cli.flows import flow_provision_command, refuse

        refuse({"--method": method if method != "psg" else None, "--tie-break": tie_break,
                "--seed": seed, "--latency": latency, "--plot": plot,
                "--plot-states": plot_states, "--cuts": cuts,
                "--max-ideals": max_ideals, "--explain": explain or None})  # fmt: skip
        flow_provision_command(network, model_profile(profile, model_options), 1.0 / beta,
                               as_json, time_limit, dot, report, node_times)  # fmt: skip
        return
    net, prof = load_network(network), model_profile(profile, model_options)
    node_time, cut_kind = node_time_model(node_times, net, prof, cuts)
    if plot_states is not None:  # refused before solving when too large to draw
        from inferplan.plots.pictures import check_drawable

        check_drawable(net, prof, cuts, max_ideals=max_ideals)
    with blame_network_file(network), native_stdout_muted():
        plan = provision(net, prof, interval=interval, throughput=throughput,
                         method=method or "psg", tie_break=tie_break, seed=seed,
                         time_limit=time_limit, cuts=cut_kind, max_ideals=max_ideals,
                         latency=latency, node_time=node_time)  # fmt: skip
    from inferplan.codesign.breakdown import plan_breakdown

    why = None
    if explain or report is not None:  # exact re-solves: only when asked
        from inferplan.codesign.provision import explain as explain_plan

        with blame_network_file(network), native_stdout_muted():
            why = explain_plan(net, prof, plan, max_ideals=max_ideals, time_limit=time_limit)
    # the latency's parts: wherever links delay or a bound was asked (one more compile)
    timed = latency is not None or bool(net.link_delay.any())
    parts = (plan_breakdown(net, prof, plan, node_time=node_time)
             if timed or report or dot else None)  # fmt: skip
    if parts is not None and (report is not None or dot is not None):
        from inferplan.plots.report import write_plan_report

        title = f"{prof.name} on {network.name}: {plan.method} plan"
        for path in write_plan_report(net, parts, html_path=report, dot_path=dot, title=title,
                                      explanation=why):
            written(path)
    if plot_states is not None:
        from inferplan.plots.pictures import plot_state_graph

        plot_state_graph(net, prof, plan, plot_states)
        written(plot_states)
    extra = {"latency_parts": parts.latency_parts().to_dict()} if parts and timed else {}
    if why is not None and explain:
        extra["explain"] = why.to_dict()
    if _drawn_or_json(net, plan, plot, as_json, block_names=prof.blocks, extra=extra):
        return
    for line in plan_lines(plan):
        console.print(line)
    if parts is not None and timed:
        split = parts.latency_parts()
        console.print(
            "latency:  "
            + latency_sum(
                split.total, split.compute, split.transfer, split.propagation, plan.target_latency
            )
        )
    console.print(stages_table("deployment", plan.path, plan.cut_indices,
                               _bottleneck(plan.bottleneck), plan_upgrades(plan),
                               layers=plan.layers, sends=plan.sends, cuts=plan.cuts))  # fmt: skip
    console.print(memory_table(plan.memory))
    if why is not None and explain:
        console.print("[bold]why this plan[/]")
        for line in why.lines():
            console.print(f"  {line}", highlight=False, markup=False)


def _provision_services(
    network: Path,
    services: Path,
    profile: str | None,
    method: str | None,
    as_json: bool,
    plot: Path | None,
    *,
    seed: int | None,
    time_limit: float | None,
    node_times: Path | None,
    single_only: dict[str, object],
) -> None:
    """``provision NETWORK --services FILE``: the joint plan of the services in FILE
    (``node_times``: a node times file of the one model every service runs)."""
    from inferplan.codesign.services.file import load_services
    from inferplan.codesign.services.joint import check_services, provision_services
    from inferplan.network.io import load_network

    if profile is not None:
        raise InvalidArgument(
            f"give a profile or --services, not both (got profile {profile!r})",
            field="services",
        )
    for flag, value in single_only.items():
        if value is not None:
            raise InvalidArgument(
                f"{flag} is for one profile; a services file gives each service's own",
                field="services",
            )
    net, listed = load_network(network), load_services(services)
    if node_times is not None:
        listed = _timed_services(listed, node_times, net)
    try:
        check_services(net, listed)
        what = f"planning {len(listed)} services ({method or 'milp'})"
        with blame_network_file(network), native_stdout_muted(), working(what):
            plan = provision_services(net, listed, method=method or "milp", seed=seed,
                                      time_limit=time_limit)  # fmt: skip
    except InvalidArgument as exc:
        if (exc.field or "").startswith("service"):  # a service's own fields: its file
            raise exc.located(str(services)) from None
        raise
    if not _drawn_or_json(net, plan, plot, as_json):
        _print_services(plan)


def _timed_services(listed: list[Service], path: Path, net: Network) -> list[Service]:
    """``listed`` with ``--node-times``: the seconds per block of one model, so every
    service must run that model and give no node times of its own."""
    from dataclasses import replace

    from inferplan.codesign.timing.file import load_measured_blocks
    from inferplan.codesign.timing.stage import FLOPS_OVER_CAPACITY

    for service in listed:
        if service.node_time is not FLOPS_OVER_CAPACITY:
            raise InvalidArgument(f"service {service.name!r} gives its own node times in the "
                                  "services file: give them there or here, not both",
                                  field="--node-times")  # fmt: skip
        if service.profile != listed[0].profile:
            raise InvalidArgument(f"the times are one model's blocks, and services "
                                  f"{listed[0].name!r} and {service.name!r} run different "
                                  "models: give each service its node_times in the services "
                                  "file", field="--node-times")  # fmt: skip
    measured = load_measured_blocks(path, net.node_ids, listed[0].profile.n_blocks)
    return [replace(service, node_time=measured) for service in listed]


def _drawn_or_json(
    net: Network,
    plan: Plan | ServicesPlan,
    plot: Path | None,
    as_json: bool,
    *,
    block_names: Sequence[str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> bool:
    """Draw ``plan`` to ``plot`` if asked (matplotlib only then; a single plan with its
    ``block_names``), and print it as JSON if ``as_json`` (with the ``extra`` fields);
    whether it was printed."""
    if plot is not None:
        from inferplan import plots  # matplotlib only when asked for
        from inferplan.codesign.plan import Plan

        if isinstance(plan, Plan):
            plots.plot_plan(net, plan, plot, block_names=block_names)
        else:
            plots.plot_services(net, plan, plot)
        written(plot)
    if as_json:
        print_json({**plan.to_dict(), **(extra or {})})
    return as_json


def _print_services(plan: ServicesPlan) -> None:
    console.print(
        f"[bold]{plan.method}[/] ({plan.status}): cost [bold]{cost(plan.cost)}[/], "
        f"lower bound {cost(plan.lower_bound)} (gap {plan.gap:.2%})"
    )
    rows = [
        [s.name, " -> ".join(s.path), cut_words(s.partition, s.ideals),
         si(s.interval, "s"), si(s.target_interval, "s"), si(s.latency or 0.0, "s")]
        for s in plan.services
    ]  # fmt: skip
    console.print(table("services", ["service", "path", "cuts", "interval", "target",
                                     "latency"], rows))  # fmt: skip
    elements = [
        *((v, si(x, "FLOP/s"), si(plan.node_upgrades.get(v, 0.0), "FLOP/s"))
          for v, x in plan.node_loads.items()),
        *((link_name(u, v), si(x, "bit/s"), si(plan.link_upgrades.get((u, v), 0.0), "bit/s"))
          for (u, v), x in plan.link_loads.items()),
    ]  # fmt: skip
    console.print(table("shared loads", ["element", "load", "added"],
                        [list(row) for row in elements]))  # fmt: skip


def _bottleneck(bottleneck: Bottleneck | None) -> dict[str, str]:
    return {bottleneck.id: "bottleneck"} if bottleneck else {}


@app.command("throughput")
@friendly_errors
@with_model_options
def throughput_command(
    network: NetworkArg,
    profile: ProfileArg,
    method: Annotated[
        ThroughputMethodChoice, typer.Option("--method", help=throughput_method_help())
    ] = "psg",
    latency: Annotated[
        float | None,
        typer.Option("--latency", help="Only deployments whose latency is at most this (s)."),
    ] = None,
    as_json: JsonOpt = False,
    cuts: CutsOpt = None,
    max_ideals: MaxIdealsOpt = None,
    pipelines: PipelinesOpt = "1",
    time_limit: Annotated[
        float | None,
        typer.Option("--time-limit", help="--pipelines any: seconds the MILP may take."),
    ] = None,
    node_times: NodeTimesOpt = None,
    dot: Annotated[
        Path | None,
        typer.Option("--dot", help="--pipelines any: also write the flow plan as GraphViz DOT."),
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option("--report", help="--pipelines any: also write the flow plan report, one "
                     "self-contained HTML page (the pipelines drawn by rate)."),
    ] = None,
    *,
    model_options: ModelOptions,
) -> None:
    """Throughput-optimal deployment (T*) as the network is.

    Where each block runs for the least interval, buying nothing.
    """
    from inferplan.codesign.provision import throughput as throughput_optimal
    from inferplan.network.io import load_network
    from inferplan.profiles.models import model_profile

    if pipelines == "any":
        from inferplan.cli.flows import flow_throughput_command, refuse

        refuse({"--method": method if method != "psg" else None, "--latency": latency,
                "--cuts": cuts, "--max-ideals": max_ideals})  # fmt: skip
        flow_throughput_command(network, model_profile(profile, model_options), as_json,
                                time_limit, dot, report, node_times)  # fmt: skip
        return
    refuse_one_path({"--time-limit": time_limit, "--dot": dot, "--report": report})
    net, prof = load_network(network), model_profile(profile, model_options)
    node_time, cut_kind = node_time_model(node_times, net, prof, cuts)
    with blame_network_file(network), native_stdout_muted():
        best = throughput_optimal(net, prof, method=method, cuts=cut_kind,
                                  max_ideals=max_ideals, latency=latency,
                                  node_time=node_time)  # fmt: skip
    if as_json:
        print_json(best.to_dict())
        return
    console.print(f"T* = {si(best.interval, 's')} ({best.throughput:.4g} inferences/s), "
                  f"latency {si(best.latency or 0.0, 's')}")  # fmt: skip
    console.print(stages_table("deployment", best.path, best.cut_indices,
                               _bottleneck(best.bottleneck), layers=best.layers,
                               sends=best.sends, cuts=best.cuts))  # fmt: skip


@app.command("latency")
@friendly_errors
def latency_command(
    network: NetworkArg,
    profile: ProfileArg,
    interval: Annotated[
        float | None,
        typer.Option("--interval", help="Only deployments whose every stage meets this (s)."),
    ] = None,
    throughput: Annotated[
        float | None,
        typer.Option("--throughput", help="Only deployments that reach this inferences/s."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Least-latency deployment as the network is.

    Where each block runs so that one inference takes the least time, buying nothing;
    optionally among the deployments that meet an interval or a throughput.
    """
    from inferplan.codesign.provision import latency_optimal
    from inferplan.network.io import load_network
    from inferplan.profiles.io import load_profile

    net, prof = load_network(network), load_profile(profile)
    with blame_network_file(network), native_stdout_muted():
        best = latency_optimal(net, prof, interval=interval, throughput=throughput)
    if as_json:
        print_json(best.to_dict())
        return
    console.print(f"latency {si(best.latency or 0.0, 's')}, interval {si(best.interval, 's')} "
                  f"({best.throughput:.4g} inferences/s)")  # fmt: skip
    console.print(stages_table("deployment", best.path, best.cut_indices,
                               _bottleneck(best.bottleneck), layers=best.layers,
                               sends=best.sends, cuts=best.cuts))  # fmt: skip


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
        written(output)
