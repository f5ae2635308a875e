"""transformers models from small configs: per-layer profiles against analytic counts and a
direct FlopCounterMode run of the eager model."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from inferplan.errors import InvalidProfile  # noqa: E402
from inferplan.profiles.from_torch import profile_module  # noqa: E402
from inferplan.profiles.from_transformers import (  # noqa: E402
    build_model,
    parse_config_overrides,
    profile_transformers,
)
from inferplan.profiles.transformers import decoder_lm  # noqa: E402

GPT2 = {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100, "n_positions": 64}
LLAMA = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 100}  # fmt: skip
BERT = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 128, "vocab_size": 100}  # fmt: skip


def _eager_flops(model, **inputs):
    """FLOPs of one eager forward on the meta device, counted independently of the profiler."""
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(**inputs)
    return float(counter.get_total_flops())


@pytest.mark.parametrize(("phase", "batch"), [("prefill", 1), ("prefill", 3), ("decode", 2)])
def test_gpt2_equals_decoder_lm_with_tied_embeddings(phase, batch):
    got = profile_transformers("GPT2Config", GPT2, seq_len=12, batch=batch, phase=phase)
    want = decoder_lm(layers=2, hidden=64, heads=4, vocab_size=100, seq_len=12, batch=batch,
                      phase=phase, tie_embeddings=True, bias=True, layer_norm=True,
                      positions=64, bytes_per_element=4, token_bits=64)  # fmt: skip
    assert got.profile.flops == want.flops
    assert got.profile.params == want.params
    assert got.profile.activation_bits == want.activation_bits
    assert got.profile.blocks == ("embed+transformer.h.0", "transformer.h.1", "head")
    assert got.warnings == ()


def test_gpt2_small_has_124m_parameters_counted_once():
    got = profile_transformers("GPT2Config", {}, seq_len=8)
    assert sum(got.profile.params) == 124_439_808  # the published GPT-2 small count
    assert got.profile.n_blocks == 13  # embedding + 12 layers, head


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_llama_style_equals_decoder_lm_and_flop_counter(phase):
    got = profile_transformers("LlamaConfig", LLAMA, seq_len=10, batch=2, phase=phase)
    want = decoder_lm(layers=2, hidden=64, heads=4, kv_heads=2, ffn_hidden=96, gated_mlp=True,
                      vocab_size=100, seq_len=10, batch=2, phase=phase, bytes_per_element=4,
                      token_bits=64)  # fmt: skip
    assert got.profile.flops == want.flops
    assert got.profile.params == want.params
    assert got.profile.activation_bits == want.activation_bits
    model = build_model("LlamaConfig", LLAMA)
    ids = torch.zeros(2, 10, dtype=torch.int64, device="meta")
    if phase == "prefill":
        total = _eager_flops(model, input_ids=ids, logits_to_keep=1)
    else:
        cache = model(input_ids=ids, use_cache=True).cache
        total = _eager_flops(model, input_ids=ids[:, :1], cache=cache, logits_to_keep=1)
    assert got.profile.total_flops == total


def test_decode_cuts_carry_the_residual_stream_not_the_kv_cache():
    got = profile_transformers("LlamaConfig", LLAMA, seq_len=30, batch=2, phase="decode")
    inner = [c for c in got.cuts if c.kept][1:-1]
    assert [[t.shape for t in c.tensors] for c in inner] == [[(2, 1, 64)], [(2, 1, 64)]]
    longer = profile_transformers("LlamaConfig", LLAMA, seq_len=8, cache_len=30, batch=2,
                                  phase="decode")  # fmt: skip
    assert longer.profile == got.profile  # cache_len wins over seq_len in decode


def test_bert_blocks_are_layers_and_totals_match_an_analytic_count_and_the_counter():
    t, d, ffn = 16, 64, 128
    got = profile_transformers("BertConfig", BERT, seq_len=t)
    layer = 2 * t * d * 3 * d + 2 * t * d * d + 4 * t * t * d + 2 * 2 * t * d * ffn
    assert got.profile.flops == (layer, layer, 2 * d * d)  # the pooler is the head
    assert got.profile.blocks == ("embed+encoder.layer.0", "encoder.layer.1", "head")
    # the model's outputs: the last hidden state and the pooled vector
    assert got.profile.activation_bits[-1] == 32 * (t * d + d)
    model = build_model("BertConfig", BERT)
    ids = torch.zeros(1, t, dtype=torch.int64, device="meta")
    assert got.profile.total_flops == _eager_flops(model, input_ids=ids)


def test_an_attention_mask_crosses_the_cuts_whose_layers_read_it():
    plain = profile_transformers("BertConfig", BERT, seq_len=16)
    masked = profile_transformers("BertConfig", BERT, seq_len=16, attention_mask=True)
    assert masked.profile.flops == plain.profile.flops
    extra = [m - p for m, p in zip(masked.profile.activation_bits,
                                   plain.profile.activation_bits, strict=True)]  # fmt: skip
    assert extra[0] == 16 * 64  # the int64 mask next to the ids
    assert extra[1] > 0  # the mask the second layer reads crosses the cut before it


def test_models_fx_could_not_trace_profile_through_torch_export():
    # torch.fx failed on all three ("'Proxy' object does not support item assignment", ...)
    bert = build_model("BertConfig", BERT)
    ids = torch.zeros(1, 16, dtype=torch.int64)
    got = profile_module(bert, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    assert got.profile.total_flops == _eager_flops(bert, input_ids=ids.to("meta"))
    with torch.device("meta"):
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
        encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    got = profile_module(encoder, [(2, 16, 64)], blocks=2)
    one = 2 * 32 * 64 * 3 * 64 + 2 * 32 * 64 * 64 + 4 * 2 * 16 * 16 * 64 + 2 * 2 * 32 * 64 * 128
    assert got.profile.flops == (one, one)
    assert got.profile.blocks == ("layers.0", "layers.1")


def test_bad_configs_are_one_line_errors():
    cases = [
        (lambda: profile_transformers("NoSuchConfig", {}, seq_len=4), "no configuration class"),
        (lambda: profile_transformers("GPT2Config", {"n_layers": 2}, seq_len=4),
         "GPT2Config has no field(s) 'n_layers'"),
        (lambda: profile_transformers("GPT2Config", GPT2, seq_len=0), "seq_len: must be a posi"),
        (lambda: profile_transformers("GPT2Config", GPT2, seq_len=4, model_class="Nope"),
         "no model class 'Nope'"),
        (lambda: profile_transformers("GPT2Config", GPT2, seq_len=4, phase="train"),
         "must be 'prefill' or 'decode'"),
        (lambda: parse_config_overrides(["n_layer"]), "expected key=value"),
    ]  # fmt: skip
    for call, message in cases:
        with pytest.raises(InvalidProfile) as info:
            call()
        assert message in str(info.value)
        assert "\n" not in str(info.value)


def test_a_context_beyond_the_position_table_is_a_warning():
    within = profile_transformers("GPT2Config", GPT2, seq_len=40, cache_len=63, phase="decode")
    assert within.warnings == ()  # 63 cached + 1 new = 64 positions
    over = profile_transformers("GPT2Config", GPT2, seq_len=65)
    assert over.warnings == ("65 tokens exceed the config's max_position_embeddings (64): the "
                             "model cannot run them as configured",)  # fmt: skip


def test_model_class_and_blocks_can_be_chosen():
    got = profile_transformers("BertConfig", BERT, seq_len=8, model_class="BertForMaskedLM",
                               blocks=(("bert.embeddings", "bert.encoder"), ("cls",)))  # fmt: skip
    assert got.profile.blocks == ("bert.embeddings+bert.encoder", "cls")
    assert got.profile.flops[1] == 2 * 8 * 64 * 64 + 2 * 8 * 64 * 100  # transform, decoder


@pytest.mark.parametrize(
    ("config", "overrides", "field"),
    [
        ("GPT2Config", {**GPT2, "n_layer": 0}, "GPT2Config.n_layer"),
        ("GPT2Config", {**GPT2, "n_layer": -3}, "GPT2Config.n_layer"),
        ("GPT2Config", {**GPT2, "n_embd": 0}, "GPT2Config.n_embd"),
        ("LlamaConfig", {**LLAMA, "num_hidden_layers": -1}, "LlamaConfig.num_hidden_layers"),
        ("LlamaConfig", {**LLAMA, "intermediate_size": 0}, "LlamaConfig.intermediate_size"),
        ("BertConfig", {**BERT, "num_hidden_layers": 0}, "BertConfig.num_hidden_layers"),
        ("BertConfig", {**BERT, "vocab_size": -100}, "BertConfig.vocab_size"),
    ],
)
def test_sizes_that_are_not_positive_are_refused_naming_the_field(config, overrides, field):
    # zero or negative layer counts built a model of no layers: a one-block profile
    with pytest.raises(InvalidProfile, match=rf"^config: {field} must be a positive integer"):
        profile_transformers(config, overrides, seq_len=4)


def test_sequences_beyond_what_a_tensor_holds_are_refused_before_tracing():
    for seq_len, batch in ((2**64, 1), (2**40, 2**30)):
        with pytest.raises(InvalidProfile, match=r"^seq_len: a batch of sequences .* has more "
                                                 r"elements than a tensor can hold"):  # fmt: skip
            profile_transformers("GPT2Config", GPT2, seq_len=seq_len, batch=batch)
    # one within the bound but whose activations overflow: the model's own one-line error
    with pytest.raises(InvalidProfile, match=r"does not run on input shape input_ids=1x"):
        profile_transformers("GPT2Config", GPT2, seq_len=2**57)
