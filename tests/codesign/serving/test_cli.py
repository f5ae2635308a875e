"""``inferplan serve``: the plan as a table and as JSON, bad input exit 2, infeasible exit 3."""

from __future__ import annotations

import json

import pytest

from tests.cli import app, invoke_json, runner

BASE = ["serve", "examples/gpu-cluster.yaml", "examples/llama-8b.yaml",
        "--workload", "examples/chat-workload.yaml"]  # fmt: skip


def test_cost_plan_as_json_keeps_the_kv_cache_within_memory() -> None:
    data = invoke_json([*BASE, "--catalog", "examples/gpus.yaml", "--json"])
    assert data["status"] == "optimal" and data["objective"] == "cost"
    assert data["requests_per_s"] == 4.0 and data["tpot_s"] <= 0.05
    assert max(data["ttft_s"]) <= 2.0
    for stage in data["stages"]:
        assert stage["weights_bytes"] + stage["kv_cache_bytes"] <= stage["memory"]
    assert data["price_per_hour"] == sum(s["price_per_hour"] for s in data["stages"])


def test_goodput_table() -> None:
    result = runner.invoke(app, [*BASE, "--objective", "goodput"])
    assert result.exit_code == 0, result.stderr
    assert "requests/s" in result.stdout and "gpu1" in result.stdout


def test_bad_input_is_one_line_exit_2(tmp_path) -> None:
    bad = tmp_path / "w.yaml"
    bad.write_text("requests_per_s: 1\nclasses: [{prompt_tokens: 9000, output_tokens: 1, "
                   "share: 1}]\n")  # fmt: skip
    result = runner.invoke(app, ["serve", "examples/gpu-cluster.yaml", "examples/llama-8b.yaml",
                                 "--workload", str(bad), "--objective", "goodput"])  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "longer than the model's context" in result.stderr
    assert str(bad) in result.stderr
    result = runner.invoke(app, BASE)  # the cost objective without a catalog
    assert result.exit_code == 2 and "--catalog" in result.stderr


def test_infeasible_is_exit_3_naming_what_binds(tmp_path) -> None:
    tight = tmp_path / "w.yaml"
    tight.write_text("requests_per_s: 1\ntpot_s: 0.0001\n"
                     "classes: [{prompt_tokens: 100, output_tokens: 10, share: 1}]\n")  # fmt: skip
    result = runner.invoke(app, [*BASE[:3], "--workload", str(tight), "--catalog",
                                 "examples/gpus.yaml", "--json"])  # fmt: skip
    assert result.exit_code == 3
    data = json.loads(result.stdout)
    assert data["status"] == "infeasible" and data["binding"] == ["TPOT"]
    assert "TPOT" in result.stderr


def test_a_catalogs_measured_step_times_time_the_plan(tmp_path) -> None:
    # one GPU type whose one-unit nodes take 0.4 ms a layer per decode step at any batch and
    # 2 ms a layer per prefill at any prompt (two equal points each): every stage's decode
    # step is its layers' 0.4 ms each, whatever the roofline of its FLOP/s would say
    catalog = tmp_path / "gpus.yaml"
    catalog.write_text(
        "gpus:\n"
        "  - {name: A100-80GB, flops: 312e12, memory_bandwidth: 2.0e12, memory: 80e9,\n"
        "     price_per_hour: 3.67,\n"
        "     step_times: {1: {decode: {1: 4.0e-4, 4096: 4.0e-4},\n"
        "                      prefill: {1: 2.0e-3, 65536: 2.0e-3}}}}\n"
    )
    data = invoke_json([*BASE, "--catalog", str(catalog), "--json"])
    assert data["status"] == "optimal"
    held = [s for s in data["stages"] if s["layers"] > 0]
    assert held and sum(s["layers"] for s in held) == 32  # llama-8b's decoder layers
    for stage in held:
        assert stage["decode_step_s"] == pytest.approx(stage["layers"] * 4.0e-4)
        assert stage["prefill_s"] == pytest.approx([stage["layers"] * 2.0e-3] * 2)


def test_many_pipelines_as_json_list_disjoint_replicas() -> None:
    data = invoke_json([*BASE, "--objective", "goodput", "--pipelines", "any", "--json"])
    assert data["status"] == "optimal" and data["pipelines"] == len(data["replicas"]) >= 2
    inner = [s["node"] for r in data["replicas"] for s in r["stages"]]
    assert len(inner) == len(set(inner))
    one = invoke_json([*BASE, "--objective", "goodput", "--json"])
    assert data["requests_per_s"] >= one["requests_per_s"]
    assert data["requests_per_s"] == pytest.approx(
        sum(r["requests_per_s"] for r in data["replicas"])
    )
    cost = invoke_json([*BASE, "--catalog", "examples/gpus.yaml", "--pipelines", "any", "--json"])
    assert cost["requests_per_s"] == pytest.approx(4.0) and cost["status"] == "optimal"
    for r in cost["replicas"]:
        assert r["requests_per_s"] <= r["max_requests_per_s"] and r["tpot_s"] <= 0.05
        for stage in r["stages"]:
            assert stage["weights_bytes"] + stage["kv_cache_bytes"] <= stage["memory"]


def test_many_pipelines_table_and_refusals() -> None:
    result = runner.invoke(app, [*BASE, "--objective", "goodput", "--pipelines", "any"])
    assert result.exit_code == 0, result.stderr
    assert "pipelines" in result.stdout and "gpu3" in result.stdout
    result = runner.invoke(app, [*BASE, "--objective", "goodput", "--time-limit", "5"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "--time-limit" in result.stderr and "--pipelines any" in result.stderr
    result = runner.invoke(app, ["run", "examples/tiny-serving-network.yaml",
                                 "transformers:LlamaConfig", "--workload",
                                 "examples/chat-workload.yaml", "--pipelines", "any"])  # fmt: skip
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "--pipelines" in result.stderr and "one pipeline" in result.stderr
