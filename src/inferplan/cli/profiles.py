"""``inferplan profile``: profile a built-in, a profile file, an ONNX file or a PyTorch module."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from inferplan.cli.app import app, friendly_errors
from inferplan.cli.render import console, print_json, table, written
from inferplan.errors import InvalidArgument, InvalidProfile
from inferplan.units import si

Shape = tuple[int, ...]

if TYPE_CHECKING:
    from inferplan.profiles.cuts import GraphProfile
    from inferplan.profiles.profile import Profile


class FlopCount(StrEnum):
    matrix = "matrix"
    all = "all"


@dataclass(frozen=True)
class _Transformer:
    """The options of a ``transformers:CONFIG_CLASS`` model."""

    config: list[str]
    seq_len: int | None
    batch: int
    decode: bool
    cache_len: int | None
    attention_mask: bool
    model_class: str | None

    def given(self) -> list[str]:
        return [name for name, used in (
            ("--config", self.config), ("--seq-len", self.seq_len is not None),
            ("--batch", self.batch != 1), ("--decode", self.decode),
            ("--cache-len", self.cache_len is not None),
            ("--attention-mask", self.attention_mask),
            ("--model-class", self.model_class is not None)) if used]  # fmt: skip


def _profile_transformers(model: str, hf: _Transformer, shapes: list[str], blocks: str | None,
                          dtype: str, flops: FlopCount) -> GraphProfile:  # fmt: skip
    from inferplan.profiles.cuts import parse_block_spec

    if shapes or flops is not FlopCount.matrix:
        given = "--input-shape" if shapes else "--flops"
        raise InvalidArgument(f"{given} does not apply to transformers models (use --seq-len)")
    if hf.seq_len is None:
        raise InvalidArgument("give the tokens per sequence (--seq-len)", field="--seq-len")
    if hf.cache_len is not None and not hf.decode:
        raise InvalidArgument("--cache-len applies to --decode only", field="--cache-len")
    try:
        from inferplan.profiles.from_transformers import (
            parse_config_overrides,
            profile_transformers,
        )
    except ImportError:
        raise InvalidProfile("transformers models need torch and transformers "
                             "(pip install 'inferplan[transformers]')") from None  # fmt: skip
    return profile_transformers(
        model.removeprefix("transformers:"), parse_config_overrides(hf.config),
        seq_len=hf.seq_len, batch=hf.batch, phase="decode" if hf.decode else "prefill",
        cache_len=hf.cache_len, attention_mask=hf.attention_mask, model_class=hf.model_class,
        blocks=parse_block_spec(blocks), dtype=dtype,
    )  # fmt: skip


def _trace(
    model: str,
    shapes: list[str],
    blocks: str | None,
    dtype: str,
    flops: FlopCount,
    hf: _Transformer,
) -> GraphProfile | None:
    """Trace ``model`` if it is an ONNX file, a ``transformers:CONFIG_CLASS`` or a
    ``module:factory``; ``None`` otherwise."""
    from inferplan.documents import path_exists
    from inferplan.profiles.cuts import parse_block_spec, parse_factory_spec, parse_shape

    if model.startswith("transformers:"):
        return _profile_transformers(model, hf, shapes, blocks, dtype, flops)
    if hf.given():
        raise InvalidArgument(f"{', '.join(hf.given())} apply to transformers:CONFIG_CLASS "
                              "models only")  # fmt: skip
    names = [s.partition("=")[0].strip() if "=" in s else None for s in shapes]
    parsed = [parse_shape(s.partition("=")[2] if "=" in s else s) for s in shapes]
    if any(names) and not all(name and name.isidentifier() for name in names):
        raise InvalidArgument("name every input (name=shape) or none", field="--input-shape")
    spec = parse_block_spec(blocks)
    if model.lower().endswith(".onnx"):
        if any(names):
            raise InvalidArgument("ONNX inputs are given in order, without names",
                                  field="--input-shape")  # fmt: skip
        if dtype != "float32" or any(kind for _, kind in parsed):
            raise InvalidArgument("ONNX models carry their own dtypes", field="dtype")
        try:
            from inferplan.profiles.from_onnx import profile_onnx
        except ImportError:
            raise InvalidProfile("ONNX models need onnx (pip install 'inferplan[onnx]')") from None
        return profile_onnx(model, input_shapes=[s for s, _ in parsed], blocks=spec,
                            flops=flops.value)  # fmt: skip
    if parse_factory_spec(model) is not None and not path_exists(model):
        try:
            from inferplan.profiles.from_torch import profile_torch
        except ImportError:
            raise InvalidProfile("PyTorch models need torch (pip install 'inferplan[torch]')"
                                 ) from None  # fmt: skip
        if flops is not FlopCount.matrix:
            raise InvalidArgument("PyTorch models count matrix FLOPs only", field="--flops")
        dims = [s for s, _ in parsed]
        inputs: list[Shape] | dict[str, Shape] = dims
        if any(names):
            inputs = {str(name): dim for name, dim in zip(names, dims, strict=True)}
        return profile_torch(model, inputs, blocks=spec, dtype=dtype,
                             input_dtypes=[d for _, d in parsed])  # fmt: skip
    return None


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
    input_shapes: Annotated[list[str] | None, typer.Option(
        "--input-shape", metavar="<shape>",
        help="Shape of an input, e.g. 1,3,224,224 or 1x128:int64; repeat for several inputs. "
             "PyTorch keyword inputs: input_ids=1x128:int64.",
    )] = None,
    blocks: Annotated[str | None, typer.Option(
        "--blocks", help="Blocks: depth=K, or module groups 'conv1+bn1,layer1,layer2'. "
                         "Default: top-level modules.")] = None,
    dtype: Annotated[str, typer.Option(
        "--dtype", help="PyTorch: floating-point dtype of weights and activations.")] = "float32",
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
    config: Annotated[list[str] | None, typer.Option(
        "--config", metavar="<key=value>",
        help="transformers: a configuration field, e.g. n_layer=12; repeat for several.",
    )] = None,
    seq_len: Annotated[int | None, typer.Option(
        "--seq-len", help="transformers: tokens per sequence (prompt, or KV cache in decode).",
    )] = None,
    batch: Annotated[int, typer.Option(
        "--batch", help="transformers: sequences per inference.")] = 1,
    decode: Annotated[bool, typer.Option(
        "--decode", help="transformers: profile one decode step with a KV cache.")] = False,
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
) -> None:  # fmt: skip
    """FLOPs, activations and parameters of a DNN per block."""
    from inferplan.profiles.io import load_profile, save_profile

    hf = _Transformer(config or [], seq_len, batch, decode, cache_len, attention_mask,
                      model_class)  # fmt: skip
    traced = _trace(model, input_shapes or [], blocks, dtype, flops, hf)
    if traced is None:
        given = [name for name, used in (("--input-shape", input_shapes), ("--blocks", blocks),
                 ("--cuts", cuts), ("--dtype", dtype != "float32"),
                 ("--flops", flops is not FlopCount.matrix)) if used]  # fmt: skip
        if given:
            raise InvalidArgument(f"{', '.join(given)} apply to ONNX and PyTorch models only")
        profile = load_profile(model)
    else:
        profile = traced.profile
        for warning in traced.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    if measure:
        profile = _measure(model, input_shapes or [], blocks, dtype, traced is not None)
    if output is not None:
        save_profile(profile, output)
        written(output)
    if as_json:
        print_json(traced.to_dict() if cuts and traced else profile.to_dict())
        return
    if graph:
        console.print(_graph_table(profile, max_ideals))
        return
    console.print(_blocks_table(profile))
    if traced is not None and cuts:
        console.print(_cuts_table(traced))


def _measure(model: str, shapes: list[str], blocks: str | None, dtype: str, traced: bool
             ) -> Profile:  # fmt: skip
    if not traced or model.lower().endswith(".onnx") or model.startswith("transformers:"):
        raise InvalidArgument("--measure applies to PyTorch models (module.path:factory) only")
    from inferplan.profiles.cuts import parse_block_spec, parse_shape
    from inferplan.runtime.measure import measured_profile

    parsed = [parse_shape(s) for s in shapes]
    return measured_profile(model, [s for s, _ in parsed], blocks=parse_block_spec(blocks),
                            dtype=dtype, input_dtypes=[d for _, d in parsed])  # fmt: skip


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
    from inferplan.profiles.graph import INPUT
    from inferplan.profiles.ideals import DEFAULT_MAX_IDEALS, count_ideals

    graph = profile.graph
    if graph is None:
        raise InvalidArgument(f"profile {profile.name!r} has no layer graph", field="--graph")
    limit = DEFAULT_MAX_IDEALS if max_ideals is None else max_ideals
    found = count_ideals(graph, limit)
    ideals = f"more than {limit} ideals" if found is None else f"{found} ideals"
    reads: dict[str, list[str]] = {v: [] for v in graph.layers}
    for u, v in graph.edges:
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
