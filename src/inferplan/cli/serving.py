"""``inferplan serve``: an LLM service's plan (docs/serving.md): the path and its layers, the
decode batch and the GPUs, with the predicted TTFT, TPOT, requests/s and $/h."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.flows import Pipelines, refuse_one_path
from inferplan.cli.options import JsonOpt, NetworkArg
from inferplan.cli.render import console, print_json, table, working
from inferplan.units import si

if TYPE_CHECKING:
    from inferplan.codesign.serving.decoder import Decoder
    from inferplan.codesign.serving.planner import ReplicaPlan
    from inferplan.codesign.serving.workload import Workload
    from inferplan.network.network import Network


def load_service(network: Path, model: str, config: list[str] | None, workload: Path
                 ) -> tuple[Network, Decoder, Workload]:  # fmt: skip
    """The network, the decoder and its workload, the workload's classes checked against the
    decoder's context (an error located in the workload file)."""
    from inferplan.codesign.serving.files import load_decoder, load_workload
    from inferplan.errors import InvalidArgument
    from inferplan.network.io import load_network

    net, decoder = load_network(network), load_decoder(model, config)
    work = load_workload(workload)
    try:
        work.check_context(decoder.max_context)
    except InvalidArgument as exc:
        raise exc.located(str(workload)) from None
    return net, decoder, work


@app.command("serve")
@friendly_errors
def serve_command(
    network: NetworkArg,
    model: Annotated[
        str,
        typer.Argument(
            help="Decoder model: a decoder file (YAML/JSON with decoder_lm's shape and "
            "max_context) or transformers:CONFIG_CLASS (LLaMA- or GPT-2-style, with --config)."
        ),
    ],
    workload: Annotated[
        Path, typer.Option("--workload", help="Workload file: rate, request classes, bounds.")
    ],
    catalog: Annotated[
        Path | None,
        typer.Option("--catalog", help="GPU catalog file (the cost objective buys from it)."),
    ] = None,
    objective: Annotated[
        Literal["cost", "goodput"],
        typer.Option(
            "--objective",
            help="cost: the least $/h serving the workload's rate within its bounds; goodput: "
            "the most requests/s within the bounds on the network's own nodes.",
        ),
    ] = "cost",
    batches: Annotated[
        list[int] | None,
        typer.Option(
            "--batch",
            metavar="<batch>",
            help="A decode batch to try (repeatable); powers of 2 up to 256 if none.",
        ),
    ] = None,
    config: Annotated[
        list[str] | None,
        typer.Option(
            "--config",
            metavar="<key=value>",
            help="key=value override of a transformers config field.",
        ),
    ] = None,
    pipelines: Annotated[
        Pipelines,
        typer.Option(
            "--pipelines",
            help="1 (the default): one path. any: node-disjoint replicas, each a path with its "
            "own layers, batch and GPUs, the rate split among them (exact, by a MILP).",
        ),
    ] = "1",
    time_limit: Annotated[
        float | None,
        typer.Option(
            "--time-limit", help="--pipelines any: seconds the search may take (120 if not given)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Plan an LLM service: layout, batch, GPUs.

    The path and its layers, the decode batch and the hardware, with the predicted TTFT,
    TPOT, requests/s and $/h (docs/serving.md).
    """
    from inferplan.codesign.serving.files import load_catalog
    from inferplan.codesign.serving.planner import DEFAULT_BATCHES, plan_serving
    from inferplan.errors import InvalidArgument

    if objective == "cost" and catalog is None:
        raise InvalidArgument("the cost objective buys GPUs from a catalog: give one",
                              field="catalog")  # fmt: skip
    if objective == "goodput" and catalog is not None:
        raise InvalidArgument("goodput plans on the network's own nodes: no catalog",
                              field="catalog")  # fmt: skip
    if pipelines == "1":
        refuse_one_path({"--time-limit": time_limit})
    net, decoder, work = load_service(network, model, config, workload)
    gpus = None if catalog is None else load_catalog(catalog)
    if pipelines == "any":
        with working(f"planning replicas for {work.requests_per_s:g} requests/s of "
                     f"{decoder.name} ({objective})"):  # fmt: skip
            many = plan_serving(net, decoder, work, catalog=gpus, objective=objective,
                                batches=tuple(batches or DEFAULT_BATCHES), pipelines="any",
                                time_limit=time_limit)  # fmt: skip
        _print_replicas(many, decoder.name, as_json)
        return
    with working(f"planning {work.requests_per_s:g} requests/s of {decoder.name} ({objective})"):
        plan = plan_serving(net, decoder, work, catalog=gpus, objective=objective,
                            batches=tuple(batches or DEFAULT_BATCHES))  # fmt: skip
    data = plan.to_dict()
    if as_json:
        print_json(data)
        return
    rows = [[s["node"], s["hardware"], f"{s['blocks'][0]}..{s['blocks'][1] - 1}",
             str(s["layers"]), si(s["weights_bytes"], "B"), si(s["kv_cache_bytes"], "B"),
             si(s["memory"], "B"), si(s["decode_step_s"], "s"), f"{s['price_per_hour']:.2f}"]
            for s in data["stages"]]  # fmt: skip
    console.print(table(
        f"{decoder.name} on {' -> '.join(plan.path)} ({plan.status}, {objective})",
        ["node", "hardware", "blocks", "layers", "weights", "KV cache", "memory", "decode step",
         "$/h"], rows))  # fmt: skip
    console.print(
        f"batch {plan.batch}: {plan.requests_per_s:.4g} requests/s "
        f"(at most {plan.max_requests_per_s:.4g}, bound by {plan.binding}), "
        f"{plan.tokens_per_s:.4g} tokens/s, TPOT {si(plan.tpot_s, 's')}, TTFT "
        f"{', '.join(si(t, 's') for t in plan.ttft_s)} (per class), ${plan.price_per_hour:.2f}/h"
    )


def _print_replicas(plan: ReplicaPlan, name: str, as_json: bool) -> None:
    """A many-pipeline plan: each replica's stages, then the replicas, then the totals."""
    data = plan.to_dict()
    if as_json:
        print_json(data)
        return
    stages = [[str(k), s["node"], s["hardware"], f"{s['blocks'][0]}..{s['blocks'][1] - 1}",
               str(s["layers"]), si(s["weights_bytes"], "B"), si(s["kv_cache_bytes"], "B"),
               si(s["memory"], "B"), f"{s['price_per_hour']:.2f}"]
              for k, r in enumerate(data["replicas"], 1) for s in r["stages"]]  # fmt: skip
    console.print(table(
        f"{name}: {len(plan.replicas)} pipelines ({plan.status}, {plan.objective})",
        ["replica", "node", "hardware", "blocks", "layers", "weights", "KV cache", "memory",
         "$/h"], stages))  # fmt: skip
    rows = [[str(k), " -> ".join(r.path), str(r.batch),
             f"{r.requests_per_s:.4g} (at most {r.max_requests_per_s:.4g}, {r.binding})",
             si(r.tpot_s, "s"), ", ".join(si(t, "s") for t in r.ttft_s),
             f"{r.price_per_hour:.2f}"]
            for k, r in enumerate(plan.replicas, 1)]  # fmt: skip
    console.print(table("replicas", ["replica", "path", "batch", "requests/s", "TPOT",
                                     "TTFT (per class)", "$/h"], rows))  # fmt: skip
    gap = "" if plan.gap is None else f", gap {plan.gap:.2g}"
    console.print(
        f"{plan.requests_per_s:.4g} requests/s, {plan.tokens_per_s:.4g} tokens/s, "
        f"${plan.price_per_hour:.2f}/h ({plan.status}{gap}; {plan.paths_searched} of "
        f"{plan.paths} paths searched one by one)"
    )
