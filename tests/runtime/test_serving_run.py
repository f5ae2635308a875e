"""Serving a decoder LM for real: split by decoder layers into ranks, greedy tokens equal to
the unsplit model's, continuous batching up to the batch, the command's options and JSON."""

from __future__ import annotations

import itertools
import json
import multiprocessing as mp
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from inferplan.runtime.serving import (  # noqa: E402
    ServeRequest,
    ServeStage,
    ServingFailed,
    run_serving,
    split_layers,
)
from tests.cli import app, runner  # noqa: E402

ROOT = Path(__file__).parents[2]
NETWORK = ROOT / "examples" / "tiny-serving-network.yaml"
WORKLOAD = ROOT / "examples" / "tiny-workload.yaml"
SHAPE = {"num_hidden_layers": 4, "hidden_size": 64, "intermediate_size": 128,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
         "max_position_embeddings": 512}  # fmt: skip
CONFIG = [f"--config={k}={v}" for k, v in SHAPE.items()]
MODEL = "transformers:LlamaConfig"


def _config() -> object:
    return transformers.LlamaConfig(**SHAPE)


def _no_children(before: set[int]) -> None:
    """No process the run started is left (``before``: the pids of children that other tests'
    pools, as joblib's workers, started before it)."""
    deadline = time.monotonic() + 5

    def started() -> list[object]:
        return [p for p in mp.active_children() if p.pid not in before]

    while started() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started() == []


def _children() -> set[int]:
    return {p.pid for p in mp.active_children() if p.pid is not None}


SPLITS = {
    1: (ServeStage(0, 4, True, True),),
    2: (ServeStage(0, 1, True, False), ServeStage(1, 4, False, True)),
    3: (ServeStage(0, 2, True, False), ServeStage(2, 3, False, False),
        ServeStage(3, 4, False, True)),
}  # fmt: skip


@pytest.mark.parametrize("count", [1, 2, 3])
def test_tokens_match_and_batching(count: int) -> None:
    before = _children()
    batch = 3
    request = ServeRequest(_config(), SPLITS[count], batch, rate=200.0,
                           classes=((6, 5, 0.5), (12, 7, 0.5)), requests=7, seed=count,
                           timeout_s=60)  # fmt: skip
    out = run_serving(request)
    assert out["tokens_match"] is True
    assert out["requests"] == 7
    assert 1 < out["max_in_flight"] <= batch  # arrivals faster than decoding: they batch
    assert out["tokens"] >= 7 * 5
    steps = out["steps"]
    # every request is prefilled once; a decode step moves 1..batch sequences, and the tokens
    # after each request's first are the sequences the decode steps moved
    assert steps["prefills"] == 7 and len(steps["stages"]) == count
    assert 1 <= steps["decode_batch"] <= batch
    assert steps["decode_steps"] * steps["decode_batch"] == pytest.approx(out["tokens"] - 7)
    for row in steps["stages"]:  # compute, then pacing (none here), then the sends
        assert 0 < row["decode_compute_s"] <= row["decode_paced_s"] <= row["decode_step_s"]
    _no_children(before)


def test_emulated_steps_keep_the_schedule() -> None:
    # two stages of 30 and 20 ms a decode step, 40 ms of links: no step's stages end before
    # its start plus their planned times, so the decode steps take 90 ms on average or more
    # and a request's output tokens after its first no less
    before = _children()
    stages = (ServeStage(0, 2, True, False, decode_s=0.03, prefill_s=(0.05,)),
              ServeStage(2, 4, False, True, decode_s=0.02, prefill_s=(0.05,)))  # fmt: skip
    request = ServeRequest(_config(), stages, 2, rate=50.0, classes=((4, 4, 1.0),),
                           requests=3, emulate=True, link_decode_s=0.04, timeout_s=60,
                           reference=False)  # fmt: skip
    out = run_serving(request)
    steps = out["steps"]
    first, _ = steps["stages"]
    assert first["decode_paced_s"] >= 0.03 * 0.95
    assert steps["decode_step_s"] >= 0.09 * 0.95
    assert out["tpot_mean"] >= 0.09 * 0.95
    assert steps["prefill_s"] >= 0.10 * 0.95
    _no_children(before)


@given(st.integers(1, 6), st.data())
@settings(max_examples=50, deadline=None)
def test_split_layers_covers_every_layer_once(layers: int, data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, layers + 1), max_size=4)))
    bounds = [0, *cuts, layers + 1]
    blocks = list(itertools.pairwise(bounds))
    ranks = split_layers(blocks, layers)
    seen = [i for first, last, _, _ in ranks for i in range(first, last)]
    assert seen == list(range(layers))
    assert [r[2] for r in ranks] == [True] + [False] * (len(ranks) - 1)
    assert [r[3] for r in ranks] == [False] * (len(ranks) - 1) + [True]


def test_a_failing_stage_is_reported_not_hung() -> None:
    before = _children()
    stages = (ServeStage(0, 2, True, False), ServeStage(2, 9, False, True))  # no layer 4..8
    request = ServeRequest(_config(), stages, 2, rate=100.0, classes=((4, 3, 1.0),),
                           requests=2, timeout_s=5)  # fmt: skip
    started = time.monotonic()
    with pytest.raises(ServingFailed, match="stage"):
        run_serving(request)
    assert time.monotonic() - started < 60
    _no_children(before)


def test_command_json_with_emulate() -> None:
    before = _children()
    result = runner.invoke(app, ["run", str(NETWORK), MODEL, "--workload", str(WORKLOAD),
                                 "--requests", "6", "--emulate", "--json", *CONFIG])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["tokens_match"] is True
    for key in ("ttft", "ttft_p95", "tpot", "tpot_p95", "tokens_per_s", "predicted_ttft",
                "predicted_tpot"):  # fmt: skip
        assert data[key] > 0, key
    assert data["ttft"] <= data["ttft_p95"] and data["tpot"] <= data["tpot_p95"]
    plan = data["plan"]
    assert sum(plan["layers_per_node"].values()) == SHAPE["num_hidden_layers"]
    # batch x longest context x per-token bytes (K and V, fp16) of the node's layers
    head_dim = SHAPE["hidden_size"] // SHAPE["num_attention_heads"]
    per_token_layer = 2 * SHAPE["num_key_value_heads"] * head_dim * 2
    context = max(16 + 8, 32 + 16)
    for node, layers in plan["layers_per_node"].items():
        assert plan["kv_cache_bytes"][node] == pytest.approx(
            plan["batch"] * context * per_token_layer * layers
        )
    assert 1 <= data["max_in_flight"] <= plan["batch"]
    run = data["predicted_run"]  # the plan's schedule replayed on these arrivals
    assert run["decode_step_s"] == pytest.approx(plan["decode_step_s"])
    assert run["tpot"] >= plan["decode_step_s"] and run["tokens_per_s"] > 0
    assert data["arrival_rate"] > 0 and data["steps"]["decode_steps"] > 0
    _no_children(before)


def _refused(args: list[str], code: int = 2) -> str:
    result = runner.invoke(app, ["run", *args])
    assert result.exit_code == code, (args, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_bad_options(tmp_path: Path) -> None:
    base = [str(NETWORK), MODEL, "--workload", str(WORKLOAD)]
    assert "requests" in _refused([*base, *CONFIG])
    assert "requests" in _refused([*base, "--requests", "0", *CONFIG])
    assert "--throughput" in _refused([*base, "--requests", "2", "--throughput", "3", *CONFIG])
    assert "workload" in _refused([str(NETWORK), MODEL, "--requests", "2", *CONFIG])
    assert "model" in _refused([str(NETWORK), "examples/llama-8b.yaml", "--workload",
                                str(WORKLOAD), "--requests", "2"])  # fmt: skip
    assert "timeout" in _refused([*base, "--requests", "2", "--timeout", "-1", *CONFIG])
    bad = tmp_path / "w.yaml"
    bad.write_text("requests_per_s: -1\nclasses:\n  - {prompt_tokens: 4, output_tokens: 2, "
                   "share: 1}\n")  # fmt: skip
    assert "requests_per_s" in _refused([str(NETWORK), MODEL, "--workload", str(bad),
                                         "--requests", "2", *CONFIG])  # fmt: skip


def test_a_rate_the_network_cannot_serve_is_infeasible(tmp_path: Path) -> None:
    fast = tmp_path / "w.yaml"
    fast.write_text(WORKLOAD.read_text().replace("requests_per_s: 3.0", "requests_per_s: 300"))
    line = _refused([str(NETWORK), MODEL, "--workload", str(fast), "--requests", "2", *CONFIG],
                    code=3)  # fmt: skip
    assert "requests/s" in line
