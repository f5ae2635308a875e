"""Arguments and options that several commands share, and the choices they read from the
library's registries."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from inferplan.codesign.methods import METHODS, SERVICE_METHODS, TIE_BREAKS, throughput_methods
from inferplan.errors import InvalidArgument, InvalidNetwork
from inferplan.native import native_stdout_muted

__all__ = [
    "MODEL_OPTIONS",
    "PROFILE_HELP",
    "BlocksOpt",
    "ConfigOpt",
    "CutsOpt",
    "DecodeOpt",
    "DtypeOpt",
    "GranularityOpt",
    "InputShapesOpt",
    "JsonOpt",
    "MaxIdealsOpt",
    "MethodChoice",
    "NetworkArg",
    "ProfileArg",
    "ProvisionMethodChoice",
    "RunShapesOpt",
    "ThroughputMethodChoice",
    "TieBreakChoice",
    "blame_network_file",
    "method_help",
    "model_flags",
    "native_stdout_muted",
    "node_time_model",
    "services_method_help",
    "throughput_method_help",
    "with_model_options",
]

NetworkArg = Annotated[Path, typer.Argument(help="Network file (JSON or YAML).")]
PROFILE_HELP = (
    "Built-in profile name (vgg16, resnet50, alexnet, mlp-WxD), profile file, or a model "
    "profiled on the fly as inferplan profile takes it: MODULE:FACTORY or file.py:FACTORY "
    "with --input-shape (imports and runs that code), an ONNX file, or "
    "transformers:CONFIG_CLASS with --seq-len."
)
ProfileArg = Annotated[str, typer.Argument(help=PROFILE_HELP)]

# How a model named in place of a profile is profiled: the options of ``inferplan profile``
InputShapesOpt = Annotated[list[str] | None, typer.Option(
    "--input-shape", metavar="<shape>",
    help="Shape of an input, e.g. 1,3,224,224 or 1x128:int64; repeat for several inputs. "
         "PyTorch keyword inputs: input_ids=1x128:int64.",
)]  # fmt: skip
# The same for the commands that run a PyTorch model, whose inputs are positional
RunShapesOpt = Annotated[list[str] | None, typer.Option(
    "--input-shape", metavar="<shape>",
    help="Shape of an input, e.g. 1,3,224,224 or 1x128:int64; repeat for several inputs.",
)]  # fmt: skip
BlocksOpt = Annotated[str | None, typer.Option(
    "--blocks", help="Blocks: depth=K, or module groups 'conv1+bn1,layer1,layer2'. "
                     "Default: top-level modules.")]  # fmt: skip
DtypeOpt = Annotated[str, typer.Option(
    "--dtype", help="PyTorch: floating-point dtype of weights and activations.")]  # fmt: skip
GranularityOpt = Annotated[str | None, typer.Option(
    "--granularity", metavar="<layers>",
    help="What a layer of the layer graph (where --cuts graph may cut) is: blocks (one per "
         "block, the default), modules (one per innermost module), ops (one per operation), "
         "or depth=K (one per module K levels down; coarser than deeper blocks).")]  # fmt: skip
ConfigOpt = Annotated[list[str] | None, typer.Option(
    "--config", metavar="<key=value>",
    help="transformers: a configuration field, e.g. n_layer=12; repeat for several.",
)]  # fmt: skip
SeqLenOpt = Annotated[
    int | None,
    typer.Option(
        "--seq-len", help="transformers: tokens per sequence (prompt, or KV cache in decode)."
    ),
]
DecodeOpt = Annotated[
    bool, typer.Option("--decode", help="transformers: profile one decode step with a KV cache.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
CutsOpt = Annotated[
    Literal["chain", "graph"] | None,
    typer.Option(
        "--cuts",
        help="Where the model may be cut: chain (between consecutive blocks) or graph (at "
        "every ideal of the profile's layer graph). Default graph when the profile has a "
        "layer graph within the limits, else chain.",
    ),
]
MaxIdealsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-ideals",
        help="Refuse layer graphs with more ideals than this (default 100000, at most 1000000).",
        min=2,
    ),
]

# The choices of --method and --tie-break are the registries' names (typer reads the Literal).
if TYPE_CHECKING:
    from inferplan.codesign.methods import TieBreak as TieBreakChoice
    from inferplan.codesign.timing.stage import NodeTimeModel, PerNodeTimeModel
    from inferplan.network.network import Network
    from inferplan.profiles.ideals import CutKind
    from inferplan.profiles.models import ModelOptions
    from inferplan.profiles.profile import Profile

    MethodChoice = str
    ProvisionMethodChoice = str
    ThroughputMethodChoice = str
else:
    MethodChoice = Literal[tuple(METHODS)]
    # provision takes the single-service methods and, with --services, the joint ones
    ProvisionMethodChoice = Literal[tuple(dict.fromkeys([*METHODS, *SERVICE_METHODS]))]
    ThroughputMethodChoice = Literal[tuple(throughput_methods())]
    TieBreakChoice = Literal[TIE_BREAKS]


def method_help(*, exact_only: bool = False) -> str:
    """The help of ``--method``: each method of the registry and what it is."""
    return "; ".join(
        f"{m.name}: {m.summary}" for m in METHODS.values() if m.exact or not exact_only
    )


def services_method_help() -> str:
    """What ``--method`` means with ``--services``: each method of the services' registry."""
    return "With --services: " + "; ".join(
        f"{m.name}: {m.summary}" for m in SERVICE_METHODS.values()
    )


def throughput_method_help() -> str:
    """The help of ``throughput --method``: each method that computes T* and where it works."""
    where = {True: "acyclic networks", False: "any network, cycles too"}
    return "How to find T*: " + "; ".join(
        f"{m.name} ({where[m.acyclic_only]})" for m in METHODS.values() if m.throughput
    )


# The options of a model named in place of a profile (those of ``inferplan profile``), by
# parameter: each command that plans for a profile takes them (:func:`with_model_options`).
MODEL_OPTIONS: dict[str, tuple[Any, Any]] = {
    "input_shapes": (InputShapesOpt, None),
    "blocks": (BlocksOpt, None),
    "granularity": (GranularityOpt, None),
    "dtype": (DtypeOpt, "float32"),
    "config": (ConfigOpt, None),
    "seq_len": (SeqLenOpt, None),
    "decode": (DecodeOpt, False),
}


def model_flags() -> dict[str, str]:
    """The flag of each of :data:`MODEL_OPTIONS`, by parameter (``input_shapes``:
    ``--input-shape``)."""
    return {name: typing.get_args(alias)[1].default for name, (alias, _) in MODEL_OPTIONS.items()}


def with_model_options(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` taking the options of a model named in place of a profile
    (:data:`MODEL_OPTIONS`) after its own, handed to it as one keyword ``model_options``
    (a :class:`~inferplan.profiles.models.ModelOptions`)."""
    signature = inspect.signature(command)
    # the command's annotations but ``model_options``'s (a name for type checkers only),
    # evaluated where the command was written
    shim = types.FunctionType(command.__code__, command.__globals__)
    shim.__annotations__ = {k: v for k, v in command.__annotations__.items()
                            if k not in ("model_options", "return")}  # fmt: skip
    hints = typing.get_type_hints(shim, include_extras=True)
    own = [p.replace(annotation=hints[p.name]) for p in signature.parameters.values()
           if p.name != "model_options"]  # fmt: skip
    added = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                               annotation=alias)
             for name, (alias, default) in MODEL_OPTIONS.items()]  # fmt: skip

    @functools.wraps(command)
    def with_options(*args: Any, **kwargs: Any) -> None:
        values = {name: kwargs.pop(name) for name in MODEL_OPTIONS}
        command(*args, model_options=_model_options(**values), **kwargs)

    params = [*own, *added]
    with_options.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    with_options.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return with_options


def _model_options(
    input_shapes: list[str] | None,
    blocks: str | None,
    granularity: str | None,
    dtype: str,
    config: list[str] | None,
    seq_len: int | None,
    decode: bool,
) -> ModelOptions:
    from inferplan.profiles.models import ModelOptions, TransformerOptions

    hf = TransformerOptions(config=tuple(config or ()), seq_len=seq_len, decode=decode)
    return ModelOptions(tuple(input_shapes or ()), blocks, dtype, "matrix", hf, granularity)


@contextmanager
def blame_network_file(path: Path) -> Iterator[None]:
    """Attribute errors about the network found while solving (a cycle, a cost the method
    cannot take) to the network file."""
    try:
        yield
    except (InvalidNetwork, InvalidArgument) as exc:
        about_network = isinstance(exc, InvalidNetwork) or (exc.field or "").startswith(
            ("node", "link")
        )
        if about_network:
            raise exc.located(str(path)) from None
        raise


def node_time_model(
    path: Path | None, net: Network, prof: Profile, cuts: CutKind | None
) -> tuple[NodeTimeModel | PerNodeTimeModel, CutKind | None]:
    """The node time model of ``--node-times`` (FLOPs over capacity without it) and the cuts
    to plan at: a chain's by default when the times are per block."""
    from inferplan.codesign.timing.stage import FLOPS_OVER_CAPACITY

    if path is None:
        return FLOPS_OVER_CAPACITY, cuts
    from inferplan.codesign.timing.file import load_measured_blocks

    if cuts == "graph":
        raise InvalidArgument("the times of --node-times are per block: plan at the chain's "
                              "cuts (leave out --cuts graph)", field="--cuts")  # fmt: skip
    return load_measured_blocks(path, net.node_ids, prof.n_blocks), "chain"
