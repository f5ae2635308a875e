"""``inferplan coinfer``, ``coinfer-simulate`` and ``coinfer-fit``: the device-edge
co-inference planner, and Markov channels fitted to SNR traces."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.options import JsonOpt
from inferplan.cli.render import console, print_json, table, written
from inferplan.coinference.strategies import FIXED_PREFIX, STRATEGIES, planner_names
from inferplan.units import etc, etc_unit, si

if TYPE_CHECKING:
    from inferplan.arrays import FloatArray
    from inferplan.coinference.channels import Channel

SystemArg = Annotated[Path, typer.Argument(help="System file (YAML or JSON).")]

# --method takes the registry's planners (typer reads the Literal).
if TYPE_CHECKING:
    PlannerChoice = str
else:
    PlannerChoice = Literal[planner_names()]


def _strategies_help(names: tuple[str, ...] | list[str]) -> str:
    return "; ".join(f"{n}: {STRATEGIES[n].summary}" for n in names)


def _threshold(value: float, channel: Channel) -> str:
    """An upload threshold as an SNR, or ``never`` / ``always`` when the stage's channel
    cannot reach it / is always above it (to double precision)."""
    below = channel.below(value)
    if below >= 1.0:
        return "never"
    if below <= 0.0:
        return "always"
    return f"{value:.4g} ({10 * math.log10(value):.1f} dB)"


def _curve(snrs: FloatArray) -> str:
    """A stage's threshold curve (an SNR per phase sector) as its range."""
    import numpy as np

    finite = snrs[np.isfinite(snrs)]
    if finite.size == 0:
        return "never"
    lo, hi = float(finite.min()), float(finite.max())
    never = " or never" if finite.size < snrs.size else ""
    return f"{lo:.3g}..{hi:.3g}{never} by phase (--json)"


@app.command("coinfer")
@friendly_errors
def coinfer_command(
    system: SystemArg,
    method: Annotated[
        PlannerChoice,
        typer.Option("--method", help=f"Placement method. {_strategies_help(planner_names())}."),
    ] = "optimal",
    policy_out: Annotated[
        Path | None, typer.Option("--policy-out", help="Write the on-device policy (JSON).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Layers to place on the device, and when to split.

    Split thresholds and the expected cost of every placement.
    """
    from inferplan.coinference.io import load_system
    from inferplan.coinference.strategies import plan_placement

    sys_ = load_system(system)
    plan = plan_placement(sys_, method=method)
    if policy_out is not None:
        policy_out.write_text(plan.policy().to_json() + "\n", encoding="utf-8")
        written(policy_out)
    if as_json:
        print_json(plan.to_dict())
        return
    console.print(
        f"[bold]{plan.method}[/]: place [bold]{plan.placement}[/] of {sys_.n_layers} layers, "
        f"expected cost [bold]{etc(plan.expected_cost)}[/] per inference "
        f"({plan.stage_evaluations} stage expectations)"
    )
    c = sys_.placement_costs
    rows = []
    for m, z in enumerate(plan.costs):
        mark = "*" if m == plan.placement else ""
        expected = z - c[m] if math.isfinite(z) else math.nan
        rows.append(
            [
                f"{m}{mark}",
                f"{c[m]:.6g}",
                "-" if math.isnan(expected) else f"{expected:.6g}",
                "pruned" if math.isnan(z) else f"{z:.6g}",
            ]
        )
    console.print(table("cost per inference by placement M, in ETC units",
                        ["M", "c(M)", "E[ETC]", "Z(M)"], rows))  # fmt: skip
    console.print(etc_unit(sys_.energy_weight))
    names, channels = sys_.layers.names, sys_.channels
    split = plan.solution.split_probabilities
    curve = None
    if sys_.chain is not None and sys_.chain.phases > 1 and plan.placement > 0:
        import numpy as np

        from inferplan.coinference.markov_stopping import rician_threshold_curve

        assert plan.solution.state_thresholds is not None
        curve = rician_threshold_curve(sys_, np.asarray(plan.solution.state_thresholds))
    rows = []
    for n, p in enumerate(split, start=1):
        where = "edge-only" if n == 1 else f"after {names[n - 2]}"
        structure = plan.solution.threshold_structure
        if n > plan.placement:
            threshold = "forced"
        elif curve is not None:
            threshold = _curve(curve[n - 1])
        elif structure is not None and not structure[n - 1]:
            threshold = "by state (--json)"
        else:
            threshold = _threshold(plan.thresholds[n - 1], channels[n - 1])
        rows.append(
            [str(n), where, si(sys_.layers.input_bits[n - 1], "bit"), threshold, f"{p:.4f}"]
        )
    console.print(
        table(
            f"split stages (rule: {plan.solution.rule})",
            ["stage", "split", "upload", "upload if SNR >=", "P(split)"],
            rows,
        )
    )


@app.command("coinfer-simulate")
@friendly_errors
def coinfer_simulate_command(
    system: SystemArg,
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy",
            metavar="<name>",
            help=f"Strategy to simulate (repeatable; all by default): "
            f"{', '.join(STRATEGIES)} or {FIXED_PREFIX}K (K layers on the device, always "
            "upload after them).",
        ),
    ] = None,
    inferences: Annotated[
        int, typer.Option("--inferences", help="Inferences to simulate.")
    ] = 100_000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.", min=0)] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Monte-Carlo of many inferences under each strategy.

    Realised cost and split stages of each rule, on the same channel draws.
    """
    from inferplan.coinference.io import load_system
    from inferplan.coinference.simulate import simulate

    sys_ = load_system(system)
    result = simulate(sys_, strategy or None, inferences=inferences, seed=seed)
    if as_json:
        print_json(result.to_dict())
        return
    console.print(
        f"{result.inferences} inferences, seed {result.seed}, same SNR draws for every strategy"
    )
    rows = []
    for r in result.results:
        share = [count / result.inferences for count in r.split_counts]
        top = max(range(len(share)), key=share.__getitem__)
        rows.append(
            [
                r.strategy,
                str(r.placement),
                f"{r.analytic_cost:.6g}",
                f"{r.mean_cost:.6g}",
                f"±{(r.ci_high - r.ci_low) / 2:.3g}",
                f"{r.quantiles[5]:.6g}",
                f"{top + 1} ({share[top]:.0%})",
            ]
        )
    console.print(
        table(
            f"realised cost per inference, in ETC units ({result.confidence:.0%} CI)",
            ["strategy", "M", "expected", "mean", "CI", "p95", "top split"],
            rows,
        )
    )
    console.print(etc_unit(sys_.energy_weight))


@app.command("coinfer-fit")
@friendly_errors
def coinfer_fit_command(
    trace: Annotated[
        Path,
        typer.Argument(help="SNR trace: a CSV of linear SNRs, one per step, an optional header."),
    ],
    states: Annotated[
        int | None,
        typer.Option("--states", help="K, the number of states (equiprobable under the trace)."),
    ] = None,
    boundaries: Annotated[
        str | None,
        typer.Option(
            "--boundaries",
            metavar="<snrs>",
            help="The K - 1 SNRs between the states, separated by commas (instead of "
            "equiprobable ones).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the channel (YAML or JSON by suffix) for a system file."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit a Markov channel to an SNR trace.

    One step of the trace is one step between split stages; the channel goes in a system file
    as its `channel`.
    """
    from inferplan.coinference.io import read_trace
    from inferplan.coinference.markov import fit_markov
    from inferplan.documents import write_document
    from inferplan.errors import InferplanError, InvalidArgument

    cuts = None
    if boundaries is not None:
        try:
            cuts = [float(v) for v in boundaries.split(",") if v.strip()]
        except ValueError:
            raise InvalidArgument(
                f"must be SNRs separated by commas, got {boundaries!r}", field="boundaries"
            ) from None
    if states is None:
        if cuts is None:
            raise InvalidArgument("give the number of states (or --boundaries)", field="states")
        states = len(cuts) + 1
    samples = read_trace(trace)
    try:
        channel = fit_markov(samples, states, boundaries=cuts)
    except InferplanError as exc:
        if exc.field == "trace":
            exc.field = None
            raise exc.located(str(trace)) from None
        raise
    if out is not None:
        write_document(channel.to_dict(), out)
        written(out)
    if as_json:
        print_json(channel.to_dict())
        return
    law = channel.law
    edges = ["-inf", *(f"{b:.4g}" for b in channel.boundaries or ()), "inf"]
    rows = [
        [str(k), f"[{edges[k]}, {edges[k + 1]})", f"{snr:.4g}", f"{law[k]:.4f}",
         " ".join(f"{p:.3f}" for p in channel.transition[k])]
        for k, snr in enumerate(channel.snr)
    ]  # fmt: skip
    console.print(f"{len(samples)} samples, {states} states")
    console.print(
        table("Markov channel", ["state", "SNR range", "SNR", "P(state)", "to states 0..K-1"], rows)
    )
