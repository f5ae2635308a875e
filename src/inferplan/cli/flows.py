"""``--pipelines any`` of ``inferplan throughput`` and ``provision``: flow plans, many
pipelines at once (:mod:`inferplan.codesign.pipelines`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from inferplan.cli.options import blame_network_file
from inferplan.cli.render import console, print_json, table, written
from inferplan.errors import InvalidArgument
from inferplan.units import si

if TYPE_CHECKING:
    from inferplan.codesign.pipelines.result import FlowPlan
    from inferplan.profiles.profile import Profile

__all__ = [
    "PipelinesOpt",
    "flow_provision_command",
    "flow_throughput_command",
    "refuse",
    "refuse_one_path",
]

PipelinesOpt = Annotated[
    Literal["1", "any"],
    typer.Option(
        "--pipelines",
        help="1 (the default): one path. any: a flow plan, many pipelines at once, each node "
        "holding at most one block range, the rate split over paths (exact, by a MILP).",
    ),
]


def refuse(given: Mapping[str, object]) -> None:
    """One line naming the first option given that flow plans do not take."""
    for flag, value in given.items():
        if value not in (None, False, ()):
            raise InvalidArgument("not with --pipelines any (flow plans take --throughput or "
                                  "--interval, --time-limit, --json and --dot)",
                                  field=flag)  # fmt: skip


def refuse_one_path(given: Mapping[str, object]) -> None:
    """One line naming the first option given that only flow plans take."""
    for flag, value in given.items():
        if value is not None:
            raise InvalidArgument("only with --pipelines any", field=flag)


def flow_throughput_command(
    network: Path, profile: Profile, as_json: bool, time_limit: float | None, dot: Path | None
) -> None:
    """The largest flow on the network as it is."""
    from inferplan.codesign.instance import compile_instance
    from inferplan.codesign.pipelines.flow import flow_throughput
    from inferplan.network.io import load_network

    with blame_network_file(network):
        inst = compile_instance(load_network(network), profile, require_acyclic=False,
                                cuts="chain")  # fmt: skip
        plan = flow_throughput(inst, time_limit=time_limit)
    _show(plan, as_json, dot)


def flow_provision_command(
    network: Path,
    profile: Profile,
    rate: float,
    as_json: bool,
    time_limit: float | None,
    dot: Path | None,
) -> None:
    """The cheapest upgrades for a flow of ``rate``."""
    from inferplan.codesign.instance import compile_instance
    from inferplan.codesign.pipelines.flow import flow_provision
    from inferplan.network.io import load_network

    with blame_network_file(network):
        inst = compile_instance(load_network(network), profile, require_acyclic=False,
                                cuts="chain")  # fmt: skip
        plan = flow_provision(inst, rate, time_limit=time_limit)
    _show(plan, as_json, dot)


def _show(plan: FlowPlan, as_json: bool, dot: Path | None) -> None:
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
