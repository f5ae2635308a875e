"""Serving files: what they give, and one located error line for each kind of mistake."""

from __future__ import annotations

import pytest

from inferplan.codesign.serving.files import load_catalog, load_decoder, load_workload
from inferplan.errors import InferplanError


def test_examples_load() -> None:
    w = load_workload("examples/chat-workload.yaml")
    assert w.requests_per_s == 4.0 and len(w.classes) == 2 and w.tpot_s == 0.05
    assert [t.name for t in load_catalog("examples/gpus.yaml").types] == ["L4", "A10G", "A100-80GB"]
    d = load_decoder("examples/llama-70b.yaml")
    # LLaMA-70B: about 70.6 billion parameters, 320 KiB of KV cache per token (80 layers)
    assert round(d.weights_bytes(0, d.layers + 1) / 2 / 1e9, 1) == 70.6
    assert d.kv_bytes_per_token_layer * d.layers == 320 * 1024


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        (
            "requests_per_s: -1\nclasses: [{prompt_tokens: 1, output_tokens: 1, share: 1}]",
            "requests_per_s",
            "greater than 0",
        ),
        (
            "requests_per_s: .nan\nclasses: [{prompt_tokens: 1, output_tokens: 1, share: 1}]",
            "requests_per_s",
            "finite",
        ),
        (
            "requests_per_s: 1\nclasses: [{prompt_tokens: 1, output_tokens: 1, share: 0.5}]",
            "classes",
            "sum to 1",
        ),
        (
            "requests_per_s: 1\nclasses: [{prompt_tokens: 0, output_tokens: 1, share: 1}]",
            "classes[0].prompt_tokens",
            "greater than or equal to 1",
        ),
    ],
)
def test_bad_workloads(tmp_path, text, field, words) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    with pytest.raises(InferplanError) as info:
        load_workload(path)
    assert info.value.field == field and words in str(info.value)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_gpu_without_a_price(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("gpus: [{name: x, flops: 1e12, memory_bandwidth: 1e12, memory: 1e9}]")
    with pytest.raises(InferplanError) as info:
        load_catalog(path)
    assert info.value.field == "gpus[0].price_per_hour" and "missing" in str(info.value)


def test_a_transformers_config() -> None:
    pytest.importorskip("transformers")
    d = load_decoder(
        "transformers:LlamaConfig",
        [
            "num_hidden_layers=2",
            "hidden_size=64",
            "num_attention_heads=4",
            "num_key_value_heads=2",
            "intermediate_size=128",
            "vocab_size=100",
        ],
    )
    assert (d.layers, d.hidden, d.kv_heads, d.gated_mlp) == (2, 64, 2, True)


def test_memory_bandwidth_in_network_files(tmp_path) -> None:
    from inferplan.codesign.serving import network_hardware
    from inferplan.network import load_network

    path = tmp_path / "n.yaml"
    path.write_text(
        "source: s\ntarget: t\n"
        "nodes: [{id: s, capacity: 1e12, price: 0, memory: 4e9, memory_bandwidth: 5e11},"
        " {id: t, capacity: 1e12, price: 0}]\n"
        "links: [{source: s, target: t, capacity: 1e9, price: 0}]\n"
    )
    net = load_network(path)
    hw = network_hardware(net)
    assert (hw["s"].flops, hw["s"].memory_bandwidth, hw["s"].memory) == (1e12, 5e11, 4e9)
    assert hw["t"].memory_bandwidth == float("inf")
    assert load_network(path) == net and net.nodes[0].memory_bandwidth == 5e11
    for bad in ("-1", "0", ".nan"):
        path.write_text(
            path.read_text().replace("memory_bandwidth: 5e11", f"memory_bandwidth: {bad}")
        )
        with pytest.raises(InferplanError) as info:
            load_network(path)
        assert info.value.field == "nodes[0] ('s').memory_bandwidth"
        path.write_text(
            path.read_text().replace(f"memory_bandwidth: {bad}", "memory_bandwidth: 5e11")
        )


STEP_TABLE = """gpus:
  - name: A100-80GB
    flops: 312e12
    memory_bandwidth: 2.0e12
    memory: 80e9
    price_per_hour: 3.67
    tp_efficiency: {1: 1.0, 2: 0.9}
    step_times:
      1: {decode: {1: 1.0e-4, 9: 3.0e-4}, prefill: {100: 1.0e-3, 500: 5.0e-3}}
"""


def test_measured_step_times_time_their_unit_count(tmp_path) -> None:
    from inferplan.codesign.timing.step import StepWork

    path = tmp_path / "c.yaml"
    path.write_text(STEP_TABLE)
    (gpu,) = load_catalog(path).types
    one, two = gpu.hardware(1), gpu.hardware(2)
    assert two.time_model is None  # no table for two units: the roofline
    assert one.time_model is not None
    # 10 layers at batch 5, halfway between 1 and 9: 10 x 2e-4 s; a prefill of 400 tokens,
    # three quarters of the way from 100 to 500: 10 x 4e-3 s; beyond the points: refused
    assert one.time_model.seconds(StepWork("decode", 0.0, 0.0, 10, 5)) == pytest.approx(2e-3)
    assert one.time_model.seconds(StepWork("prefill", 0.0, 0.0, 10, 400)) == pytest.approx(4e-2)
    with pytest.raises(InferplanError, match=r"outside the measured batches 1\.\.9"):
        one.time_model.seconds(StepWork("decode", 0.0, 0.0, 10, 16))


@pytest.mark.parametrize(
    ("table", "field", "words"),
    [
        ("      1: {decode: {1: -1.0}, prefill: {100: 1.0e-3}}", "gpus[0].step_times[1].decode[1]",
         "greater than 0"),
        ("      1: {decode: {}, prefill: {100: 1.0e-3}}", "gpus[0].step_times[1].decode",
         "at least 1"),
        ("      1: {decode: {1: 1.0e-4}}", "gpus[0].step_times[1].prefill", "missing"),
        ("      4: {decode: {1: 1.0e-4}, prefill: {100: 1.0e-3}}", "step_times.4",
         "tp_efficiency lists [1, 2]"),
    ],
)  # fmt: skip
def test_bad_step_times_are_one_located_line(tmp_path, table, field, words) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(STEP_TABLE.rsplit("\n", 2)[0] + "\n" + table + "\n")
    with pytest.raises(InferplanError) as info:
        load_catalog(path)
    assert info.value.field == field and words in str(info.value), str(info.value)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
