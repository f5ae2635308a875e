"""Profile any PyTorch ``nn.Module`` from a sample input shape (optional extra ``torch``).

The module is traced with :mod:`torch.fx` and run once on the ``meta`` device: tensors have
shapes and dtypes but no storage, so even a large model costs no memory and almost no time.
FLOPs come from :class:`torch.utils.flop_counter.FlopCounterMode` (matrix products and
convolutions, 2 FLOPs per multiply-accumulate; elementwise work, normalisation and pooling are
not counted, as in the built-in profiles). Activation sizes are those of the tensors crossing
each cut, at their own dtype. Blocks are the top-level children by default, or modules at a
given depth, or the user's groups of module names; see :mod:`inferplan.profiles.cuts` for how
blocks become valid cuts.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch.fx import Interpreter, symbolic_trace
from torch.utils.flop_counter import FlopCounterMode

from inferplan.errors import InvalidProfile
from inferplan.profiles.cuts import (
    BlockSpec,
    GraphProfile,
    Operation,
    TensorInfo,
    build_profile,
    check_block_names,
    owner_of,
)

__all__ = ["load_module_factory", "profile_module", "profile_torch"]

Shape = tuple[int, ...]


def _dtype(name: str) -> Any:
    aliases = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16",
               "fp64": "float64", "double": "float64", "float": "float32"}  # fmt: skip
    dtype = getattr(torch, aliases.get(name.lower(), name.lower()), None)
    if not isinstance(dtype, torch.dtype):
        raise InvalidProfile(f"unknown dtype {name!r} (e.g. float32, float16, bfloat16, int64)",
                             field="dtype")  # fmt: skip
    return dtype


def _tensors(value: Any) -> Iterator[Any]:
    if isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    else:
        yield value


def _describe(name: str, value: Any, constant: bool) -> TensorInfo:
    if isinstance(value, torch.Tensor):
        bits = float(value.numel() * value.element_size() * 8)
        return TensorInfo(name, tuple(value.shape), str(value.dtype).removeprefix("torch."),
                          bits, constant)  # fmt: skip
    bits = 0.0
    for item in _tensors(value):
        if isinstance(item, torch.Tensor):
            bits += item.numel() * item.element_size() * 8
        elif isinstance(item, bool | int | float):
            bits += 64  # a Python scalar travels as one 64-bit number
    return TensorInfo(name, None, type(value).__name__, bits, constant)


def _example_inputs(inputs: Any, float_dtype: Any, input_dtypes: Sequence[str | None]) -> list[Any]:
    """Meta-device stand-ins for the inputs given as shapes or example tensors (see
    :func:`profile_module`)."""
    accepted = ("a shape per input, e.g. [(1, 3, 224, 224)], or example tensors "
                "(a tensor, or a list of them)")  # fmt: skip
    if isinstance(inputs, torch.Tensor):
        inputs = [inputs]
    elif (
        isinstance(inputs, tuple | list | torch.Size)
        and inputs
        and all(isinstance(d, int) and not isinstance(d, bool) for d in inputs)
    ):
        inputs = [tuple(inputs)]  # one shape
    if isinstance(inputs, tuple | list) and not inputs:
        raise InvalidProfile("give the shape of each input, or example tensors",
                             field="input_shapes")  # fmt: skip
    if not isinstance(inputs, tuple | list):
        raise InvalidProfile(f"expected {accepted}, got {type(inputs).__name__}",
                             field="input_shapes")  # fmt: skip
    kinds = [*input_dtypes, *[None] * len(inputs)]
    args = []
    for item, kind in zip(inputs, kinds, strict=False):
        if isinstance(item, torch.Tensor):
            shape = tuple(item.shape)
            floating = item.is_floating_point()
            item_dtype = _dtype(kind) if kind else (float_dtype if floating else item.dtype)
        elif (
            isinstance(item, tuple | list | torch.Size)
            and item
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in item)
        ):
            shape, item_dtype = tuple(item), _dtype(kind) if kind else float_dtype
        else:
            raise InvalidProfile(f"bad input {item!r}: expected {accepted}", field="input_shapes")
        args.append(torch.empty(shape, dtype=item_dtype, device="meta"))
    return args


def profile_module(
    module: Any,
    input_shapes: Sequence[Shape] | Sequence[Any] | Any,
    *,
    blocks: BlockSpec = None,
    dtype: str = "float32",
    input_dtypes: Sequence[str | None] = (),
    name: str | None = None,
) -> GraphProfile:
    """Profile ``module`` on inputs of the given shapes, without touching its weights.

    Parameters
    ----------
    module
        A ``torch.nn.Module`` (on any device; best built under ``torch.device("meta")``).
    input_shapes
        The positional inputs, as fvcore and torchinfo take them: one shape per input
        (``[(1, 3, 224, 224)]``, or one shape ``(1, 3, 224, 224)`` for a single input), or
        example tensors (a tensor, or a list of them; only their shapes and dtypes are used,
        floating-point ones in ``dtype``). Anything else is an :class:`InvalidProfile` saying
        what is accepted.
    blocks
        ``None`` for the top-level children, a depth, or groups of module names (one block per
        group); operations outside the listed modules join the block that made their input.
    dtype
        Floating-point dtype of the weights and activations.
    input_dtypes
        The dtype of each input where it is not ``dtype`` (e.g. ``"int64"`` for token ids).
    name
        The profile's name (the module's class name by default).

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    >>> result = profile_module(net, [(1, 8)])
    >>> result.profile.flops, result.profile.activation_bits
    ((64.0, 16.0), (256.0, 128.0, 64.0))
    >>> profile_module(net, torch.zeros(1, 8)).profile == result.profile  # an example tensor
    True
    """
    if not isinstance(module, torch.nn.Module):
        raise InvalidProfile(f"expected a torch.nn.Module, got {type(module).__name__}")
    float_dtype = _dtype(dtype)
    args = _example_inputs(input_shapes, float_dtype, input_dtypes)
    label = name or type(module).__name__

    try:
        graph_module = symbolic_trace(module)
    except Exception as exc:  # tracing raises anything the forward raises on proxies
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidProfile(f"cannot trace {label} with torch.fx: {first}") from None

    flops: dict[str, float] = {}
    results: dict[str, Any] = {}
    counter = FlopCounterMode(display=False)

    class _Recorder(Interpreter):
        def run_node(self, node: Any) -> Any:
            before = counter.get_total_flops()
            out = super().run_node(node)
            flops[node.name] = float(counter.get_total_flops() - before)
            results[node.name] = out
            return out

    class _Runner(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.graph_module = graph_module

        def forward(self, *inputs: Any) -> Any:
            return _Recorder(self.graph_module).run(*inputs)

    # Stand-ins on the meta device: the user's weights are never read, copied or moved.
    state = {
        f"graph_module.{key}": torch.empty_like(
            t, device="meta", dtype=float_dtype if t.is_floating_point() else t.dtype
        )
        for key, t in [*graph_module.named_parameters(), *graph_module.named_buffers()]
    }
    try:
        with counter:
            torch.func.functional_call(_Runner(), state, tuple(args), strict=False)
    except Exception as exc:  # any shape mismatch surfaces as some framework exception
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        shapes = " ".join("x".join(map(str, a.shape)) for a in args)
        raise InvalidProfile(f"{label} does not run on input shape {shapes}: {first}") from None

    return _assemble(graph_module, label, blocks, flops, results)


def _assemble(
    graph_module: Any,
    label: str,
    blocks: BlockSpec,
    flops: dict[str, float],
    results: dict[str, Any],
) -> GraphProfile:
    values: dict[str, TensorInfo] = {}
    ops: list[Operation] = []
    inputs: list[str] = []
    outputs: list[str] = []
    counted: set[int] = set()
    scopes: set[str] = set()

    def new_params(tensors: Sequence[Any]) -> int:
        total = 0
        for t in tensors:
            if isinstance(t, torch.nn.Parameter) and id(t) not in counted:
                counted.add(id(t))
                total += t.numel()
        return total

    for node in graph_module.graph.nodes:
        if node.op == "output":
            outputs.extend(n.name for n in node.all_input_nodes)
            continue
        values[node.name] = _describe(node.name, results.get(node.name),
                                      node.op == "get_attr")  # fmt: skip
        if node.op == "placeholder":
            inputs.append(node.name)
            continue
        stack = node.meta.get("nn_module_stack") or {}
        path = [qualified for qualified, _ in stack.values()]
        scopes.update(path)
        params = 0
        if node.op == "call_module":
            params = new_params(list(graph_module.get_submodule(node.target).parameters()))
        elif node.op == "get_attr":
            params = new_params([_attribute(graph_module, node.target)])
        ops.append(Operation(
            name=node.name,
            owner=owner_of(path, blocks),
            inputs=tuple(n.name for n in node.all_input_nodes),
            outputs=(node.name,),
            flops=flops.get(node.name, 0.0),
            params=params,
        ))  # fmt: skip
    check_block_names(blocks, scopes)
    if not scopes:  # a module without submodules is one block
        ops = [replace(op, owner=label) for op in ops]
    return build_profile(label, ops, values, inputs, outputs)


def _attribute(root: Any, target: str) -> Any:
    value = root
    for part in target.split("."):
        value = getattr(value, part)
    return value


def load_module_factory(spec: str, *, device: str = "meta") -> Any:
    """Build the module named by ``module.path:factory`` (or ``file.py:factory``) on ``device``.

    The factory is any callable returning an ``nn.Module`` (a class or a function); it runs under
    ``torch.device(device)``: on ``meta`` (the default, for profiling) no weights are allocated;
    on ``cpu`` the module gets real weights (seed ``torch`` first for reproducible ones).
    """
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr.isidentifier():
        raise InvalidProfile(f"expected module.path:factory, got {spec!r}")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            path = Path(module_name)
            if not path.is_file():
                raise InvalidProfile(f"file not found: {module_name}")
            loader = importlib.util.spec_from_file_location(path.stem, path)
            if loader is None or loader.loader is None:
                raise InvalidProfile(f"cannot load {module_name}")
            source = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(source)
        else:
            sys.path.insert(0, os.getcwd())
            try:
                source = importlib.import_module(module_name)
            finally:
                sys.path.remove(os.getcwd())
    except InvalidProfile:
        raise
    except Exception as exc:  # an import runs arbitrary code
        raise InvalidProfile(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}"
                             ) from None  # fmt: skip
    factory = getattr(source, attr, None)
    if factory is None:
        raise InvalidProfile(f"module {module_name!r} has no attribute {attr!r}")
    if isinstance(factory, torch.nn.Module):
        return factory
    if not callable(factory):
        raise InvalidProfile(f"{spec!r} is neither an nn.Module nor a callable")
    try:
        with torch.device(device):
            model = factory()
    except Exception as exc:  # the user's factory can raise anything
        raise InvalidProfile(f"factory {spec!r} failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(model, torch.nn.Module):
        raise InvalidProfile(f"factory {spec!r} returned {type(model).__name__}, not nn.Module")
    return model


def profile_torch(
    spec: str,
    input_shapes: Sequence[Shape],
    *,
    blocks: BlockSpec = None,
    dtype: str = "float32",
    input_dtypes: Sequence[str | None] = (),
) -> GraphProfile:
    """Profile the module built by ``module.path:factory``; see :func:`profile_module`."""
    model = load_module_factory(spec)
    name = spec.rpartition(":")[2]
    return profile_module(model, input_shapes, blocks=blocks, dtype=dtype,
                          input_dtypes=input_dtypes, name=name)  # fmt: skip
