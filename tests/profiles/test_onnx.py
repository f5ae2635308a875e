"""ONNX front end: the reference nets exported to ONNX profile as the built-ins do."""

from __future__ import annotations

import io
import warnings

import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from inferplan.errors import InvalidProfile  # noqa: E402
from inferplan.profiles import alexnet, resnet50, vgg16  # noqa: E402
from inferplan.profiles.cuts import parse_block_spec  # noqa: E402
from inferplan.profiles.from_onnx import profile_onnx  # noqa: E402


@pytest.fixture(scope="module")
def exported():
    """The reference nets exported once (adaptive pooling exports only at sizes it divides).

    Weights are exported as graph inputs (writing 0.5 GB of VGG-16 weights is most of an
    export's time) and then declared as initializers with their shapes and no values, which is
    all a profile reads.
    """
    torch = pytest.importorskip("torch")
    from . import reference_models as ref

    out = {}
    for key, cls, size in (("vgg16", ref.VGG16, 224), ("resnet50", ref.ResNet50, 64),
                           ("alexnet", ref.AlexNet, 224)):  # fmt: skip
        with torch.device("meta"):
            model = cls()
        model = model.to_empty(device="cpu").eval()  # uninitialised weights: nothing to compute
        buffer = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (torch.zeros(1, 3, size, size),), buffer, dynamo=False,
                              input_names=["x"], export_params=False)  # fmt: skip
        proto = onnx.load_from_string(buffer.getvalue())
        graph = proto.graph
        for value in graph.input[1:]:
            dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
            kind = value.type.tensor_type.elem_type
            graph.initializer.append(TensorProto(name=value.name, dims=dims, data_type=kind))
        del graph.input[1:]
        out[key] = (proto, size)
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "blocks", "builtin"),
    [
        ("vgg16", "VGG16_BLOCKS", vgg16),
        ("resnet50", "RESNET50_BLOCKS", resnet50),
        ("alexnet", "ALEXNET_BLOCKS", alexnet),
    ],
)
def test_exported_reference_nets_match_builtin_profiles(exported, model, blocks, builtin):
    from . import reference_models as ref

    spec = getattr(ref, blocks)
    proto, size = exported[model]
    got = profile_onnx(proto, blocks=parse_block_spec(spec))
    want = builtin(image_size=size)
    assert got.profile.flops == want.flops
    assert got.profile.activation_bits == want.activation_bits
    assert got.warnings == ()


@pytest.mark.slow
def test_default_blocks_and_all_flops_on_resnet(exported):
    proto, size = exported["resnet50"]
    matrix = profile_onnx(proto)
    assert matrix.profile.blocks[1:4] == ("layer1", "layer2", "layer3")
    assert matrix.profile.total_flops == resnet50(image_size=size).total_flops
    everything = profile_onnx(proto, flops="all")
    assert everything.profile.total_flops > matrix.profile.total_flops


def _model(nodes, inputs, outputs, initializers=(), value_info=()):
    graph = helper.make_graph(
        nodes, "g", inputs, outputs, list(initializers), value_info=value_info
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_formulas_on_a_hand_built_graph():
    # x(2x4) -> MatMul W(4x3) -> Relu -> Softmax -> y(2x3)
    w = helper.make_tensor("W", TensorProto.FLOAT, [4, 3], [0.0] * 12)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["y"], name="soft")]  # fmt: skip
    proto = _model(nodes, [_f("x", [2, 4])], [_f("y", [2, 3])], [w])
    matrix = profile_onnx(proto)
    # One block per node (no scopes); the two zero-matrix-work nodes join the MatMul.
    assert matrix.profile.flops == (2 * 2 * 4 * 3,)
    assert matrix.profile.params == (12,)
    full = profile_onnx(proto, flops="all")
    assert full.profile.flops == (2 * 2 * 4 * 3, 2 * 3, 3 * 2 * 3)


def test_attention_formula_counts_both_products():
    q, k, v = _f("q", [1, 2, 5, 8]), _f("k", [1, 2, 7, 8]), _f("v", [1, 2, 7, 4])
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="att")
    got = profile_onnx(_model([node], [q, k, v], [_f("y", [1, 2, 5, 4])]))
    assert got.profile.flops == (2 * 2 * 5 * 7 * 8 + 2 * 2 * 5 * 7 * 4,)


def test_operators_without_a_formula_are_named_in_a_warning():
    nodes = [helper.make_node("MatMul", ["x", "x"], ["h"], name="mm"),
             helper.make_node("Det", ["h"], ["y"], name="det")]  # fmt: skip
    got = profile_onnx(_model(nodes, [_f("x", [3, 3])], [_f("y", [])]))
    assert got.warnings == ("no FLOP formula for Det (1 node): their work is not counted",)


def test_skip_connections_cross_the_cuts_they_span():
    # a = x*x ; b = a*a ; y = a + b : the cut after b carries a and b.
    nodes = [helper.make_node("MatMul", ["x", "x"], ["a"], name="n1"),
             helper.make_node("MatMul", ["a", "a"], ["b"], name="n2"),
             helper.make_node("MatMul", ["b", "a"], ["y"], name="n3")]  # fmt: skip
    got = profile_onnx(_model(nodes, [_f("x", [4, 4])], [_f("y", [4, 4])]))
    assert [sorted(t.name for t in c.tensors) for c in got.cuts] == [
        ["x"],
        ["a"],
        ["a", "b"],
        ["y"],
    ]
    assert got.profile.activation_bits == (512.0, 512.0, 1024.0, 512.0)


def test_symbolic_input_needs_a_shape(tmp_path):
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")]
    w = helper.make_tensor("W", TensorProto.FLOAT, [4, 3], [0.0] * 12)
    proto = _model(nodes, [_f("x", ["batch", 4])], [_f("y", ["batch", 3])], [w])
    path = tmp_path / "m.onnx"
    onnx.save(proto, path)
    with pytest.raises(InvalidProfile, match=r"m.onnx: input_shapes: input 'x' has a symbolic"):
        profile_onnx(path)
    got = profile_onnx(path, input_shapes=[(5, 4)])
    assert got.profile.flops == (2 * 5 * 4 * 3,) and got.profile.name == "m"
    with pytest.raises(InvalidProfile, match="has 2 dimensions, got shape 5"):
        profile_onnx(path, input_shapes=[(5,)])
    with pytest.raises(InvalidProfile, match="no operation belongs to module"):
        profile_onnx(path, input_shapes=[(5, 4)], blocks=(("nope",),))
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    with pytest.raises(InvalidProfile, match=r"bad\.onnx: not a readable ONNX model"):
        profile_onnx(tmp_path / "bad.onnx")


def test_bytes_per_param_follow_the_weights_dtypes():
    def matmul(kind: int) -> object:
        w = helper.make_tensor("W", kind, [4, 3], [0.0] * 12)
        x = helper.make_tensor_value_info("x", kind, [2, 4])
        y = helper.make_tensor_value_info("y", kind, [2, 3])
        return _model([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], [x], [y],
                      [w])  # fmt: skip

    assert profile_onnx(matmul(TensorProto.FLOAT)).profile.bytes_per_param == 4.0
    assert profile_onnx(matmul(TensorProto.FLOAT16)).profile.bytes_per_param == 2.0
