"""``inferplan profile``: profile a built-in, a profile file, an ONNX file or a PyTorch module."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.options import (
    BlocksOpt,
    ConfigOpt,
    DecodeOpt,
    DtypeOpt,
    GranularityOpt,
    InputShapesOpt,
    SeqLenOpt,
)
from inferplan.cli.render import console, print_json, table, written
from inferplan.errors import InvalidArgument
from inferplan.units import si

Shape = tuple[int, ...]

if TYPE_CHECKING:
    from inferplan.profiles.cuts import GraphProfile
    from inferplan.profiles.models import ModelOptions
    from inferplan.profiles.profile import Profile


class FlopCount(StrEnum):
    matrix = "matrix"
    all = "all"


@app.command("profile")
@friendly_errors
def profile_command(
    model: Annotated[str, typer.Argument(help=(
        "A built-in name (vgg16, resnet50, alexnet, mlp-WxD), a profile file, an ONNX file "
        "(.onnx), a transformers model as transformers:CONFIG_CLASS (e.g. "
        "transformers:GPT2Config, built from the config with no weights), or a PyTorch module "
        "as module.path:factory (or file.py:factory). The last IMPORTS AND RUNS that Python "
        "code, with the current directory first on the import path (as python -c does): use "
        "it only with code you trust. No other name is imported."))],
    input_shapes: InputShapesOpt = None,
    blocks: BlocksOpt = None,
    granularity: GranularityOpt = None,
    dtype: DtypeOpt = "float32",
    flops: Annotated[FlopCount, typer.Option(
        "--flops", help="ONNX: count matrix products only, or all formulas.")] = FlopCount.matrix,
    cuts: Annotated[bool, typer.Option(
        "--cuts", help="Show every candidate cut and the tensors crossing it.")] = False,
    graph: Annotated[bool, typer.Option(
        "--graph", help="Show the layer graph: its layers, what each reads, and how many "
                        "ideals (places a planner may cut) it has.")] = False,
    max_ideals: Annotated[int | None, typer.Option(
        "--max-ideals", help="--graph: count ideals up to this many (default 100000).",
        min=2)] = None,
    measure: Annotated[bool, typer.Option(
        "--measure", help="PyTorch: time each block on this machine (real weights, warm-up, "
                          "median of repeats) and add seconds and FLOP/s per block.")] = False,
    config: ConfigOpt = None,
    seq_len: SeqLenOpt = None,
    batch: Annotated[int, typer.Option(
        "--batch", help="transformers: sequences per inference.")] = 1,
    decode: DecodeOpt = False,
    cache_len: Annotated[int | None, typer.Option(
        "--cache-len", help="transformers: tokens in the KV cache (default: --seq-len).",
    )] = None,
    attention_mask: Annotated[bool, typer.Option(
        "--attention-mask", help="transformers: pass an attention mask (padded batches).",
    )] = False,
    model_class: Annotated[str | None, typer.Option(
        "--model-class", help="transformers: the model class (default: the causal LM of a "
                              "decoder, the base model of an encoder), e.g. BertForMaskedLM.",
    )] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the profile file format "
                                          "(with --cuts: the whole cut report).")] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write to a file.")] = None,
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Also draw the work and output size of each block (png, pdf or svg).",
    )] = None,
) -> None:  # fmt: skip
    """FLOPs, activations and parameters of a DNN per block."""
    from inferplan.profiles.io import load_profile, save_profile
    from inferplan.profiles.models import ModelOptions, TransformerOptions, trace_model

    hf = TransformerOptions(tuple(config or ()), seq_len, batch, decode, cache_len,
                            attention_mask, model_class)  # fmt: skip
    options = ModelOptions(tuple(input_shapes or ()), blocks, dtype, flops.value, hf, granularity)
    for path in (output, plot):  # before a model is traced
        if path is not None and not path.parent.is_dir():
            raise InvalidArgument("No such file or directory", source=str(path))  # as OSError
    traced = trace_model(model, options)
    if traced is None:
        given = options.given() + (["cuts"] if cuts else [])
        if given:
            raise InvalidArgument("applies to ONNX, PyTorch and transformers models only",
                                  field=given[0])  # fmt: skip
        profile = load_profile(model)
    else:
        profile = traced.profile
        for warning in traced.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    if measure:
        profile = _measure(model, input_shapes or [], options, traced is not None)
    if output is not None:
        save_profile(profile, output)
        written(output)
    if plot is not None:
        from inferplan.plots.pictures import plot_profile

        plot_profile(profile, plot)
        written(plot)
    if as_json:
        print_json(traced.to_dict() if cuts and traced else profile.to_dict())
        return
    if graph:
        console.print(_graph_table(profile, max_ideals))
        return
    console.print(_blocks_table(profile))
    if traced is not None and cuts:
        console.print(_cuts_table(traced))


def _measure(model: str, shapes: list[str], options: ModelOptions, traced: bool) -> Profile:
    if not traced or model.lower().endswith(".onnx") or model.startswith("transformers:"):
        raise InvalidArgument("--measure applies to PyTorch models (module.path:factory) only")
    from inferplan.profiles.cuts import parse_block_spec, parse_granularity, parse_shape
    from inferplan.runtime.measure import measured_profile

    parsed = [parse_shape(s) for s in shapes]
    return measured_profile(model, [s for s, _ in parsed],
                            blocks=parse_block_spec(options.blocks), dtype=options.dtype,
                            input_dtypes=[d for _, d in parsed],
                            granularity=parse_granularity(options.granularity))  # fmt: skip


def _blocks_table(profile: Profile) -> object:
    timed = bool(profile.seconds)
    rows = [["input", "", si(profile.activation_bits[0], "bit"), ""] + ["", ""] * timed]
    for k, name in enumerate(profile.blocks):
        row = [f"{k + 1}. {name}", si(profile.flops[k], "FLOP"),
               si(profile.activation_bits[k + 1], "bit"), si(profile.params[k])]  # fmt: skip
        if timed:
            seconds = profile.seconds[k]
            row += [si(seconds, "s"), si(profile.flops[k] / seconds, "FLOP/s")]
        rows.append(row)
    return table(f"{profile.name}: {profile.n_blocks} blocks, "
                 f"{si(profile.total_flops, 'FLOP')} per inference",
                 ["block", "FLOPs", "activation after", "params"]
                 + ["seconds", "FLOP/s"] * timed, rows)  # fmt: skip


def _graph_table(profile: Profile, max_ideals: int | None) -> object:
    """The profile's layer graph as a table, its size and number of ideals in the title."""
    from inferplan.profiles.graph import INPUT, OUTPUT
    from inferplan.profiles.ideals import DEFAULT_MAX_IDEALS, count_ideals

    graph = profile.graph
    if graph is None:
        raise InvalidArgument(f"profile {profile.name!r} has no layer graph", field="--graph")
    limit = DEFAULT_MAX_IDEALS if max_ideals is None else max_ideals
    found = count_ideals(graph, limit)
    ideals = f"more than {limit} ideals" if found is None else f"{found} ideals"
    reads: dict[str, list[str]] = {v: [] for v in graph.layers}
    for u, v in graph.edges:
        if v != OUTPUT:  # an edge to the output marks a layer others read as an output too
            reads[v].append(u)
    rows = [["input", "", si(graph.input_bits, "bit"), "", ""]]
    outputs = set(graph.sinks)
    for k in graph.order:
        v = graph.layers[k]
        rows.append([v + (" (output)" if k in outputs else ""), si(graph.flops[k], "FLOP"),
                     si(graph.output_bits[k], "bit"), si(graph.params[k]),
                     ", ".join(reads[v]) or INPUT])  # fmt: skip
    return table(f"{profile.name}: {graph.n_layers} layers, {len(graph.edges)} edges, {ideals}",
                 ["layer", "FLOPs", "output", "params", "reads"], rows)  # fmt: skip


def _cuts_table(traced: GraphProfile) -> object:
    rows = []
    for cut in traced.cuts:
        tensors = ", ".join(
            f"{t.name} {'x'.join(map(str, t.shape)) if t.shape is not None else t.dtype}"
            for t in cut.tensors
        )
        state = "kept" if cut.kept else ("valid" if cut.valid else f"invalid: {cut.reason}")
        rows.append([f"{cut.index}. after {cut.after}",
                     "?" if cut.bits is None else si(cut.bits, "bit"), state, tensors])  # fmt: skip
    return table("candidate cuts", ["cut", "crossing", "offered", "tensors"], rows)
