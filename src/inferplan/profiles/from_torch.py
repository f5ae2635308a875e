"""Profile any PyTorch ``nn.Module`` from sample inputs (optional extra ``torch``).

The module is captured with :func:`torch.export.export` (non-strict) and run once on the
``meta`` device: tensors have shapes and dtypes but no storage, so even a large model costs no
memory and almost no time. FLOPs come from
:class:`torch.utils.flop_counter.FlopCounterMode` (matrix products and convolutions, 2 FLOPs per
multiply-accumulate; elementwise work, normalisation and pooling are not counted, as in the
built-in profiles). Each operation belongs to the modules recorded in the exported graph's
``nn_module_stack``. Activation sizes are those of the tensors crossing each cut, at their own
dtype. Blocks are the top-level children by default, or modules at a given depth, or the user's
groups of module names; see :mod:`inferplan.profiles.cuts` for how blocks become valid cuts.
``tracer="fx"`` uses :func:`torch.fx.symbolic_trace` instead, whose graph the runtime splits into
stages (:mod:`inferplan.runtime.split`).
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import torch
from torch.export.graph_signature import (
    ConstantArgument,
    InputKind,
    OutputKind,
    TensorArgument,
)
from torch.fx import Interpreter, symbolic_trace
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
from torch.utils.flop_counter import FlopCounterMode

from inferplan.errors import InvalidProfile
from inferplan.profiles.cuts import (
    BlockSpec,
    Granularity,
    GraphProfile,
    Operation,
    TensorInfo,
    build_profile,
    check_block_names,
    check_elements,
    check_factory,
    free_containers,
    module_path,
    owner_of,
)

__all__ = [
    "ExportedGraph",
    "export_graph",
    "fx_trace",
    "load_module_factory",
    "profile_module",
    "profile_torch",
    "torch_dtype",
]

Shape = tuple[int, ...]
Tracer = Literal["export", "fx"]


def torch_dtype(name: str) -> Any:
    """The ``torch.dtype`` named ``name`` (``float32``, ``fp16``, ``bf16``, ``int64``, ...)."""
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _stand_in(item: Any, kind: str | None, float_dtype: Any, accepted: str) -> Any:
    """A meta-device tensor for one input given as a shape or an example tensor."""
    if isinstance(item, torch.Tensor):
        floating = item.is_floating_point()
        item_dtype = torch_dtype(kind) if kind else (float_dtype if floating else item.dtype)
        return torch.empty(tuple(item.shape), dtype=item_dtype, device="meta")
    if (
        isinstance(item, tuple | list | torch.Size)
        and item
        and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in item)
    ):
        check_elements(tuple(item), "input_shapes")
        item_dtype = torch_dtype(kind) if kind else float_dtype
        return torch.empty(tuple(item), dtype=item_dtype, device="meta")
    raise InvalidProfile(f"bad input {item!r}: expected {accepted}", field="input_shapes")


def _example_inputs(
    inputs: Any, float_dtype: Any, input_dtypes: Sequence[str | None]
) -> tuple[list[Any], dict[str, Any]]:
    """Meta-device stand-ins for the positional and keyword inputs given as shapes or example
    tensors (see :func:`profile_module`)."""
    accepted = ("a shape per input, e.g. [(1, 3, 224, 224)], example tensors (a tensor, or a "
                "list of them), or keyword inputs {name: shape or tensor}")  # fmt: skip
    if isinstance(inputs, torch.Tensor):
        inputs = [inputs]
    elif (
        isinstance(inputs, tuple | list | torch.Size)
        and inputs
        and all(isinstance(d, int) and not isinstance(d, bool) for d in inputs)
    ):
        inputs = [tuple(inputs)]  # one shape
    if isinstance(inputs, tuple | list | Mapping) and not inputs:
        raise InvalidProfile("give the shape of each input, or example tensors",
                             field="input_shapes")  # fmt: skip
    if isinstance(inputs, Mapping):
        if not all(isinstance(key, str) and key.isidentifier() for key in inputs):
            raise InvalidProfile(f"keyword inputs need names, got {list(inputs)!r}",
                                 field="input_shapes")  # fmt: skip
        kinds = [*input_dtypes, *[None] * len(inputs)]
        return [], {key: _stand_in(item, kind, float_dtype, accepted)
                    for (key, item), kind in zip(inputs.items(), kinds, strict=False)}  # fmt: skip
    if not isinstance(inputs, tuple | list):
        raise InvalidProfile(f"expected {accepted}, got {type(inputs).__name__}",
                             field="input_shapes")  # fmt: skip
    kinds = [*input_dtypes, *[None] * len(inputs)]
    return [_stand_in(item, kind, float_dtype, accepted)
            for item, kind in zip(inputs, kinds, strict=False)], {}  # fmt: skip


def _shapes_text(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """The shapes of the tensor inputs (keyword inputs that are not tensors, such as a flag,
    are left out)."""
    parts = ["x".join(map(str, a.shape)) for a in args if isinstance(a, torch.Tensor)]
    parts += [f"{key}={'x'.join(map(str, a.shape))}" for key, a in kwargs.items()
              if isinstance(a, torch.Tensor)]  # fmt: skip
    return " ".join(parts)


def profile_module(
    module: Any,
    input_shapes: Sequence[Shape] | Sequence[Any] | Mapping[str, Any] | Any,
    *,
    blocks: BlockSpec = None,
    dtype: str = "float32",
    input_dtypes: Sequence[str | None] = (),
    name: str | None = None,
    tracer: Tracer = "export",
    granularity: Granularity = "blocks",
) -> GraphProfile:
    """Profile ``module`` on inputs of the given shapes, without touching its weights.

    Parameters
    ----------
    module
        A ``torch.nn.Module`` (on any device; best built under ``torch.device("meta")``).
    input_shapes
        The inputs, as fvcore and torchinfo take them: one shape per positional input
        (``[(1, 3, 224, 224)]``, or one shape ``(1, 3, 224, 224)`` for a single input), example
        tensors (a tensor, or a list of them), or keyword inputs as a mapping from name to shape
        or example tensor (``{"input_ids": ids, "attention_mask": mask}``). Only shapes and
        dtypes are used, floating-point ones in ``dtype``. Anything else is an
        :class:`InvalidProfile` saying what is accepted.
    blocks
        ``None`` for the top-level children, a depth, or groups of module names (one block per
        group); operations outside the listed modules join the block that made their input.
    dtype
        Floating-point dtype of the weights and activations.
    input_dtypes
        The dtype of each input (in order, keyword inputs too) where it is not ``dtype`` (e.g.
        ``"int64"`` for token ids given as a shape).
    name
        The profile's name (the module's class name by default).
    tracer
        ``"export"`` (:func:`torch.export.export`, the default) or ``"fx"``
        (:func:`torch.fx.symbolic_trace`, positional inputs only; the graph the runtime splits).
        Both count the same FLOPs; a forward whose control flow depends on tensor values fails
        with either, with a line saying so.
    granularity
        What a layer of the profile's layer graph is (:data:`~inferplan.profiles.cuts.
        Granularity`): the blocks' own modules (the default), every innermost module, every
        operation, or the modules at a depth.

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    >>> result = profile_module(net, [(1, 8)])
    >>> result.profile.flops, result.profile.activation_bits
    ((64.0, 16.0), (256.0, 128.0, 64.0))
    >>> profile_module(net, torch.zeros(1, 8)).profile == result.profile  # an example tensor
    True
    >>> profile_module(net, {"input": (1, 8)}).profile == result.profile  # a keyword input
    True
    """
    if not isinstance(module, torch.nn.Module):
        raise InvalidProfile(f"expected a torch.nn.Module, got {type(module).__name__}")
    if tracer not in ("export", "fx"):
        raise InvalidProfile(f"must be 'export' or 'fx', got {tracer!r}", field="tracer")
    float_dtype = torch_dtype(dtype)
    args, kwargs = _example_inputs(input_shapes, float_dtype, input_dtypes)
    label = name or type(module).__name__
    if tracer == "fx":
        if kwargs:
            raise InvalidProfile("tracer='fx' takes positional inputs only", field="input_shapes")
        return _profile_fx(module, args, float_dtype, label, blocks, granularity)
    graph = export_graph(module, args, kwargs, float_dtype=float_dtype, label=label)
    return graph.profile(label, lambda path: owner_of(path, blocks), blocks,
                         granularity=granularity)  # fmt: skip


def fx_trace(module: Any) -> Any:
    """``module`` traced by :func:`torch.fx.symbolic_trace`, its calls of ``nn.Identity``
    dropped (each use reads the identity's input): ``torch.export`` drops them too, so both
    front ends give the same layer graph, and a plan made on one runs on the other's split.

    Raises
    ------
    Exception
        Whatever tracing raises (the forward's errors on proxies).
    """
    graph_module = symbolic_trace(module)
    graph = graph_module.graph
    for node in list(graph.nodes):
        if node.op == "call_module" and isinstance(
            graph_module.get_submodule(node.target), torch.nn.Identity
        ) and len(node.args) == 1 and not node.kwargs:  # fmt: skip
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
    graph_module.recompile()
    return graph_module


def _profile_fx(
    module: Any,
    args: list[Any],
    float_dtype: Any,
    label: str,
    blocks: BlockSpec,
    granularity: Granularity = "blocks",
) -> GraphProfile:
    try:
        graph_module = fx_trace(module)
    except Exception as exc:  # tracing raises anything the forward raises on proxies
        raise InvalidProfile(f"cannot trace {label} with torch.fx: {_first_line(exc)}") from None

    flops: dict[str, float] = {}
    results: dict[str, Any] = {}
    counter = FlopCounterMode(display=False)

    class _Runner(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.graph_module = graph_module

        def forward(self, *inputs: Any) -> Any:
            return _Recorder(self.graph_module, counter, flops, results).run(*inputs)

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
        raise InvalidProfile(f"{label} does not run on input shape {_shapes_text(args, {})}: "
                             f"{_first_line(exc)}") from None  # fmt: skip

    return _assemble_fx(graph_module, label, blocks, flops, results, float_dtype, granularity)


class _Recorder(Interpreter):
    """Runs a graph, recording each node's result and the FLOPs the counter saw it do."""

    def __init__(self, graph_module: Any, counter: Any, flops: dict[str, float],
                 results: dict[str, Any]) -> None:  # fmt: skip
        super().__init__(graph_module)
        self.counter, self.flops, self.results = counter, flops, results

    def run_node(self, node: Any) -> Any:
        before = self.counter.get_total_flops()
        out = super().run_node(node)
        self.flops[node.name] = float(self.counter.get_total_flops() - before)
        self.results[node.name] = out
        return out


def _assemble_fx(
    graph_module: Any,
    label: str,
    blocks: BlockSpec,
    flops: dict[str, float],
    results: dict[str, Any],
    float_dtype: Any,
    granularity: Granularity = "blocks",
) -> GraphProfile:
    values: dict[str, TensorInfo] = {}
    ops: list[Operation] = []
    inputs: list[str] = []
    outputs: list[str] = []
    counted: set[int] = set()
    scopes: set[str] = set()
    param_bytes = [0]

    def new_params(tensors: Sequence[Any]) -> int:
        total = 0
        for t in tensors:
            if isinstance(t, torch.nn.Parameter) and id(t) not in counted:
                counted.add(id(t))
                total += t.numel()
                size = float_dtype.itemsize if t.is_floating_point() else t.element_size()
                param_bytes[0] += t.numel() * size  # floating weights ran in float_dtype
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
        path = _module_path(node)
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
            path=tuple(path),
        ))  # fmt: skip
    check_block_names(blocks, scopes)
    if not scopes:  # a module without submodules is one block
        ops = [replace(op, owner=label) for op in ops]
    count = sum(op.params for op in ops)
    per = param_bytes[0] / count if count else 4.0
    return build_profile(label, free_containers(ops, blocks), values, inputs, outputs,
                         bytes_per_param=per, granularity=granularity)  # fmt: skip


def _module_path(node: Any) -> list[str]:
    """The qualified names of the modules an operation runs in, outermost first."""
    stack = node.meta.get("nn_module_stack") or {}
    return module_path([qualified for qualified, _ in stack.values()])


def _attribute(root: Any, target: str) -> Any:
    value = root
    for part in target.split("."):
        value = getattr(value, part)
    return value


@dataclass(frozen=True)
class ExportedGraph:
    """A module captured by :func:`export_graph` and run once on the meta device.

    Attributes
    ----------
    graph
        The exported ``torch.fx.Graph`` (ATen operations, weights as inputs).
    flops
        FLOPs of each operation, by node name, as ``FlopCounterMode`` counted them.
    values
        What each node holds (shape, dtype, bits); weights and constants are ``constant``.
    params
        Parameter count of each parameter input, by node name.
    inputs, outputs
        The model's tensor inputs and outputs, by node name.
    state
        Inputs that stay with the block using them (a KV cache), by node name.
    """

    graph: Any
    flops: Mapping[str, float]
    values: Mapping[str, TensorInfo]
    params: Mapping[str, int]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    state: frozenset[str]

    def module_order(self) -> list[str]:
        """Every module that runs an operation, in order of its first operation."""
        order: dict[str, None] = {}
        for node in self.graph.nodes:
            order.update(dict.fromkeys(_module_path(node)))
        return list(order)

    def profile(
        self,
        label: str,
        owner: Callable[[list[str]], str | None],
        blocks: BlockSpec = None,
        warnings: Sequence[str] = (),
        *,
        granularity: Granularity = "blocks",
    ) -> GraphProfile:
        """The valid-cut profile with each operation in the block ``owner(module path)`` names
        (``blocks``, if groups, are checked to own something), its layer graph at
        ``granularity``."""
        ops: list[Operation] = []
        scopes: set[str] = set()
        counted: set[str] = set()
        for node in self.graph.nodes:
            if node.op in ("placeholder", "output"):
                continue
            path = _module_path(node)
            scopes.update(path)
            weights = [n.name for n in node.all_input_nodes
                       if n.name in self.params and n.name not in counted]  # fmt: skip
            counted.update(weights)
            ops.append(Operation(
                name=node.name,
                owner=owner(path),
                inputs=tuple(n.name for n in node.all_input_nodes),
                outputs=(node.name,),
                flops=self.flops.get(node.name, 0.0),
                params=sum(self.params[w] for w in weights),
                path=tuple(path),
            ))  # fmt: skip
        check_block_names(blocks, scopes)
        if not scopes:  # a module without submodules is one block
            ops = [replace(op, owner=label) for op in ops]
        return build_profile(label, free_containers(ops, blocks), self.values, self.inputs,
                             self.outputs, warnings, state=self.state,
                             bytes_per_param=self.bytes_per_param,
                             granularity=granularity)  # fmt: skip

    @property
    def bytes_per_param(self) -> float:
        """Bytes per parameter of the model, from its parameters' dtypes (4 without any)."""
        count = sum(self.params.values())
        bits = sum(self.values[name].bits or 0.0 for name in self.params)
        return bits / 8 / count if count and bits else 4.0


def _meta_module(module: Any, float_dtype: Any) -> Any:
    """``module`` itself if its weights are already meta tensors of the right dtypes, else a
    copy whose weights are (the original's weights are never read, copied or moved)."""
    tensors = [*module.parameters(), *module.buffers()]

    def wanted(t: Any) -> Any:
        return float_dtype if t.is_floating_point() else t.dtype

    if all(t.is_meta and t.dtype == wanted(t) for t in tensors):
        return module
    memo: dict[int, Any] = {}
    for t in tensors:
        stand_in = torch.empty_like(t, device="meta", dtype=wanted(t))
        if isinstance(t, torch.nn.Parameter):
            stand_in = torch.nn.Parameter(stand_in, requires_grad=t.requires_grad)
        memo.setdefault(id(t), stand_in)  # a tied weight stays tied
    try:
        return copy.deepcopy(module, memo)
    except Exception as exc:  # deepcopy raises whatever an attribute's __deepcopy__ raises
        raise InvalidProfile(f"cannot copy {type(module).__name__} onto the meta device "
                             f"({_first_line(exc)}): build it under torch.device('meta')"
                             ) from None  # fmt: skip


def _is_cache(spec: Any) -> bool:
    # transformers' rule for cache objects: a class named ...Cache
    return isinstance(spec.type, type) and spec.type.__name__.endswith("Cache")


def _state_leaves(spec: Any, inside: bool = False) -> list[bool]:
    """For each leaf of a pytree spec, whether it lies inside a cache object."""
    inside = inside or _is_cache(spec)
    if spec.is_leaf():
        return [inside]
    return [flag for child in spec.children() for flag in _state_leaves(child, inside)]


def export_graph(
    module: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    float_dtype: Any,
    label: str,
) -> ExportedGraph:
    """Capture ``module`` with :func:`torch.export.export` on meta-device inputs and count the
    FLOPs of each operation with ``FlopCounterMode``.

    Inputs and outputs inside a cache object (a class named ``...Cache``, as ``transformers``
    names its KV caches) are *state*: an input stays with the block that first uses it, an
    output (the updated cache) stays where it is made.
    """
    meta = _meta_module(module, float_dtype)
    was_training = meta.training
    meta.eval()
    # torch logs the stack of an operation that fails on fake tensors (a storage size that
    # overflows, ...) before raising it: the error below says it in one line
    fake = logging.getLogger("torch._subclasses.fake_tensor")
    level = fake.level
    fake.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():  # advice to the model's author (register_buffer, ...)
            warnings.simplefilter("ignore", UserWarning)
            program = torch.export.export(meta, tuple(args), dict(kwargs), strict=False)
    except GuardOnDataDependentSymNode:
        raise InvalidProfile(
            f"cannot export {label} with torch.export: its forward branches on the value of a "
            "tensor (data-dependent control flow), which no graph capture can follow; rewrite "
            "the branch with torch.cond or move it out of forward"
        ) from None
    except InvalidProfile:
        raise
    except Exception as exc:  # export surfaces the forward's own errors, of any type
        raise InvalidProfile(f"{label} does not run on input shape {_shapes_text(args, kwargs)}"
                             f": {_first_line(exc)}") from None  # fmt: skip
    finally:
        fake.setLevel(level)
        meta.train(was_training)

    signature = program.graph_signature
    kinds = {spec.arg.name: spec for spec in signature.input_specs
             if isinstance(spec.arg, TensorArgument)}  # fmt: skip
    fixed = {spec.arg.name: spec.arg.value for spec in signature.input_specs
             if isinstance(spec.arg, ConstantArgument)}  # fmt: skip
    user = [spec.arg for spec in signature.input_specs if spec.kind == InputKind.USER_INPUT]
    in_state = _state_leaves(program.call_spec.in_spec)
    state = {arg.name for arg, flag in zip(user, in_state, strict=False)
             if flag and isinstance(arg, TensorArgument)}  # fmt: skip
    user_out = [spec.arg for spec in signature.output_specs if spec.kind == OutputKind.USER_OUTPUT]
    out_state = _state_leaves(program.call_spec.out_spec)
    outputs = tuple(arg.name for arg, flag in zip(user_out, out_state, strict=False)
                    if not flag and isinstance(arg, TensorArgument))  # fmt: skip

    graph = program.graph_module.graph
    feed = []
    for node in graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            feed.append(torch.empty_strided(val.shape, val.stride(), dtype=val.dtype,
                                            device="meta"))  # fmt: skip
        else:  # a Python constant the forward was called with (use_cache=True, ...)
            feed.append(fixed.get(node.name, val))
    flops: dict[str, float] = {}
    results: dict[str, Any] = {}
    counter = FlopCounterMode(display=False)
    try:
        with counter:
            _Recorder(program.graph_module, counter, flops, results).run(*feed)
    except Exception as exc:  # the exported graph ran once already; any failure is torch's
        raise InvalidProfile(f"cannot run the exported graph of {label}: {_first_line(exc)}"
                             ) from None  # fmt: skip

    constant_kinds = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
    values = {}
    params = {}
    for node in graph.nodes:
        if node.op == "output":
            continue
        spec = kinds.get(node.name)
        constant = spec is not None and spec.kind in constant_kinds
        values[node.name] = _describe(node.name, results.get(node.name), constant)
        if spec is not None and spec.kind == InputKind.PARAMETER:
            params[node.name] = int(results[node.name].numel())
    inputs = tuple(arg.name for arg in user
                   if isinstance(arg, TensorArgument) and arg.name not in state)  # fmt: skip
    return ExportedGraph(graph, flops, values, params, inputs, outputs, frozenset(state))


def load_module_factory(spec: str, *, device: str = "meta") -> Any:
    """Build the module named by ``module.path:factory`` (or ``file.py:factory``) on ``device``.

    The factory is any callable returning an ``nn.Module`` (a class or a function); it runs under
    ``torch.device(device)``: on ``meta`` (the default, for profiling) no weights are allocated;
    on ``cpu`` the module gets real weights (seed ``torch`` first for reproducible ones).
    """
    module_name, attr = check_factory(spec)
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
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
    except (Exception, SystemExit) as exc:  # an import runs arbitrary code, exit() included
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
    except (Exception, SystemExit) as exc:  # the user's factory can raise anything
        raise InvalidProfile(f"factory {spec!r} failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(model, torch.nn.Module):
        raise InvalidProfile(f"factory {spec!r} returned {type(model).__name__}, not nn.Module")
    return model


def profile_torch(
    spec: str,
    input_shapes: Sequence[Shape] | Mapping[str, Shape],
    *,
    blocks: BlockSpec = None,
    dtype: str = "float32",
    input_dtypes: Sequence[str | None] = (),
    granularity: Granularity = "blocks",
) -> GraphProfile:
    """Profile the module built by ``module.path:factory``; see :func:`profile_module`."""
    model = load_module_factory(spec)
    name = spec.rpartition(":")[2]
    return profile_module(model, input_shapes, blocks=blocks, dtype=dtype,
                          input_dtypes=input_dtypes, name=name,
                          granularity=granularity)  # fmt: skip
