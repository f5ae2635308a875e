"""``inferplan serve``: an LLM service's plan (docs/serving.md): the path and its layers, the
decode batch and the GPUs, with the predicted TTFT, TPOT, requests/s and $/h."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.options import JsonOpt, NetworkArg
from inferplan.cli.render import console, print_json, table, working
from inferplan.units import si

if TYPE_CHECKING:
    from inferplan.codesign.serving.decoder import Decoder
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
    net, decoder, work = load_service(network, model, config, workload)
    gpus = None if catalog is None else load_catalog(catalog)
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
