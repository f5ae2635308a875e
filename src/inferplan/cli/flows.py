"""``--pipelines any`` of ``inferplan throughput`` and ``provision``: flow plans, many
pipelines at once (:mod:`inferplan.codesign.pipelines`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from inferplan.cli.options import blame_network_file, native_stdout_muted, node_time_model
from inferplan.cli.render import console, print_json, table, working, written
from inferplan.errors import InvalidArgument
from inferplan.units import si

if TYPE_CHECKING:
    from inferplan.codesign.pipelines.result import FlowPlan
    from inferplan.network.network import Network
    from inferplan.profiles.profile import Profile

__all__ = [
    "Pipelines",
    "PipelinesOpt",
    "flow_provision_command",
    "flow_run_command",
    "flow_throughput_command",
    "refuse",
    "refuse_in_frontier",
    "refuse_in_run",
    "refuse_one_path",
]

Pipelines = Literal["1", "any"]
"""The values of ``--pipelines``: ``1`` (one path) or ``any`` (many pipelines at once)."""

PipelinesOpt = Annotated[
    Pipelines,
    typer.Option(
        "--pipelines",
        help="1 (the default): one path. any: a flow plan, many pipelines at once, each node "
        "holding at most one block range, the rate split over paths (exact, by a MILP).",
    ),
]


def _refuse_given(given: Mapping[str, object], why: str) -> None:
    """One line naming the first option of ``given`` that was given, and ``why`` not."""
    for flag, value in given.items():
        if value not in (None, False, ()):
            raise InvalidArgument(why, field=flag)


def refuse(given: Mapping[str, object]) -> None:
    """One line naming the first option given that flow plans do not take."""
    _refuse_given(given, "not with --pipelines any (flow plans take --throughput or "
                         "--interval, --time-limit, --node-times, --json, --dot and --report)")


def refuse_in_frontier(given: Mapping[str, object]) -> None:
    """One line naming the first option given that a flow frontier does not take."""
    _refuse_given(given, "not with --pipelines any (a flow frontier sweeps the target "
                         "throughput, --from to --to, cut between blocks; no latency bound "
                         "holds for flow plans)")


def refuse_in_run(given: Mapping[str, object]) -> None:
    """One line naming the first option given that a flow run does not take."""
    _refuse_given(given, "not with --pipelines any (a flow run plans its flow from "
                         "--throughput or --interval, or the largest flow without either, "
                         "and runs it closed loop here or on --testbed)")


def refuse_one_path(given: Mapping[str, object]) -> None:
    """One line naming the first option given that only flow plans take."""
    _refuse_given(given, "only with --pipelines any")


def flow_throughput_command(
    network: Path, profile: Profile, as_json: bool, time_limit: float | None, dot: Path | None,
    report: Path | None = None, node_times: Path | None = None,
) -> None:
    """The largest flow on the network as it is (``node_times``: a node times file)."""
    from inferplan.codesign.instance import compile_instance
    from inferplan.codesign.pipelines.flow import flow_throughput
    from inferplan.network.io import load_network

    with blame_network_file(network):
        net = load_network(network)
        node_time, _ = node_time_model(node_times, net, profile, None)
        inst = compile_instance(net, profile, require_acyclic=False, cuts="chain",
                                node_time=node_time)  # fmt: skip
        with native_stdout_muted(), working(f"the largest flow of {profile.name}"):
            plan = flow_throughput(inst, time_limit=time_limit)
    _show(plan, as_json, dot, report, net, profile.name)


def flow_provision_command(
    network: Path,
    profile: Profile,
    rate: float,
    as_json: bool,
    time_limit: float | None,
    dot: Path | None,
    report: Path | None = None,
    node_times: Path | None = None,
) -> None:
    """The cheapest upgrades for a flow of ``rate`` (``node_times``: a node times file)."""
    from inferplan.codesign.instance import compile_instance
    from inferplan.codesign.pipelines.flow import flow_provision
    from inferplan.network.io import load_network

    with blame_network_file(network):
        net = load_network(network)
        node_time, _ = node_time_model(node_times, net, profile, None)
        inst = compile_instance(net, profile, require_acyclic=False, cuts="chain",
                                node_time=node_time)  # fmt: skip
        with native_stdout_muted(), working(f"a flow plan of {rate:g} inferences/s"):
            plan = flow_provision(inst, rate, time_limit=time_limit)
    _show(plan, as_json, dot, report, net, profile.name)


def _show(plan: FlowPlan, as_json: bool, dot: Path | None, report: Path | None = None,
          network: Network | None = None, name: str = "") -> None:  # fmt: skip
    if report is not None and network is not None:
        from inferplan.plots.flow_report import write_flow_report

        written(write_flow_report(report, network, plan, title=f"{name}: {plan.method} plan"))
    if dot is not None:
        dot.write_text(flow_dot(plan))
        written(dot)
    if as_json:
        print_json(plan.to_dict())
        return
    head = f"flow {plan.throughput:.6g} inferences/s (interval {si(plan.interval, 's')})"
    if plan.method == "flow-provision":
        head += f", cost {plan.cost:.6g}"
    console.print(f"{head}, {plan.status} (gap {plan.gap:.2g}), {len(plan.pipelines)} pipelines")
    console.print(table("layout", ["node", "blocks"],
                        [[v, f"{a + 1}..{b}"] for v, (a, b) in plan.layout.items()]))  # fmt: skip
    console.print(table("pipelines", ["path", "partition", "rate (inf/s)"],
                        [[" > ".join(p.path), " ".join(map(str, p.partition)), f"{p.rate:.6g}"]
                         for p in plan.pipelines]))  # fmt: skip
    unit = {"node": "FLOP/s", "link": "bit/s"}
    console.print(table("loads", ["element", "load", "capacity", "headroom", "added", ""],
                        [[x.id, si(x.load, unit[x.kind]), si(x.capacity, unit[x.kind]),
                          si(x.headroom, unit[x.kind]), si(x.added, unit[x.kind]),
                          "bottleneck" if x.id in plan.bottleneck else ""]
                         for x in plan.loads]))  # fmt: skip


def _mode(mode: str, dilation: float) -> str:
    """How a flow run ran, in words."""
    if mode == "testbed":
        return f"on the testbed, time dilated {dilation:.3g}x (its times and rates the run's own)"
    return "emulated capacities" if mode == "emulate" else "this machine's speed"


def flow_dot(plan: FlowPlan) -> str:
    """The plan as GraphViz DOT: each node with its blocks, each link with its flow, widths by
    rate, the bottleneck in red."""
    rate: dict[tuple[str, str], float] = {}
    for p in plan.pipelines:
        for u, v in zip(p.path, p.path[1:], strict=False):
            rate[u, v] = rate.get((u, v), 0.0) + p.rate
    nodes = {v for p in plan.pipelines for v in p.path}
    lines = ["digraph flow {", "  rankdir=LR;"]
    for v in sorted(nodes):
        blocks = plan.layout.get(v)
        label = f"{v}\\nblocks {blocks[0] + 1}..{blocks[1]}" if blocks else v
        colour = ', color="red"' if v in plan.bottleneck else ""
        lines.append(f'  "{v}" [label="{label}"{colour}];')
    for (u, v), r in sorted(rate.items()):
        width = 1.0 + 5.0 * r / plan.throughput
        colour = ', color="red"' if f"{u}->{v}" in plan.bottleneck else ""
        lines.append(f'  "{u}" -> "{v}" [label="{r:.4g}/s", penwidth={width:.2f}{colour}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def flow_run_command(
    network: Path, model: str, shapes: list[str], blocks: str | None, granularity: str | None,
    dtype: str, rate: float | None, interval: float | None, inferences: int | None,
    warmup: int, inputs: Path | None, outputs: Path | None, emulate: bool | None, seed: int,
    timeout: float, as_json: bool, dot: Path | None, report_path: Path | None = None, *,
    testbed: bool = False, dilation: float | None = None,
) -> None:  # fmt: skip
    """``inferplan run --pipelines any``: plan a flow (the cheapest for the target, or the
    largest without one), run it on this machine (``testbed``: on the kernel-shaped testbed,
    its time dilated at least ``dilation`` times) and print what it measured."""
    import sys

    import typer

    from inferplan.codesign.provision import target_interval
    from inferplan.errors import InvalidProfile
    from inferplan.network.io import load_network
    from inferplan.profiles.cuts import parse_block_spec, parse_granularity, parse_shape
    from inferplan.runtime.checks import under_launcher

    if under_launcher():
        raise InvalidArgument("a flow run starts its ranks itself: run it without torchrun",
                              field="pipelines")  # fmt: skip
    target = None
    if rate is not None or interval is not None:
        target = 1.0 / target_interval(interval=interval, throughput=rate)
    if not shapes:
        raise InvalidProfile("give the shape of each input (--input-shape)", field="input-shape")
    parsed = [parse_shape(s) for s in shapes]
    net = load_network(network)
    try:
        from inferplan.runtime.flows import run_flow
        from inferplan.runtime.pipeline import RunRequest, StageFailed
    except ImportError:
        raise InvalidProfile("running a plan needs torch (pip install 'inferplan[torch]')"
                             ) from None  # fmt: skip
    request = RunRequest(network=net, model=model, input_shapes=tuple(s for s, _ in parsed),
                         input_dtypes=tuple(d for _, d in parsed),
                         blocks=parse_block_spec(blocks),
                         granularity=parse_granularity(granularity), dtype=dtype,
                         inferences=inferences, warmup=warmup,
                         inputs=str(inputs) if inputs is not None else None,
                         outputs=str(outputs) if outputs is not None else None,
                         emulate=emulate, seed=seed, timeout_s=timeout, testbed=testbed,
                         dilation=dilation)  # fmt: skip
    try:
        report = run_flow(request, rate=target)
    except StageFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    if dot is not None:
        dot.write_text(flow_dot(report.plan))
        written(dot)
    if report_path is not None:
        from inferplan.plots.flow_report import FlowMeasured, write_flow_report

        verdict = "match" if report.outputs_match else "DIFFER from"
        mode = _mode(report.mode, report.dilation)
        k = report.dilation  # the plan's time, as the report's predictions are
        measured = FlowMeasured(report.measured_throughput * k,
                                tuple(m * k for m in report.pipeline_measured),
                                f"{report.inferences} inferences ({report.warmup} warm-up), "
                                f"{mode}; outputs {verdict} the unsplit model's")  # fmt: skip
        written(write_flow_report(report_path, net, report.plan, measured=measured,
                                  title=f"{model.rpartition(':')[2]}: flow plan, run"))  # fmt: skip
    if as_json:
        print_json(report.to_dict())
    else:
        plan = report.plan
        console.print(f"{report.inferences} inferences ({report.warmup} warm-up), "
                      f"{_mode(report.mode, report.dilation)}")  # fmt: skip
        console.print(table("pipelines", ["path", "partition", "dispatched", "predicted (inf/s)",
                                          "measured (inf/s)"],
                            [[" > ".join(p.path), " ".join(map(str, p.partition)), str(d),
                              f"{p.rate / report.dilation:.4g}", f"{m:.4g}"]
                             for p, m, d in zip(plan.pipelines, report.pipeline_measured,
                                                report.dispatched, strict=True)]))  # fmt: skip
        console.print(table("nodes", ["node", "blocks", "planned", "measured", "real work"],
                            [[n["id"], f"{n['blocks'][0] + 1}..{n['blocks'][1]}",
                              si(n["planned_s"], "s"), si(n["measured_s"], "s"),
                              si(n["real_s"], "s")] for n in report.nodes]))  # fmt: skip
        gap = report.measured_throughput / report.predicted_throughput - 1
        console.print(f"throughput: predicted {report.predicted_throughput:.4g} inferences/s, "
                      f"measured {report.measured_throughput:.4g} ({gap:+.1%})")  # fmt: skip
        verdict = "match" if report.outputs_match else "[bold red]DIFFER[/]"
        console.print(f"outputs {verdict} the unsplit model's (max abs diff "
                      f"{report.max_abs_diff:.3g})")  # fmt: skip
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
