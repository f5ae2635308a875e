"""Profile a Hugging Face ``transformers`` model built from its config (optional extra
``transformers``).

The model is built from a configuration class (``GPT2Config``, ``BertConfig``,
``LlamaConfig``, ...) with any fields overridden, on the ``meta`` device and with no weights, so
nothing is downloaded and nothing is allocated; it is then profiled by the PyTorch front end
(:func:`~inferplan.profiles.from_torch.export_graph`, ``torch.export`` and ``FlopCounterMode``).

Two workloads, as in :func:`~inferplan.profiles.transformers.decoder_lm`:

- **prefill**: ``seq_len`` tokens per sequence pass once through the model; a causal LM computes
  only the last position's logits (``logits_to_keep=1``), as serving engines do;
- **decode**: one new token per sequence, with a KV cache of ``cache_len`` tokens per layer.

Blocks are the embedding, each transformer layer, and the head (everything after the last
layer), unless ``blocks`` says otherwise. A cut carries what crosses it: the residual stream,
and anything else a later block reads (an attention mask made from an input, say). A layer's KV
cache is state: it stays with the block that uses it and crosses no cut (it would if a later
block read it too, as in models that share a cache between layers); the updated cache a decode
step returns stays there too, so only the logits make ``D_N``.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import torch
import transformers
from transformers.models.auto import modeling_auto

from inferplan.errors import InvalidProfile
from inferplan.profiles.cuts import (
    BlockSpec,
    Granularity,
    GraphProfile,
    check_elements,
    owner_of,
)
from inferplan.profiles.from_torch import export_graph, torch_dtype

__all__ = ["build_model", "parse_config_overrides", "profile_transformers"]


def parse_config_overrides(items: list[str]) -> dict[str, Any]:
    """Parse ``key=value`` overrides: JSON values (``12``, ``0.1``, ``true``, ``null``,
    ``[1, 2]``), anything else a string.

    Examples
    --------
    >>> parse_config_overrides(["n_layer=12", "activation_function=gelu", "tie=true"])
    {'n_layer': 12, 'activation_function': 'gelu', 'tie': True}
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise InvalidProfile(f"expected key=value, got {item!r}", field="config")
        try:
            out[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            out[key.strip()] = text
    return out


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence transformers' advice while building (token ids outside a small vocabulary...)."""
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity(logging.ERROR)
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)


def _config(config: str | Any, overrides: Mapping[str, Any]) -> Any:
    base = transformers.PretrainedConfig
    if isinstance(config, str):
        cls = getattr(transformers, config, None)
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise InvalidProfile(f"transformers has no configuration class {config!r} "
                                 "(e.g. GPT2Config, BertConfig, LlamaConfig)",
                                 field="config")  # fmt: skip
        with _quiet():
            default = cls()
    elif isinstance(config, base):
        if overrides:
            raise InvalidProfile("set the fields of a configuration object on the object itself",
                                 field="config")  # fmt: skip
        default = config
    else:
        raise InvalidProfile(f"expected a configuration class name or object, got "
                             f"{type(config).__name__}", field="config")  # fmt: skip
    unknown = [key for key in overrides if not hasattr(default, key)]
    if unknown:
        raise InvalidProfile(f"{type(default).__name__} has no field(s) "
                             f"{', '.join(map(repr, unknown))}", field="config")  # fmt: skip
    with _quiet():
        try:
            parsed = type(default)(**overrides) if isinstance(config, str) else config
        except Exception as exc:  # a config's own validation raises what it likes
            problem = " ".join(str(exc).split())  # some are several indented lines
            raise InvalidProfile(f"{type(default).__name__}: {problem}", field="config") from None
    _check_sizes(parsed, overrides)
    return parsed


SIZES = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
         "intermediate_size", "vocab_size", "max_position_embeddings", "head_dim")  # fmt: skip
"""The configuration fields the profile relies on (the layers it makes blocks of, the widths
of its tensors): each, where a configuration has it, a positive integer (or unset)."""


def _check_sizes(config: Any, overrides: Mapping[str, Any]) -> None:
    """Refuse a size of :data:`SIZES` that is not a positive integer (zero layers would give a
    model of one block, a negative width a model that cannot run), naming the field as it was
    given (``n_layer`` for GPT-2's ``num_hidden_layers``)."""
    aliases = dict(config.attribute_map)  # the common name -> the config's own field
    for name in SIZES:
        value = getattr(config, name, None)
        if value is None or isinstance(value, list | tuple | dict):
            continue  # unset, or per-layer values that the model's constructor checks
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            given = next((key for key in (aliases.get(name), name) if key in overrides), None)
            shown = given or aliases.get(name) or name
            raise InvalidProfile(f"{type(config).__name__}.{shown} must be a positive integer, "
                                 f"got {value!r}", field="config")  # fmt: skip


def _model_class(config: Any, model_class: str | None) -> Any:
    if model_class is not None:
        cls = getattr(transformers, model_class, None)
        if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
            raise InvalidProfile(f"transformers has no model class {model_class!r}",
                                 field="model_class")  # fmt: skip
        return cls
    kind = config.model_type
    causal = kind in modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    if causal and kind not in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return transformers.AutoModelForCausalLM
    return transformers.AutoModel


def build_model(
    config: str | Any,
    overrides: Mapping[str, Any] | None = None,
    *,
    model_class: str | None = None,
) -> Any:
    """The model of ``config`` (a class name such as ``"GPT2Config"``, or a config object) with
    ``overrides``, built on the meta device with no weights.

    Decoder-only models get their causal-LM head; encoders (BERT, ...) are the base model.
    ``model_class`` names another ``transformers`` class (``"BertForMaskedLM"``).
    """
    parsed = _config(config, overrides or {})
    cls = _model_class(parsed, model_class)
    with _quiet(), torch.device("meta"):
        try:
            if cls in (transformers.AutoModel, transformers.AutoModelForCausalLM):
                model = cls.from_config(parsed)
            else:
                model = cls(parsed)
        except Exception as exc:  # the model's constructor validates the config its own way
            raise InvalidProfile(f"cannot build {cls.__name__} from {type(parsed).__name__}: "
                                 f"{exc}", field="config") from None  # fmt: skip
    return model.eval()


def _layer_list(model: Any) -> str | None:
    """The qualified name of the model's list of transformer layers (the ``ModuleList`` holding
    the most parameters)."""
    best, size = None, 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) > 0:
            count = sum(p.numel() for p in module.parameters())
            if count > size:
                best, size = name, count
    return best


def layer_blocks(layers: str, order: list[str]) -> Callable[[list[str]], str | None]:
    """The owner rule "embedding, each layer, head": an operation inside ``layers.K`` belongs to
    that layer; one inside a module first run before the first layer to ``embed``; one inside
    any other module (the final norm, the head, a pooler) to ``head``; one in no module but the
    layers' ancestors is free. ``order`` lists the modules in order of first execution.
    """
    first = next((k for k, name in enumerate(order) if name.startswith(layers + ".")), 0)
    before = set(order[:first])

    def owner(path: list[str]) -> str | None:
        inner = [name for name in path if not layers.startswith(name + ".")]
        if not inner:
            return None
        for name in inner:
            index = name.removeprefix(layers + ".").partition(".")[0]
            if name.startswith(layers + ".") and index.isdigit():
                return f"{layers}.{index}"
        return "embed" if inner[0] in before else "head"

    return owner


def _decode_cache(model: Any, batch: int, cache_len: int) -> Any:
    """A KV cache holding ``cache_len`` tokens per sequence, made by a meta-device prefill."""
    ids = torch.zeros(batch, cache_len, dtype=torch.int64, device="meta")
    try:
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=True)
    except Exception as exc:  # the model's own checks
        raise InvalidProfile(f"cannot fill a KV cache of {cache_len} tokens: {exc}",
                             field="cache_len") from None  # fmt: skip
    cache = out.get("cache", out.get("past_key_values"))
    if cache is None:
        raise InvalidProfile(f"{type(model).__name__} returns no KV cache: it has no decode step",
                             field="phase")  # fmt: skip
    return cache


def _register_cache(cache: Any) -> None:
    """Let torch.export take the cache as an input (a pytree of its key and value tensors)."""
    if type(cache).__name__ == "DynamicCache":
        from transformers.integrations.executorch import register_dynamic_cache_export_support

        register_dynamic_cache_export_support()  # type: ignore[no-untyped-call]
    else:
        from transformers.exporters.exporter_dynamo import register_pytree_node

        register_pytree_node(type(cache))


def profile_transformers(
    config: str | Any,
    overrides: Mapping[str, Any] | None = None,
    *,
    seq_len: int,
    batch: int = 1,
    phase: Literal["prefill", "decode"] = "prefill",
    cache_len: int | None = None,
    attention_mask: bool = False,
    model_class: str | None = None,
    blocks: BlockSpec = None,
    dtype: str = "float32",
    name: str | None = None,
    granularity: Granularity = "blocks",
) -> GraphProfile:
    """Profile the ``transformers`` model of ``config`` (see :func:`build_model`) per layer.

    Parameters
    ----------
    config, overrides, model_class
        The model, as :func:`build_model` takes it.
    seq_len
        Prompt tokens per sequence (prefill); in decode, the cached tokens when ``cache_len`` is
        not given.
    batch
        Sequences processed together.
    phase
        ``"prefill"`` or ``"decode"`` (one new token per sequence after ``cache_len`` cached).
    cache_len
        Tokens in the KV cache of a decode step (``seq_len`` by default).
    attention_mask
        Pass an ``attention_mask`` input too (padded batches); it crosses every cut whose later
        layers read it.
    blocks
        ``None`` for embedding, layers and head; or a depth, or groups of module names.
    dtype
        Floating-point dtype of the weights and activations.
    name
        The profile's name (the config class's by default).
    granularity
        What a layer of the layer graph is, as for
        :func:`~inferplan.profiles.from_torch.profile_module`.

    Examples
    --------
    >>> result = profile_transformers("GPT2Config", {"n_layer": 2, "n_embd": 64, "n_head": 4,
    ...                               "vocab_size": 100}, seq_len=16)
    >>> result.profile.blocks
    ('embed+transformer.h.0', 'transformer.h.1', 'head')
    """
    for field, value in (("seq_len", seq_len), ("batch", batch), ("cache_len", cache_len)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise InvalidProfile(f"must be a positive integer, got {value!r}", field=field)
    if phase not in ("prefill", "decode"):
        raise InvalidProfile(f"must be 'prefill' or 'decode', got {phase!r}", field="phase")
    float_dtype = torch_dtype(dtype)
    model = build_model(config, overrides, model_class=model_class).to(float_dtype)
    label = name or type(model.config).__name__.removesuffix("Config") + f"-{phase}"
    accepts = inspect.signature(model.forward).parameters
    tokens = seq_len if phase == "prefill" else 1
    cached = (cache_len or seq_len) if phase == "decode" else 0
    check_elements((batch, tokens + cached), "seq_len", "a batch of sequences")
    kwargs: dict[str, Any] = {
        "input_ids": torch.zeros(batch, tokens, dtype=torch.int64, device="meta")
    }
    if phase == "decode":
        with _quiet():
            cache = _decode_cache(model, batch, cached)
        _register_cache(cache)
        kwargs["cache" if "cache" in accepts else "past_key_values"] = cache
    if attention_mask:
        kwargs["attention_mask"] = torch.ones(batch, tokens + cached, dtype=torch.int64,
                                              device="meta")  # fmt: skip
    if "use_cache" in accepts:
        kwargs["use_cache"] = phase == "decode"
    if "logits_to_keep" in accepts:
        kwargs["logits_to_keep"] = 1
    with _quiet():
        graph = export_graph(model, [], kwargs, float_dtype=float_dtype, label=label)
    # The meta device checks no index: a position table too short for the context would go
    # unnoticed.
    limit = getattr(model.config, "max_position_embeddings", None)
    warnings = []
    if isinstance(limit, int) and tokens + cached > limit:
        warnings.append(f"{tokens + cached} tokens exceed the config's max_position_embeddings "
                        f"({limit}): the model cannot run them as configured")  # fmt: skip
    layers = _layer_list(model)
    if blocks is not None or layers is None:
        return graph.profile(label, lambda path: owner_of(path, blocks), blocks, warnings,
                             granularity=granularity)  # fmt: skip
    return graph.profile(label, layer_blocks(layers, graph.module_order()), warnings=warnings,
                         granularity=granularity)  # fmt: skip
