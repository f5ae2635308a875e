"""Profile an ONNX model (optional extra ``onnx``; torch is not needed).

ONNX shape inference gives every tensor's shape; a FLOP formula per operator type gives the work.
Two counts are kept for each operator: *matrix* FLOPs (Conv, ConvTranspose, Gemm, MatMul and the
two products of Attention; 2 per multiply-accumulate, the convention of the built-in profiles and
of PyTorch's ``FlopCounterMode``) and *other* FLOPs (pooling, normalisation, elementwise,
softmax, reductions; estimates per element). ``flops="matrix"`` (the default) profiles the first,
``flops="all"`` their sum. Operators without a formula are named in the result's warnings, never
silently counted as zero.

Blocks follow the module scopes exporters record: PyTorch's current exporter
(``torch.onnx.export(..., dynamo=True)``) in each node's metadata
(``pkg.torch.onnx.name_scopes``), its older one in node names (``/layer1/layer1.0/Add`` is
inside ``layer1`` and ``layer1.0``). Top-level scopes by default, a depth, or groups of scope
names. A graph with neither has one candidate block per node. See
:mod:`inferplan.profiles.cuts` for how blocks become valid cuts.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import onnx
from onnx import TensorProto, shape_inference

from inferplan.documents import read_bytes
from inferplan.errors import InvalidFile, InvalidProfile
from inferplan.profiles.cuts import (
    BlockSpec,
    Granularity,
    GraphProfile,
    Operation,
    TensorInfo,
    build_profile,
    check_block_names,
    free_containers,
    module_path,
    owner_of,
)

__all__ = ["profile_onnx"]

Shape = tuple[int, ...]
Shapes = list[Shape | None]
Formula = Callable[[Any, Shapes, Shapes], tuple[float, float]]


def _numel(shape: Shape | None) -> float:
    if shape is None:
        raise _Unsized
    return float(math.prod(shape))


class _Unsized(Exception):
    """A shape the formula needs is unknown."""


def _attr(node: Any, name: str, default: Any) -> Any:
    """The node's attribute ``name``, of the kind of ``default`` (an integer or a list of
    integers): another kind is a ``ValueError`` (a malformed node)."""
    for attribute in node.attribute:
        if attribute.name == name:
            value = onnx.helper.get_attribute_value(attribute)
            integers = isinstance(value, list) and all(isinstance(v, int) for v in value)
            if isinstance(default, list) and not integers:
                raise ValueError(f"attribute {name} must be integers, got {value!r}")
            if isinstance(default, int) and not isinstance(value, int):
                raise ValueError(f"attribute {name} must be an integer, got {value!r}")
            return value
    return default


def _conv(node: Any, ins: Shapes, outs: Shapes) -> tuple[float, float]:
    weight = ins[1]
    return 2 * _numel(outs[0]) * _numel(weight[1:] if weight else None), 0.0


def _conv_transpose(node: Any, ins: Shapes, outs: Shapes) -> tuple[float, float]:
    weight = ins[1]
    return 2 * _numel(ins[0]) * _numel(weight[1:] if weight else None), 0.0


def _gemm(node: Any, ins: Shapes, outs: Shapes) -> tuple[float, float]:
    a = ins[0]
    if a is None:
        raise _Unsized
    inner = a[0] if _attr(node, "transA", 0) else a[1]
    return 2 * _numel(outs[0]) * inner, 0.0


def _matmul(node: Any, ins: Shapes, outs: Shapes) -> tuple[float, float]:
    a = ins[0]
    if not a:
        raise _Unsized
    return 2 * _numel(outs[0]) * a[-1], 0.0


def _attention(node: Any, ins: Shapes, outs: Shapes) -> tuple[float, float]:
    q, k, out = ins[0], ins[1], outs[0]
    if q is None or k is None or out is None:
        raise _Unsized
    if len(q) == 4:  # (batch, heads, queries, head size)
        scores = q[0] * q[1] * q[2] * k[2]
        return 2.0 * scores * (q[3] + out[3]), 3.0 * scores
    heads = _attr(node, "q_num_heads", 1)
    scores = q[0] * q[1] * k[1]
    return 2.0 * scores * (q[2] + out[2]), 3.0 * scores * heads


def _recurrent(node: Any, ins: Shapes, outs: Shapes) -> tuple[float, float]:
    """LSTM, GRU, RNN: each step multiplies the input by ``W`` and the hidden state by ``R``
    (``gates * hidden`` rows each), per direction."""
    x, w, r = [*ins, None, None, None][:3]
    if x is None or w is None or r is None:
        raise _Unsized
    seq, batch = (x[1], x[0]) if _attr(node, "layout", 0) else (x[0], x[1])
    directions, rows = w[0], w[1]
    return 2.0 * seq * batch * directions * rows * (w[2] + r[2]), 0.0


def _per_output(cost: float) -> Formula:
    return lambda node, ins, outs: (0.0, cost * _numel(outs[0]))


def _per_input(cost: float) -> Formula:
    return lambda node, ins, outs: (0.0, cost * _numel(ins[0]))


def _pool(node: Any, ins: Shapes, outs: Shapes) -> tuple[float, float]:
    return 0.0, _numel(outs[0]) * math.prod(_attr(node, "kernel_shape", [1]))


def _free(node: Any, ins: Shapes, outs: Shapes) -> tuple[float, float]:
    return 0.0, 0.0


ELEMENTWISE = """Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift Ceil Celu Clip Cos Cosh
Div Elu Equal Erf Exp Floor Gelu Greater GreaterOrEqual HardSigmoid HardSwish IsInf IsNaN LeakyRelu
Less LessOrEqual Log Max Mean Min Mish Mod Mul Neg Not Or Pow PRelu Reciprocal Relu Round Selu
Sigmoid Sign Sin Sinh Softplus Softsign Sqrt Sub Sum Tan Tanh ThresholdedRelu Where Xor"""
REDUCTIONS = """ArgMax ArgMin CumSum ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax
ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare TopK"""
DATA_MOVEMENT = """Cast CastLike Compress Concat Constant ConstantOfShape DepthToSpace Dropout
Expand EyeLike Flatten Gather GatherElements GatherND Identity NonZero OneHot Pad Range Reshape
ScatterElements ScatterND Shape Size Slice SpaceToDepth Split Squeeze Tile Transpose Trilu
Unsqueeze"""

MATRIX_OPERATORS = frozenset(
    ["Conv", "ConvTranspose", "Gemm", "MatMul", "Attention", "LSTM", "GRU", "RNN"]
)
"""The operators with matrix FLOPs (the default count)."""

FORMULAS: dict[str, Formula] = {
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "Gemm": _gemm,
    "MatMul": _matmul,
    "Attention": _attention,
    "LSTM": _recurrent,
    "GRU": _recurrent,
    "RNN": _recurrent,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "LpPool": _pool,
    "GlobalAveragePool": _per_input(1),
    "GlobalMaxPool": _per_input(1),
    "GlobalLpPool": _per_input(2),
    "BatchNormalization": _per_output(2),
    "LayerNormalization": _per_output(5),
    "InstanceNormalization": _per_output(5),
    "GroupNormalization": _per_output(5),
    "RMSNormalization": _per_output(4),
    "LpNormalization": _per_output(3),
    "Softmax": _per_output(3),
    "LogSoftmax": _per_output(3),
    "Resize": _per_output(1),
    **dict.fromkeys(ELEMENTWISE.split(), _per_output(1)),
    **dict.fromkeys(REDUCTIONS.split(), _per_input(1)),
    **dict.fromkeys(DATA_MOVEMENT.split(), _free),
}
"""``op_type -> (node, input shapes, output shapes) -> (matrix FLOPs, other FLOPs)``."""


def _shape(value_type: Any) -> Shape | None:
    tensor = value_type.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor.shape.dim]
    return tuple(dims) if all(d > 0 for d in dims) or not dims else None


def _element_bits(elem_type: int) -> int | None:
    try:
        return int(onnx.helper.tensor_dtype_to_np_dtype(elem_type).itemsize * 8)
    except (KeyError, TypeError, ValueError):
        return None


def _shapes_of(shapes: Sequence[Shape | None]) -> str:
    shown = ["?" if s is None else "x".join(map(str, s)) or "scalar" for s in shapes]
    return "[" + ", ".join(shown) + "]"


def _scopes(name: str) -> list[str]:
    """Qualified module names enclosing a node named ``/layer1/layer1.0/conv1/Conv``."""
    path: list[str] = []
    for part in [p for p in name.split("/") if p][:-1]:
        if path and not part.startswith(path[-1] + "."):
            part = f"{path[-1]}.{part}"
        path.append(part)
    return path


_NAME_SCOPES = "pkg.torch.onnx.name_scopes"
MAX_METADATA_CHARS = 65_536
"""The longest scope record read (a module path is a few hundred characters); a longer one is
not read, and Python's parser refuses one nested deeper than 200 brackets."""


def _recorded_scopes(node: Any) -> list[str] | None:
    """The modules enclosing a node as the dynamo exporter records them in its metadata
    (``['', 'layer1', 'layer1.0', 'conv2d']``: the root, the modules, the operation), or
    ``None`` if the node has no such record."""
    for prop in node.metadata_props:
        if prop.key == _NAME_SCOPES:
            text = prop.value
            if len(text) > MAX_METADATA_CHARS:
                return None
            try:
                scopes = ast.literal_eval(text)
            except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError):
                return None
            if isinstance(scopes, list) and all(isinstance(x, str) for x in scopes):
                return module_path(scopes[:-1])
    return None


def _load(model: str | Path | onnx.ModelProto) -> tuple[onnx.ModelProto, str | None]:
    if isinstance(model, onnx.ModelProto):
        return model, None
    source = str(model)
    try:
        raw = read_bytes(source)
    except InvalidFile as exc:
        raise InvalidProfile(exc.message, source=source) from None
    try:
        return onnx.load_model_from_string(raw), source
    except Exception as exc:  # protobuf raises several unrelated types
        raise InvalidProfile(f"not a readable ONNX model ({type(exc).__name__})",
                             source=source) from None  # fmt: skip


def _without_weight_data(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose large initializers keep their shape but drop their values.

    Shape inference serialises the whole model; weights are useless to it (small constants such
    as the target shape of a ``Reshape`` are kept, since inference may read them).
    """
    light = onnx.ModelProto()
    graph = proto.graph
    light.CopyFrom(onnx.ModelProto(ir_version=proto.ir_version, opset_import=proto.opset_import,
                                   functions=proto.functions))  # fmt: skip
    light.graph.CopyFrom(onnx.GraphProto(
        name=graph.name, node=graph.node, input=graph.input, output=graph.output,
        value_info=graph.value_info, sparse_initializer=graph.sparse_initializer,
    ))  # fmt: skip
    for tensor in graph.initializer:
        if math.prod(tensor.dims) <= _SMALL:
            light.graph.initializer.append(tensor)
        else:
            light.graph.initializer.append(
                onnx.TensorProto(name=tensor.name, dims=tensor.dims, data_type=tensor.data_type)
            )
    return light


_SMALL = 4096


def profile_onnx(
    model: str | Path | onnx.ModelProto,
    *,
    input_shapes: Sequence[Shape] = (),
    blocks: BlockSpec = None,
    flops: Literal["matrix", "all"] = "matrix",
    name: str | None = None,
    granularity: Granularity = "blocks",
) -> GraphProfile:
    """Profile an ONNX model (a path or a loaded ``ModelProto``); weights are never read.

    Parameters
    ----------
    model
        The ``.onnx`` file or model.
    input_shapes
        Concrete shapes for the graph inputs, in order; needed where the file leaves a dimension
        symbolic (a dynamic batch size, say).
    blocks
        ``None`` for top-level scopes, a depth, or groups of scope names.
    flops
        ``"matrix"`` (convolutions and matrix products) or ``"all"`` (every formula).
    name
        The profile's name (the graph's, or the file's stem, by default).
    granularity
        What a layer of the layer graph is, as for
        :func:`~inferplan.profiles.from_torch.profile_module` (``"modules"`` and depths by
        the scopes the exporter recorded; ``"ops"``: every node).
    """
    proto, source = _load(model)
    proto = _without_weight_data(proto)
    try:
        return _profile(proto, source, input_shapes, blocks, flops, name, granularity)
    except InvalidProfile as exc:
        raise (exc.located(source) if source else exc) from None


def _profile(
    proto: onnx.ModelProto,
    source: str | None,
    input_shapes: Sequence[Shape],
    blocks: BlockSpec,
    flops: str,
    name: str | None,
    granularity: Granularity = "blocks",
) -> GraphProfile:
    if flops not in ("matrix", "all"):
        raise InvalidProfile(f"must be 'matrix' or 'all', got {flops!r}", field="flops")
    graph = proto.graph
    weights = {t.name: t for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in weights]
    if input_shapes and len(input_shapes) != len(inputs):
        raise InvalidProfile(f"the model has {len(inputs)} input(s), got {len(input_shapes)} "
                             "shapes", field="input_shapes")  # fmt: skip
    for value, given in zip(inputs, input_shapes, strict=False):
        dims = value.type.tensor_type.shape.dim
        if len(dims) != len(given):
            raise InvalidProfile(f"input {value.name!r} has {len(dims)} dimensions, got shape "
                                 f"{'x'.join(map(str, given))}", field="input_shapes")  # fmt: skip
        for dim, size in zip(dims, given, strict=True):
            dim.Clear()
            dim.dim_value = size
    for value in inputs:
        if _shape(value.type) is None:
            raise InvalidProfile(f"input {value.name!r} has a symbolic or unknown dimension; "
                                 "give its shape", field="input_shapes")  # fmt: skip
    try:
        inferred = shape_inference.infer_shapes(proto, data_prop=True)
    except Exception as exc:  # onnx raises its own and protobuf errors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidProfile(f"ONNX shape inference failed: {first}") from None
    graph = inferred.graph

    values: dict[str, TensorInfo] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        shape = _shape(value.type)
        per = _element_bits(value.type.tensor_type.elem_type)
        bits = None if shape is None or per is None else float(math.prod(shape) * per)
        elem_type = value.type.tensor_type.elem_type
        try:
            dtype = onnx.TensorProto.DataType.Name(elem_type).lower()
        except ValueError:
            raise InvalidProfile(f"value {value.name!r} has an unknown element type "
                                 f"({elem_type})", source=source) from None  # fmt: skip
        values[value.name] = TensorInfo(value.name, shape, dtype, bits)
    for t in graph.initializer:
        values[t.name] = TensorInfo(t.name, tuple(t.dims), "weight", None, constant=True)

    recorded = [_recorded_scopes(node) for node in graph.node]
    from_metadata = any(path for path in recorded)
    scoped = any("/" in node.name for node in graph.node)
    ops: list[Operation] = []
    missing: dict[str, int] = {}
    unsized: dict[str, int] = {}
    counted: set[str] = set()
    param_bits = 0  # of the weights counted, by their dtypes
    scopes: set[str] = set()
    for k, node in enumerate(graph.node):
        label = node.name or f"{node.op_type}_{k}"
        scoped_path = _scopes(node.name) if scoped else [label]
        path = (recorded[k] or []) if from_metadata else scoped_path
        scopes.update(path)
        for v in [*node.input, *node.output]:
            values.setdefault(v, TensorInfo(v, None, "unknown", None))
        ins = [values[v].shape if v else None for v in node.input]
        outs = [values[v].shape for v in node.output]
        formula = FORMULAS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        work = 0.0
        if formula is None:
            key = (
                node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            )
            missing[key] = missing.get(key, 0) + 1
        else:
            try:
                matrix, other = formula(node, ins, outs)
                work = matrix + (other if flops == "all" else 0.0)
            except _Unsized:
                if flops == "all" or node.op_type in MATRIX_OPERATORS:
                    unsized[node.op_type] = unsized.get(node.op_type, 0) + 1
            except (ArithmeticError, AttributeError, IndexError, KeyError, TypeError,
                    ValueError) as exc:  # fmt: skip
                # One place for every malformed node (a Conv without a weight, a Gemm of a
                # 1-D input, a float kernel_shape...): the formulas assume a valid node.
                raise InvalidProfile(
                    f"node {label!r} ({node.op_type}) is malformed: inputs of shapes "
                    f"{_shapes_of(ins)}, outputs {_shapes_of(outs)} "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})",
                    source=source,
                ) from None
        params = 0
        for v in node.input:
            if v in weights and v not in counted and _is_weight(weights[v]):
                counted.add(v)
                params += math.prod(weights[v].dims)
                param_bits += math.prod(weights[v].dims) * (
                    _element_bits(weights[v].data_type) or 32
                )
        ops.append(Operation(label, owner_of(path, blocks), tuple(v for v in node.input if v),
                             tuple(node.output), work, params, tuple(path)))  # fmt: skip
    if from_metadata or scoped:
        ops = free_containers(ops, blocks)
    # Exporters fuse modules away (batch-norm into the convolution before it): a group only
    # needs one of its modules to remain.
    check_block_names(blocks, scopes, per_group=True)

    warnings = []
    if missing:
        warnings.append(f"no FLOP formula for {_counts(missing)}: their work is not counted")
    if unsized:
        warnings.append(
            f"shape inference left dimensions symbolic for {_counts(unsized)}: their work is not "
            "counted; export the model with fixed input shapes (no dynamic axes)"
        )
    label = name or (Path(source).stem if source else graph.name or "onnx-model")
    try:
        count = sum(op.params for op in ops)
        return build_profile(label, ops, values, [v.name for v in inputs],
                             [v.name for v in graph.output], warnings,
                             bytes_per_param=param_bits / 8 / count if count else 4.0,
                             granularity=granularity)  # fmt: skip
    except InvalidProfile as exc:
        if not warnings:
            raise
        raise InvalidProfile(f"{exc.message}: {'; '.join(warnings)}", field=exc.field) from None


_FLOATING = frozenset(
    [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE]
)


def _is_weight(tensor: Any) -> bool:
    """Whether an initializer counts as parameters: floating point and not a scalar (exporters
    also store shapes, indices and scalar constants as initializers)."""
    return tensor.data_type in _FLOATING and len(tensor.dims) > 0


def _counts(nodes: dict[str, int]) -> str:
    return ", ".join(f"{op} ({n} node{'s' if n > 1 else ''})" for op, n in nodes.items())
