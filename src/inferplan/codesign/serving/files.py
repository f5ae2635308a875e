"""Serving files (JSON or YAML): workloads, GPU catalogs and decoder models.

A workload (``--workload``)::

    requests_per_s: 2.0
    ttft_s: 1.0          # optional: each class's mean time to first token
    tpot_s: 0.05         # optional: the mean time per output token
    classes:
      - {prompt_tokens: 512, output_tokens: 128, share: 0.7}
      - {prompt_tokens: 2048, output_tokens: 256, share: 0.3}

A GPU catalog (``--catalog``): each type's FLOP/s, memory bandwidth (bytes/s), memory
(bytes), price per hour and, optionally, the unit counts that may form one node with their
tensor-parallel efficiency::

    gpus:
      - {name: A100-80GB, flops: 312e12, memory_bandwidth: 2.0e12, memory: 80e9,
         price_per_hour: 3.67, tp_efficiency: {1: 1.0, 2: 0.92, 4: 0.88, 8: 0.85}}

and, for a type, optionally the step times measured on its nodes (``step_times``: per unit
count, the seconds per layer held of a decode step by batch and of a prefill by prompt
tokens, interpolated linearly between the measured points; a batch or prompt outside them is
refused when planning), which then time its nodes instead of the roofline::

      - name: L4
        flops: 121e12
        memory_bandwidth: 300e9
        memory: 24e9
        price_per_hour: 0.8
        step_times:
          1: {decode: {1: 2.1e-4, 8: 2.6e-4, 32: 4.0e-4}, prefill: {128: 1.1e-3, 2048: 1.5e-2}}

A decoder model: a file with ``decoder_lm``'s arguments and the context length::

    decoder: {name: llama-70b, layers: 80, hidden: 8192, heads: 64, kv_heads: 8,
              ffn_hidden: 28672, vocab_size: 128256, gated_mlp: true, max_context: 8192}

or ``transformers:CONFIG_CLASS`` with ``key=value`` overrides (LLaMA-style and GPT-2-style
configurations; the config is read, no model is built).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from inferplan.codesign.serving.catalog import Catalog, GpuType
from inferplan.codesign.serving.decoder import Decoder
from inferplan.codesign.serving.workload import RequestClass, Workload
from inferplan.codesign.timing.step import MeasuredTable
from inferplan.documents import read_document, validate_document
from inferplan.errors import InferplanError, InvalidFile, InvalidProfile

__all__ = ["load_catalog", "load_decoder", "load_workload"]

Positive = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
Count = Annotated[int, Field(strict=True, ge=1)]


class _ClassEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt_tokens: Count
    output_tokens: Count
    share: Annotated[float, Field(strict=True, gt=0, le=1, allow_inf_nan=False)]


class _WorkloadFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requests_per_s: Positive
    classes: list[_ClassEntry] = Field(min_length=1)
    ttft_s: Positive | None = None
    tpot_s: Positive | None = None


class _GpuEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    flops: Positive
    memory_bandwidth: Positive
    memory: Positive
    price_per_hour: Positive
    tp_efficiency: dict[Count, Annotated[float, Field(strict=True, gt=0, le=1)]] = {1: 1.0}
    step_times: dict[Count, _StepTimes] = {}


class _StepTimes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decode: dict[Positive, Positive] = Field(min_length=1)
    prefill: dict[Positive, Positive] = Field(min_length=1)


class _CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpus: list[_GpuEntry] = Field(min_length=1)


class _DecoderEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = "decoder"
    layers: Count
    hidden: Count
    heads: Count
    kv_heads: Count | None = None
    ffn_hidden: Count | None = None
    vocab_size: Count = 32000
    max_context: Count
    bytes_per_element: Count = 2
    gated_mlp: StrictBool = False
    tie_embeddings: StrictBool = False
    bias: StrictBool = False
    layer_norm: StrictBool = False
    positions: StrictInt = 0


class _DecoderFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decoder: _DecoderEntry


def _read(path: str | Path, model: type[Any], error: type[InferplanError]) -> Any:
    source = str(path)
    data = read_document(path)
    return validate_document(model, data, source=source, error=error)


def load_workload(path: str | Path) -> Workload:
    """Read a workload file (see the module's docstring)."""
    doc = _read(path, _WorkloadFile, InvalidFile)
    try:
        return Workload(doc.requests_per_s,
                        tuple(RequestClass(c.prompt_tokens, c.output_tokens, c.share)
                              for c in doc.classes), doc.ttft_s, doc.tpot_s)  # fmt: skip
    except InferplanError as exc:
        raise exc.located(str(path)) from None


def load_catalog(path: str | Path) -> Catalog:
    """Read a GPU catalog file (see the module's docstring)."""
    doc = _read(path, _CatalogFile, InvalidFile)
    try:
        return Catalog(tuple(GpuType(g.name, g.flops, g.memory_bandwidth, g.memory,
                                     g.price_per_hour, dict(g.tp_efficiency),
                                     {k: MeasuredTable.of(decode=t.decode, prefill=t.prefill)
                                      for k, t in g.step_times.items()})
                             for g in doc.gpus))  # fmt: skip
    except InferplanError as exc:
        raise exc.located(str(path)) from None


_GATED = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "phi3"})


def _from_config(config: str, overrides: list[str]) -> Decoder:
    try:
        from inferplan.profiles.from_transformers import _config, parse_config_overrides
    except ImportError:
        raise InvalidProfile("transformers models need torch and transformers "
                             "(pip install 'inferplan[transformers]')") from None  # fmt: skip
    c = _config(config, parse_config_overrides(overrides))
    kind = getattr(c, "model_type", "")
    if kind == "gpt2":
        return Decoder(config, layers=c.n_layer, hidden=c.n_embd, heads=c.n_head,
                       kv_heads=c.n_head, ffn_hidden=c.n_inner or 4 * c.n_embd,
                       vocab_size=c.vocab_size, max_context=c.n_positions,
                       tie_embeddings=bool(c.tie_word_embeddings), bias=True, layer_norm=True,
                       positions=c.n_positions)  # fmt: skip
    if kind in _GATED:
        return Decoder(config, layers=c.num_hidden_layers, hidden=c.hidden_size,
                       heads=c.num_attention_heads,
                       kv_heads=getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
                       ffn_hidden=c.intermediate_size, vocab_size=c.vocab_size,
                       max_context=c.max_position_embeddings, gated_mlp=True,
                       tie_embeddings=bool(getattr(c, "tie_word_embeddings", False)),
                       bias=bool(getattr(c, "attention_bias", False)))  # fmt: skip
    raise InvalidProfile(f"{config} ({kind!r}) is no decoder configuration the serving "
                         f"planner reads (LLaMA-style: {', '.join(sorted(_GATED))}; gpt2)",
                         field="config")  # fmt: skip


def load_decoder(model: str, config: list[str] | None = None) -> Decoder:
    """The decoder a model names: a decoder file, or ``transformers:CONFIG_CLASS`` with
    ``key=value`` overrides of its fields."""
    if model.startswith("transformers:"):
        return _from_config(model.removeprefix("transformers:"), list(config or ()))
    if config:
        raise InvalidProfile("applies to transformers:CONFIG_CLASS models only", field="config")
    doc = _read(model, _DecoderFile, InvalidProfile)
    fields = doc.decoder.model_dump()
    try:
        return Decoder(fields.pop("name"), **{
            **fields, "kv_heads": fields["kv_heads"] or fields["heads"],
            "ffn_hidden": fields["ffn_hidden"] or 4 * fields["hidden"]})  # fmt: skip
    except InferplanError as exc:
        raise exc.located(model) from None
