"""A profile from whatever names a model: a built-in, a profile file, an ONNX file, a
``transformers:CONFIG_CLASS`` or a PyTorch ``MODULE:FACTORY`` / ``file.py:FACTORY``.

Every command and file that takes a profile takes any of these (``inferplan profile``,
``provision``, ``throughput``, ``frontier``, services files): a model is profiled on the fly,
as ``inferplan profile`` profiles it. The traced front ends load their extras (torch,
transformers, onnx) only when such a model is named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from inferplan.errors import InvalidArgument, InvalidProfile

if TYPE_CHECKING:
    from inferplan.profiles.cuts import GraphProfile
    from inferplan.profiles.profile import Profile

__all__ = ["MODELS_TOO", "ModelOptions", "TransformerOptions", "model_profile", "trace_model"]

Shape = tuple[int, ...]

MODELS_TOO = (
    "a model works too: MODULE:FACTORY or file.py:FACTORY with --input-shape, an ONNX file, "
    "or transformers:CONFIG_CLASS with --seq-len"
)
"""What else names a profile where a model is profiled on the fly: said by the error about a
name that is no built-in."""


@dataclass(frozen=True)
class TransformerOptions:
    """The options of a ``transformers:CONFIG_CLASS`` model (see ``inferplan profile``)."""

    config: tuple[str, ...] = ()
    seq_len: int | None = None
    batch: int = 1
    decode: bool = False
    cache_len: int | None = None
    attention_mask: bool = False
    model_class: str | None = None

    def given(self) -> list[str]:
        """The options set away from their defaults, by parameter name."""
        return [name for name, used in (
            ("config", bool(self.config)), ("seq_len", self.seq_len is not None),
            ("batch", self.batch != 1), ("decode", self.decode),
            ("cache_len", self.cache_len is not None), ("attention_mask", self.attention_mask),
            ("model_class", self.model_class is not None)) if used]  # fmt: skip


@dataclass(frozen=True)
class ModelOptions:
    """How to profile a traced model: its inputs' shapes (``1,3,224,224``, ``1x128:int64``,
    ``input_ids=1x128:int64``), its blocks (``depth=K`` or module groups), the dtype of its
    weights, which FLOPs an ONNX file counts, the transformers options, and what a layer of its
    layer graph is (``granularity``: ``blocks``, ``modules``, ``ops`` or ``depth=K``)."""

    input_shapes: tuple[str, ...] = ()
    blocks: str | None = None
    dtype: str = "float32"
    flops: Literal["matrix", "all"] = "matrix"
    transformer: TransformerOptions = field(default_factory=TransformerOptions)
    granularity: str | None = None

    def given(self) -> list[str]:
        """The options that apply to traced models only, set away from their defaults."""
        return [name for name, used in (
            ("input_shapes", bool(self.input_shapes)), ("blocks", self.blocks is not None),
            ("dtype", self.dtype != "float32"), ("flops", self.flops != "matrix"),
            ("granularity", self.granularity is not None))
            if used] + self.transformer.given()  # fmt: skip


def _profile_transformers(model: str, options: ModelOptions) -> GraphProfile:
    from inferplan.profiles.cuts import parse_block_spec, parse_granularity

    hf = options.transformer
    if options.input_shapes or options.flops != "matrix":
        given = "input_shapes" if options.input_shapes else "flops"
        raise InvalidArgument("does not apply to transformers models (use --seq-len)",
                              field=given)  # fmt: skip
    if hf.seq_len is None:
        raise InvalidArgument("give the tokens per sequence", field="seq_len")
    if hf.cache_len is not None and not hf.decode:
        raise InvalidArgument("applies to --decode only", field="cache_len")
    try:
        from inferplan.profiles.from_transformers import (
            parse_config_overrides,
            profile_transformers,
        )
    except ImportError:
        raise InvalidProfile("transformers models need torch and transformers "
                             "(pip install 'inferplan[transformers]')") from None  # fmt: skip
    return profile_transformers(
        model.removeprefix("transformers:"), parse_config_overrides(list(hf.config)),
        seq_len=hf.seq_len, batch=hf.batch, phase="decode" if hf.decode else "prefill",
        cache_len=hf.cache_len, attention_mask=hf.attention_mask, model_class=hf.model_class,
        blocks=parse_block_spec(options.blocks), dtype=options.dtype,
        granularity=parse_granularity(options.granularity),
    )  # fmt: skip


def trace_model(model: str, options: ModelOptions | None = None) -> GraphProfile | None:
    """Trace ``model`` if it is an ONNX file, a ``transformers:CONFIG_CLASS`` or a
    ``MODULE:FACTORY`` (which IMPORTS AND RUNS that Python code); ``None`` for anything else (a
    built-in name or a profile file).

    Raises
    ------
    InvalidArgument
        For an option that does not apply to the model, naming the option's parameter.
    InvalidProfile
        If the model's extra is not installed, or the model cannot be profiled.
    """
    from inferplan.documents import path_exists
    from inferplan.profiles.cuts import (
        check_factory,
        parse_block_spec,
        parse_factory_spec,
        parse_granularity,
        parse_shape,
    )

    options = options or ModelOptions()
    if model.startswith("transformers:"):
        return _profile_transformers(model, options)
    if options.transformer.given():
        raise InvalidArgument("applies to transformers:CONFIG_CLASS models only",
                              field=options.transformer.given()[0])  # fmt: skip
    shapes = options.input_shapes
    names = [s.partition("=")[0].strip() if "=" in s else None for s in shapes]
    parsed = [parse_shape(s.partition("=")[2] if "=" in s else s) for s in shapes]
    if any(names) and not all(name and name.isidentifier() for name in names):
        raise InvalidArgument("name every input (name=shape) or none", field="input_shapes")
    spec = parse_block_spec(options.blocks)
    granularity = parse_granularity(options.granularity)
    if model.lower().endswith(".onnx"):
        if any(names):
            raise InvalidArgument("ONNX inputs are given in order, without names",
                                  field="input_shapes")  # fmt: skip
        if options.dtype != "float32" or any(kind for _, kind in parsed):
            raise InvalidArgument("ONNX models carry their own dtypes", field="dtype")
        try:
            from inferplan.profiles.from_onnx import profile_onnx
        except ImportError:
            raise InvalidProfile("ONNX models need onnx (pip install 'inferplan[onnx]')") from None
        return profile_onnx(model, input_shapes=[s for s, _ in parsed], blocks=spec,
                            flops=options.flops, granularity=granularity)  # fmt: skip
    if parse_factory_spec(model) is not None and not path_exists(model):
        # what needs no torch first: the module is there, the inputs are given
        check_factory(model)
        if not shapes:
            raise InvalidProfile("give the shape of each input", field="input_shapes")
        try:
            from inferplan.profiles.from_torch import profile_torch
        except ImportError:
            raise InvalidProfile("PyTorch models need torch (pip install 'inferplan[torch]')"
                                 ) from None  # fmt: skip
        if options.flops != "matrix":
            raise InvalidArgument("PyTorch models count matrix FLOPs only", field="flops")
        dims = [s for s, _ in parsed]
        inputs: list[Shape] | dict[str, Shape] = dims
        if any(names):
            inputs = {str(name): dim for name, dim in zip(names, dims, strict=True)}
        return profile_torch(model, inputs, blocks=spec, dtype=options.dtype,
                             input_dtypes=[d for _, d in parsed],
                             granularity=granularity)  # fmt: skip
    return None


def model_profile(model: str, options: ModelOptions | None = None) -> Profile:
    """The profile of ``model``: a built-in name or a profile file as
    :func:`~inferplan.profiles.load_profile` reads it, or a traced model's profile
    (:func:`trace_model`).

    Raises
    ------
    InvalidArgument
        For tracing options given with a built-in name or a profile file (naming the first).
    InvalidProfile
        If ``model`` names nothing that can be profiled; the message says what can.

    Examples
    --------
    >>> model_profile("vgg16").n_blocks
    16
    >>> model_profile("examples/model.onnx").n_blocks  # doctest: +SKIP
    3
    """
    from inferplan.documents import path_exists
    from inferplan.profiles.io import load_profile

    options = options or ModelOptions()
    traced = trace_model(model, options)
    if traced is not None:
        return traced.profile
    if options.given():
        raise InvalidArgument("applies to ONNX, PyTorch and transformers models only",
                              field=options.given()[0])  # fmt: skip
    try:
        return load_profile(model)
    except InvalidProfile as exc:
        if exc.source is not None or path_exists(model):
            raise  # a profile file's own error
        raise InvalidProfile(f"{exc.message}; {MODELS_TOO}", field=exc.field) from None
