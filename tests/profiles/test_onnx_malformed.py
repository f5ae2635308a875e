"""ONNX files that parse but are malformed: one error line naming the node (or value) and the
problem, never a traceback; scope metadata read with bounded size and depth."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, numpy_helper  # noqa: E402
from onnx import helper as h  # noqa: E402

from tests.cli import app, runner  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _value(name, shape, kind=TensorProto.FLOAT):
    return h.make_tensor_value_info(name, kind, shape)


def _weights(name, shape):
    return numpy_helper.from_array(np.ones(shape, np.float32), name)


MALFORMED = {
    "a Conv without a weight": (_model(
        [h.make_node("Conv", ["x"], ["y"], name="conv", kernel_shape=[3, 3])],
        [_value("x", [1, 3, 8, 8])], [_value("y", [1, 4, 6, 6])]),
        "node 'conv' (Conv) is malformed: inputs of shapes [1x3x8x8]"),
    "a Gemm of a 1-D input": (_model(
        [h.make_node("Gemm", ["x", "w"], ["y"], name="gemm")], [_value("x", [4])],
        [_value("y", [2])], [_weights("w", (4, 2))]),
        "node 'gemm' (Gemm) is malformed: inputs of shapes [4, 4x2]"),
    "an Attention with a 2-D key": (_model(
        [h.make_node("Attention", ["q", "k", "v"], ["y"], name="att")],
        [_value("q", [1, 2, 4, 8]), _value("k", [4, 8]), _value("v", [1, 2, 4, 8])],
        [_value("y", [1, 2, 4, 8])], opset=23),
        "node 'att' (Attention) is malformed: inputs of shapes [1x2x4x8, 4x8, 1x2x4x8]"),
    "an LSTM with 1-D weights": (_model(
        [h.make_node("LSTM", ["x", "W", "R"], ["y"], name="lstm", hidden_size=4)],
        [_value("x", [5, 1, 3])], [_value("y", [5, 1, 1, 4])],
        [_weights("W", (48,)), _weights("R", (64,))]),
        "node 'lstm' (LSTM) is malformed: inputs of shapes [5x1x3, 48, 64]"),
    "a float kernel_shape": (_model(
        [h.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2.0, 2.0])],
        [_value("x", [1, 3, 8, 8])], [_value("y", [1, 3, 4, 4])]),
        "node 'pool' (MaxPool) is malformed: inputs of shapes [1x3x8x8], outputs [1x3x4x4] "
        "(ValueError: attribute kernel_shape must be integers, got [2.0, 2.0])"),
    "an unknown element type": (_model(
        [h.make_node("Relu", ["x"], ["y"], name="relu")], [_value("x", [1, 3], 99)],
        [_value("y", [1, 3], 99)]),
        "value 'x' has an unknown element type (99)"),
}  # fmt: skip


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_node_is_one_line_naming_it(tmp_path, case):
    model, message = MALFORMED[case]
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    result = runner.invoke(app, ["profile", str(path), "--flops", "all"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: {message}"), result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("record", ["[" * 100_000 + "]" * 100_000, "['" + "a" * 10**7 + "']",
                                    "[" * 150 + "'a'" + "]" * 150])  # fmt: skip
def test_scope_metadata_is_read_with_bounded_size_and_depth(tmp_path, record):
    model = _model(
        [h.make_node("MatMul", ["x", "w"], ["y"], name="/fc/MatMul")],
        [_value("x", [1, 4])],
        [_value("y", [1, 2])],
        [_weights("w", (4, 2))],
    )
    prop = model.graph.node[0].metadata_props.add()
    prop.key, prop.value = "pkg.torch.onnx.name_scopes", record
    onnx.save(model, tmp_path / "m.onnx")
    result = runner.invoke(app, ["profile", str(tmp_path / "m.onnx"), "--json"])
    assert result.exit_code == 0, result.stderr  # the record is ignored, the names are used
    assert '"flops": [\n    16.0\n  ]' in result.stdout or '"flops": [16.0]' in result.stdout
