"""``inferplan run``: carry out a co-design plan on a PyTorch model and measure it."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.flows import PipelinesOpt
from inferplan.cli.options import (
    BlocksOpt,
    CutsOpt,
    DtypeOpt,
    GranularityOpt,
    JsonOpt,
    MaxIdealsOpt,
    MethodChoice,
    NetworkArg,
    RunShapesOpt,
    blame_network_file,
    method_help,
)
from inferplan.cli.render import console, plan_lines, plan_upgrades, print_json, table, written
from inferplan.errors import InferplanError, InvalidArgument, InvalidProfile
from inferplan.units import link_name, listed, si

if TYPE_CHECKING:
    from inferplan.network.network import Network
    from inferplan.runtime.pipeline import RunReport


def _request(
    network: Path, model: str, shapes: list[str], blocks: str | None,
    granularity: str | None, dtype: str,
    rate: float | None, interval: float | None, plan: Path | None, method: str,
    cuts: str | None, max_ideals: int | None, inferences: int | None, warmup: int,
    inputs: Path | None, outputs: Path | None, emulate: bool | None, seed: int,
    timeout: float, testbed: bool, dilation: float | None, open_loop: bool,
) -> dict[str, Any]:  # fmt: skip
    """The fields of the run's request, checked as far as they can be without torch."""
    from inferplan.codesign.planfile import load_plan
    from inferplan.codesign.provision import target_interval
    from inferplan.network import load_network
    from inferplan.profiles.cuts import parse_block_spec, parse_granularity, parse_shape
    from inferplan.runtime.checks import check_run

    given = [name for name, value in (("--throughput", rate), ("--interval", interval),
             ("--plan", plan)) if value is not None]  # fmt: skip
    if len(given) != 1:
        raise InvalidArgument("give exactly one of --throughput, --interval or --plan")
    if plan is not None and (cuts is not None or max_ideals is not None):
        flag = "--cuts" if cuts is not None else "--max-ideals"
        raise InvalidArgument(f"{flag} is for planning: a plan file says where it cuts",
                              field="plan")  # fmt: skip
    if not shapes:
        raise InvalidProfile("give the shape of each input (--input-shape)", field="input-shape")
    parsed = [parse_shape(s) for s in shapes]
    fields: dict[str, Any] = {
        "network": load_network(network),
        "model": model,
        "input_shapes": tuple(s for s, _ in parsed),
        "input_dtypes": tuple(d for _, d in parsed),
        "blocks": parse_block_spec(blocks),
        "granularity": parse_granularity(granularity),
        "dtype": dtype,
        "plan": load_plan(plan) if plan is not None else None,
        "plan_source": str(plan) if plan is not None else None,
        "interval": None if plan is not None else target_interval(interval=interval,
                                                                  throughput=rate),
        "method": method,
        "cuts": cuts,
        "max_ideals": max_ideals,
        "inferences": inferences,
        "warmup": warmup,
        "inputs": str(inputs) if inputs is not None else None,
        "outputs": str(outputs) if outputs is not None else None,
        "emulate": emulate,
        "seed": seed,
        "timeout_s": timeout,
        "testbed": testbed,
        "dilation": dilation,
        "open_loop": open_loop,
    }  # fmt: skip
    check_run(**{k: fields[k] for k in ("network", "model", "plan", "plan_source", "inferences",
                                        "warmup", "inputs", "outputs", "timeout_s", "emulate",
                                        "testbed", "dilation", "interval",
                                        "open_loop")})  # fmt: skip
    return fields


def remove_killed_runs() -> list[str]:
    """Remove what testbed runs killed outright left (their namespace and cgroups, found by
    the owner's PID in their names), saying so in one line on stderr; return their names."""
    from inferplan.runtime.testbed.linux import cleanup

    try:
        removed = cleanup()
    except (OSError, InferplanError):  # not this machine's to clean: the testbed says why
        return []
    if removed:
        typer.echo(f"note: removed what killed testbed runs left ({', '.join(removed)}): their "
                   "launchers' processes are gone", err=True)  # fmt: skip
    return removed


@app.command("run")
@friendly_errors
def run_command(
    network: NetworkArg,
    model: Annotated[str, typer.Argument(help=(
        "The PyTorch model as module.path:factory (or file.py:factory), as for profile."))],
    input_shape: RunShapesOpt = None,
    blocks: BlocksOpt = None,
    granularity: GranularityOpt = None,
    dtype: DtypeOpt = "float32",
    rate: Annotated[float | None, typer.Option(
        "--throughput", help="Plan for this many inferences/s.")] = None,
    interval: Annotated[float | None, typer.Option(
        "--interval", help="Plan for this output interval (s).")] = None,
    plan: Annotated[Path | None, typer.Option(
        "--plan", help="Run this plan (what provision --json wrote for this model).")] = None,
    method: Annotated[MethodChoice, typer.Option("--method", help=method_help())] = "psg",
    cuts: CutsOpt = None,
    max_ideals: MaxIdealsOpt = None,
    inferences: Annotated[int | None, typer.Option(
        "--inferences", help="K inputs to stream (default: those in --inputs, else 40).",
        min=1)] = None,
    warmup: Annotated[int, typer.Option(
        "--warmup", help="Inferences before the steady state is measured.", min=0)] = 5,
    inputs: Annotated[Path | None, typer.Option(
        "--inputs", help="A .pt file: one tensor whose first dimension indexes the inputs.")
    ] = None,
    outputs: Annotated[Path | None, typer.Option(
        "--outputs", help="Save the K outputs, stacked in input order, to this .pt file.")
    ] = None,
    emulate: Annotated[bool | None, typer.Option(
        "--emulate/--no-emulate", help="Pace stages to the plan's capacities (default: when "
        "every stage runs on one machine).", show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of weights and random inputs.",
                                      min=0)] = 0,
    timeout: Annotated[float, typer.Option(
        "--timeout", help="Seconds a stage may wait for a peer before the run is stopped.")
    ] = 60.0,
    testbed: Annotated[bool, typer.Option(
        "--testbed", help="Run on a testbed the kernel shapes: own network namespace, links "
        "shaped by tc, each stage held to its capacity by a CPU quota (needs root; see "
        "docs/testbed.md).")] = False,
    dilation: Annotated[float | None, typer.Option(
        "--dilation", help="With --testbed: stretch the run's time at least this many times "
        "(default: as little as the cores allow).")] = None,
    open_loop: Annotated[bool, typer.Option(
        "--rate", help="Feed inputs open-loop at the plan's throughput, as a camera would, "
        "instead of keeping the pipeline full (whose inferences queue): the measured latency "
        "is then comparable with the plan's.")] = False,
    as_json: JsonOpt = False,
    html_report: Annotated[Path | None, typer.Option(
        "--report", help="Also write the plan report with the measured times beside the "
                         "predicted ones: one self-contained HTML page.")] = None,
    dot: Annotated[Path | None, typer.Option(
        "--dot", help="Also write the plan as GraphViz DOT.")] = None,
    workload: Annotated[Path | None, typer.Option(
        "--workload", help="Serve a decoder LM (MODEL transformers:CONFIG_CLASS) by its "
        "serving plan for this workload file (docs/runtime.md).")] = None,
    requests: Annotated[int | None, typer.Option(
        "--requests", help="With --workload: K requests to serve.")] = None,
    config: Annotated[list[str] | None, typer.Option(
        "--config", metavar="<key=value>",
        help="With --workload: key=value override of the transformers config.")
    ] = None,
    batches: Annotated[list[int] | None, typer.Option(
        "--batch", metavar="<batch>",
        help="With --workload: a decode batch the plan may take (repeatable).")
    ] = None,
    pipelines: PipelinesOpt = "1",
) -> None:  # fmt: skip
    """Run a plan on a PyTorch model and measure it.

    One process per path node, talking through torch.distributed.
    """
    if workload is not None or requests is not None or config or batches:
        from inferplan.cli.serving_run import serve_run

        given = {"--input-shape": input_shape, "--blocks": blocks, "--throughput": rate,
                 "--interval": interval, "--plan": plan, "--inferences": inferences,
                 "--inputs": inputs, "--outputs": outputs,
                 "--rate": open_loop or None, "--report": html_report, "--dot": dot,
                 "--cuts": cuts}  # fmt: skip
        if workload is None:
            raise InvalidArgument("--requests, --config and --batch serve a --workload: give "
                                  "one", field="workload")  # fmt: skip
        if pipelines == "any":
            raise InvalidArgument("not with --workload: a serving run runs one pipeline; "
                                  "many-pipeline serving plans (serve --pipelines any) are "
                                  "not run (docs/serving.md)", field="--pipelines")  # fmt: skip
        serve_run(network, model, workload, requests, config, batches, bool(emulate), seed,
                  timeout, as_json, [k for k, v in given.items() if v], testbed=testbed,
                  dilation=dilation)  # fmt: skip
        return
    if pipelines == "any":
        from inferplan.cli.flows import flow_run_command, refuse_in_run

        refuse_in_run({"--plan": plan, "--rate": open_loop or None, "--cuts": cuts,
                       "--max-ideals": max_ideals,
                       "--method": method if method != "psg" else None})  # fmt: skip
        if testbed:
            remove_killed_runs()
        with blame_network_file(network):
            flow_run_command(network, model, input_shape or [], blocks, granularity, dtype, rate,
                             interval, inferences, warmup, inputs, outputs, emulate, seed,
                             timeout, as_json, dot, html_report, testbed=testbed,
                             dilation=dilation)  # fmt: skip
        return
    from inferplan.runtime.checks import under_launcher

    staged = under_launcher()
    rank = int(os.environ.get("RANK", "0")) if staged else 0
    fields = None
    if rank == 0:  # every check that needs no torch comes before torch is imported
        with blame_network_file(network):
            fields = _request(network, model, input_shape or [], blocks, granularity, dtype,
                              rate, interval,
                              plan, method, cuts, max_ideals, inferences, warmup, inputs,
                              outputs, emulate, seed, timeout, testbed, dilation,
                              open_loop)  # fmt: skip
    try:
        from inferplan.runtime.pipeline import (
            RunRequest,
            StageCancelled,
            StageFailed,
            run_plan,
            run_stage,
        )
    except ImportError:
        raise InvalidProfile("running a plan needs torch (pip install 'inferplan[torch]')"
                             ) from None  # fmt: skip
    request = None if fields is None else RunRequest(**fields)
    if testbed and rank == 0:
        remove_killed_runs()
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    # A bar only on a terminal: elsewhere its transient line would leave a blank line before
    # an error (stderr is read by programs and logs).
    err = Console(stderr=True)
    bar = Progress(TextColumn("running"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err, transient=True, disable=not err.is_terminal)  # fmt: skip
    task = bar.add_task("inferences", total=None)
    try:
        with bar if rank == 0 else contextlib.nullcontext():

            def tick(done: int) -> None:
                bar.update(task, completed=done)

            if staged:
                report = run_stage(request, progress=tick, timeout_s=timeout)
            else:
                assert request is not None
                bar.update(task, total=request.inferences)
                report = run_plan(request, progress=tick)
    except StageCancelled:
        raise typer.Exit(2) from None
    except StageFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        print("error: interrupted: every stage was stopped", file=sys.stderr)
        raise typer.Exit(130) from None
    if report is None:
        return
    if (html_report is not None or dot is not None) and request is not None:
        _write_report(request.network, report, html_report, dot)
    if as_json:
        print_json(report.to_dict())
    else:
        _render(report)
    for warning in report.warnings:  # on stderr, with --json too
        print(f"warning: {warning}", file=sys.stderr)


def _write_report(network: Network, report: RunReport, html: Path | None, dot: Path | None
                  ) -> None:  # fmt: skip
    """The plan report of a run: the plan, with what the run measured beside it."""
    from inferplan.codesign.breakdown import plan_breakdown
    from inferplan.plots.report import Measured, write_plan_report

    assert report.profile is not None  # a run's report carries its profile
    mode = "emulated capacities" if report.emulated else "this machine's speed"
    verdict = "match" if report.outputs_match else "DIFFER from"
    fed = report.feed_interval_s
    feed = "the pipeline kept full" if fed is None else f"inputs fed every {si(fed, 's')}"
    measured = Measured(
        interval=report.measured_interval,
        stages={s.id: s.measured_s for s in report.stages},
        latency_median=report.latency_median_s,
        latency_p95=report.latency_p95_s,
        latency_predicted=report.predicted_latency_s,
        queueing=None if report.queueing is None else report.queueing.says(),
        note=f"{report.inferences} inferences ({report.warmup} warm-up), {mode}, {feed}; "
             f"outputs {verdict} the unsplit model's",
    )  # fmt: skip
    parts = plan_breakdown(network, report.profile, report.plan)
    title = f"{report.profile.name}: {report.plan.method} plan, run"
    for path in write_plan_report(network, parts, html_path=html, dot_path=dot, title=title,
                                  measured=measured):  # fmt: skip
        written(path)


def _render(report: RunReport) -> None:
    profiled = any(s.profiled_s is not None for s in report.stages)
    rows = []
    graph = report.plan.cuts == "graph"
    sends = iter(report.plan.sends)
    for s in report.stages:
        runs = ""
        if s.blocks is not None:
            first, last = s.blocks
            runs = f"{first + 1}..{last}" if last > first else "-"
        if s.layers is not None:
            runs = listed(s.layers) or "-"
        if graph and s.kind == "link":
            runs = f"sends {listed(next(sends, ()))}"
        name = link_name(s.id) if s.kind == "link" else s.id
        row = [f"{s.kind} {name}", runs, si(s.predicted_s, "s"), si(s.measured_s, "s")]
        if profiled:
            row.append("" if s.profiled_s is None else si(s.profiled_s, "s"))
        rows.append(row)
    columns = ["stage", "layers" if graph else "blocks", "planned", "measured"] + (
        ["profiled"] if profiled else []
    )
    mode = {
        "emulate": "emulated capacities",
        "native": "this machine's speed",
        "testbed": f"on the testbed, time dilated {report.dilation:.3g}x",
    }[report.mode]
    console.print(f"{report.inferences} inferences ({report.warmup} warm-up), {mode}")
    for line in plan_lines(report.plan):  # the plan that ran
        console.print(f"plan: {line}" if line.startswith("[bold]") else f"      {line}")
    upgrades = [f"{link_name(k) if '->' in k else k} +{v}"
                for k, v in plan_upgrades(report.plan).items()]  # fmt: skip
    console.print(f"      upgrades: {', '.join(upgrades) or 'none'}")
    console.print(table("time per inference", columns, rows))
    held = [(s.id, s.memory) for s in report.stages if s.memory is not None]
    console.print(table("memory per node", ["node", "plan needs", "state dict", "peak RSS"], [
        [node, "" if m.planned_need_bytes is None else si(m.planned_need_bytes, "B"),
         si(m.state_dict_bytes, "B"), si(m.peak_rss_bytes, "B")] for node, m in held]))  # fmt: skip
    fed, measured = report.feed_interval_s, report.measured_interval
    if fed is None:
        gap = measured / report.predicted_interval - 1
        console.print(f"interval: predicted {si(report.predicted_interval, 's')}, measured "
                      f"{si(measured, 's')} ({gap:+.1%}); {1 / measured:.4g} inferences/s; "
                      "the pipeline kept full")  # fmt: skip
    else:  # open loop: the outputs come as the inputs were fed
        console.print(f"interval: inputs fed every {si(fed, 's')}, outputs every "
                      f"{si(measured, 's')} ({measured / fed - 1:+.1%}); the slowest stage "
                      f"planned at {si(report.predicted_interval, 's')}")  # fmt: skip
    predicted = report.predicted_latency_s
    late = f" ({report.latency_median_s / predicted - 1:+.1%})" if predicted > 0 else ""
    console.print(f"latency: predicted {si(predicted, 's')}, measured median "
                  f"{si(report.latency_median_s, 's')}{late}, "
                  f"p95 {si(report.latency_p95_s, 's')}")  # fmt: skip
    if report.queueing is not None:
        console.print(report.queueing.says())
    verdict = "match" if report.outputs_match else "[bold red]DIFFER[/]"
    console.print(f"outputs {verdict} the unsplit model's (max abs diff "
                  f"{report.max_abs_diff:.3g})")  # fmt: skip


@app.command("testbed")
@friendly_errors
def testbed_command(
    cleanup: Annotated[bool, typer.Option(
        "--cleanup", help="Remove the namespaces and cgroups that killed testbed runs left.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Check this machine for `run --testbed`.

    With --cleanup, remove the namespaces and cgroups that killed runs left.

    Every capability a plan may need is listed, each with what needs it; exit 2 with one line
    naming what every run needs and is missing (root, network namespaces, a CPU controller).
    A machine without the netem qdisc is ready for plans without link delays only, and says so.
    """
    from inferplan.runtime.testbed.linux import capabilities, require
    from inferplan.runtime.testbed.linux import cleanup as remove_leftovers

    require()
    found = capabilities()
    removed = remove_leftovers() if cleanup else []
    short = [c for c in found if not c.has]  # only the optional ones: require() passed
    status = "ready" if not short else "ready for plans without link delays"
    if as_json:
        print_json({"status": status, "removed": removed,
                    "capabilities": [{"name": c.name, "has": c.has, "needs": c.needs}
                                     for c in found]})  # fmt: skip
        return
    for name in removed:
        console.print(f"removed {name}")
    for c in found:
        console.print(f"{'has' if c.has else 'lacks'} {c.name} ({c.needs}"
                      + ("" if c.has else f": {c.lacking}") + ")")  # fmt: skip
    console.print(f"testbed: {status}" if not cleanup else
                  f"testbed: {status}, {len(removed)} removed")  # fmt: skip
