"""ONNX files from the current exporter (``torch.onnx.export(..., dynamo=True)``): module scopes
from node metadata, recurrent layers, transformers models; symbolic shapes named."""

from __future__ import annotations

import io
import warnings

import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper  # noqa: E402

from inferplan.errors import InvalidProfile  # noqa: E402
from inferplan.profiles import resnet50  # noqa: E402
from inferplan.profiles.from_onnx import profile_onnx  # noqa: E402
from inferplan.profiles.from_torch import profile_module  # noqa: E402

from . import reference_models as ref  # noqa: E402

CONFIGS = {
    "GPT2Config": {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100,
                   "n_positions": 64},
    "BertConfig": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                   "intermediate_size": 128, "vocab_size": 100},
    "LlamaConfig": {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 100},
}  # fmt: skip
# The default torch blocks (embedding, each layer, head) as module groups.
GROUPS = {
    "GPT2Config": (("transformer.wte", "transformer.wpe"), ("transformer.h.0",),
                   ("transformer.h.1",), ("transformer.ln_f", "lm_head")),
    "BertConfig": (("embeddings",), ("encoder.layer.0",), ("encoder.layer.1",), ("pooler",)),
    "LlamaConfig": (("model.embed_tokens",), ("model.layers.0",), ("model.layers.1",),
                    ("model.norm", "lm_head")),
}  # fmt: skip


def _export(model, args=(), kwargs=None):
    """The model written by the dynamo exporter (opset 18), as a loaded ModelProto."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, args, kwargs=kwargs, dynamo=True, verbose=False)
    buffer = io.BytesIO()
    onnx.save(program.model_proto, buffer)
    return onnx.load_from_string(buffer.getvalue())


class Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


def _deterministic(meta):
    """The meta-built model with every value set: buffers as its constructor makes them, and
    every parameter distinct seeded draws. ``to_empty`` would leave whatever the allocator held,
    which the exporter's constant folding reads (BERT's token-type ids index an embedding;
    garbage there is an out-of-range index) and two initializers that happen to be equal it
    merges: the profile's parameters then depended on the tests run before."""
    with torch.device("cpu"):
        model = type(meta)(meta.config).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    return model


@pytest.fixture(scope="module")
def transformers_onnx():
    """The small configs built on the CPU (random weights) and exported with 16 tokens."""
    transformers = pytest.importorskip("transformers")
    from inferplan.profiles.from_transformers import build_model

    out = {}
    for name, config in CONFIGS.items():
        model = _deterministic(build_model(name, config))
        kwargs = {"input_ids": torch.zeros(1, 16, dtype=torch.int64)}
        if not isinstance(model, transformers.BertModel):
            kwargs.update(use_cache=False, logits_to_keep=1)
        out[name] = _export(model, kwargs=kwargs)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_transformers_onnx_equals_the_torch_front_end_layer_by_layer(transformers_onnx, name):
    from inferplan.profiles.from_transformers import profile_transformers

    got = profile_onnx(transformers_onnx[name], blocks=GROUPS[name])
    want = profile_transformers(name, CONFIGS[name], seq_len=16)
    assert got.profile.flops == want.profile.flops
    assert got.profile.activation_bits == want.profile.activation_bits
    # ONNX keeps no line between parameters and the other float initializers the exporter
    # folds (a rotary frequency table, an attention mask for the fixed shape): a few per cent
    extra = sum(got.profile.params) - sum(want.profile.params)
    assert 0 <= extra <= 0.05 * sum(want.profile.params)
    assert got.warnings == ()
    # scopes come from the node metadata: a depth reaches the layers
    by_depth = profile_onnx(transformers_onnx[name], blocks=3)
    layers = [b for b in by_depth.profile.blocks if ".0" in b or ".1" in b]
    assert len(layers) >= 2


@pytest.mark.slow
def test_modern_resnet_export_keeps_its_module_structure():
    with torch.device("meta"):
        model = ref.ResNet50()
    proto = _export(model.to_empty(device="cpu").eval(), (torch.zeros(1, 3, 64, 64),))
    assert all(not node.name.startswith("/") for node in proto.graph.node)  # no scoped names
    got = profile_onnx(proto)
    # the exporter fuses conv1 into bn1, and the fused node keeps bn1's scope
    assert got.profile.blocks == ("bn1+relu+maxpool", "layer1", "layer2", "layer3",
                                  "layer4+avgpool", "fc")  # fmt: skip
    assert got.profile.total_flops == resnet50(image_size=64).total_flops
    deeper = profile_onnx(proto, blocks=2)
    assert deeper.profile.n_blocks == 3 + 4 + 6 + 3 + 2  # stem, 16 bottlenecks, pool+fc


@pytest.mark.slow
def test_lstm_through_onnx_equals_the_torch_path():
    torch.manual_seed(0)
    model = Recurrent().eval()
    proto = _export(model, (torch.zeros(2, 7, 16),))
    assert sum(node.op_type == "LSTM" for node in proto.graph.node) == 2
    got = profile_onnx(proto)
    with torch.device("meta"):
        meta = Recurrent()
    want = profile_module(meta, [(2, 7, 16)])
    assert got.profile.flops == want.profile.flops
    assert got.profile.total_flops == 2 * 7 * 2 * 4 * 32 * (16 + 32 + 32 + 32) + 2 * 2 * 32 * 10


def _f(name, shape, kind=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, kind, shape)


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize(
    ("op", "gates", "layout", "directions"),
    [("LSTM", 4, 0, 1), ("GRU", 3, 1, 2), ("RNN", 1, 0, 2)],
)
def test_recurrent_formulas_by_hand(op, gates, layout, directions):
    seq, batch, inputs, hidden = 5, 3, 6, 4
    x = (batch, seq, inputs) if layout else (seq, batch, inputs)
    w = helper.make_tensor("W", TensorProto.FLOAT, [directions, gates * hidden, inputs],
                           [0.0] * directions * gates * hidden * inputs)  # fmt: skip
    r = helper.make_tensor("R", TensorProto.FLOAT, [directions, gates * hidden, hidden],
                           [0.0] * directions * gates * hidden * hidden)  # fmt: skip
    direction = "bidirectional" if directions == 2 else "forward"
    node = helper.make_node(op, ["x", "W", "R"], ["y"], name="rnn", hidden_size=hidden,
                            layout=layout, direction=direction)  # fmt: skip
    got = profile_onnx(_model([node], [_f("x", list(x))], [_f("y", None)], [w, r]))
    steps = 2 * seq * batch * directions * gates * hidden * (inputs + hidden)
    assert got.profile.flops == (steps,)


def _symbolic(extra_work):
    """x reshaped to a shape read from an input at run time, multiplied, and reshaped back to a
    fixed 2x3: shape inference cannot size the product (as a BERT export's token-type Expand
    left it)."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [4, 3], [0.0] * 12)
    fixed = helper.make_tensor("fixed", TensorProto.INT64, [2], [2, 3])
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["e"], name="/embed/Reshape"),
             helper.make_node("MatMul", ["e", "W"], ["m"], name="/layer/MatMul"),
             helper.make_node("Reshape", ["m", "fixed"], ["y"], name="/layer/Reshape")]  # fmt: skip
    inputs = [_f("x", [2, 4]), _f("shape", [2], TensorProto.INT64)]
    outputs = [_f("y", [2, 3])]
    if extra_work:
        nodes.append(helper.make_node("MatMul", ["x", "W"], ["z"], name="/other/MatMul"))
        outputs.append(_f("z", [2, 3]))
    return _model(nodes, inputs, outputs, [w, fixed])


def test_symbolic_shapes_name_the_skipped_operators_and_the_fix():
    with pytest.raises(InvalidProfile) as info:
        profile_onnx(_symbolic(extra_work=False))
    message = str(info.value)
    assert message.startswith("the model does no counted work (no FLOPs in any block): ")
    assert "shape inference left dimensions symbolic for MatMul (1 node)" in message
    assert "export the model with fixed input shapes" in message
    assert "\n" not in message
    partly = profile_onnx(_symbolic(extra_work=True))
    assert partly.profile.total_flops == 2 * 2 * 4 * 3  # the sized product only
    assert partly.warnings == (
        "shape inference left dimensions symbolic for MatMul (1 node): their work is not "
        "counted; export the model with fixed input shapes (no dynamic axes)",
        "no layer graph: the size of 'e' is unknown",  # a symbolic tensor crosses layers
    )


def test_legacy_name_scopes_still_make_blocks():
    w = helper.make_tensor("W", TensorProto.FLOAT, [4, 4], [0.0] * 16)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["a"], name="/enc/enc.0/MatMul"),
             helper.make_node("MatMul", ["a", "W"], ["b"], name="/enc/enc.1/MatMul"),
             helper.make_node("MatMul", ["b", "W"], ["y"], name="/head/MatMul")]  # fmt: skip
    proto = _model(nodes, [_f("x", [2, 4])], [_f("y", [2, 4])], [w])
    assert profile_onnx(proto).profile.blocks == ("enc", "head")
    assert profile_onnx(proto, blocks=2).profile.blocks == ("enc.0", "enc.1", "head")
