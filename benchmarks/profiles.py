"""Profiling times and totals of deployed models: ``python benchmarks/profiles.py [--quick]``.

Prints one row per model: the seconds one profile takes on the meta device (build included for
``transformers`` models, after a warm-up profile that pays torch's one-off start), its blocks,
total FLOPs and parameters, and beside them two independent counts: an analytic formula and a
direct ``FlopCounterMode`` run of the eager model on the meta device. ``--quick`` skips the
LLaMA-7B-shaped rows. Needs the extras ``torch`` and ``transformers``; run from the repository
root (the reference CNNs come from ``tests/profiles/reference_models.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.profiles import reference_models as ref  # noqa: E402

from inferplan.profiles import decoder_lm, resnet50, vgg16  # noqa: E402
from inferplan.profiles.from_torch import profile_module  # noqa: E402
from inferplan.profiles.from_transformers import build_model, profile_transformers  # noqa: E402

SEQ = 128


def eager_flops(model: Any, **inputs: Any) -> float:
    """FLOPs of one eager forward on the meta device (no graph capture)."""
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(**inputs)
    return float(counter.get_total_flops())


def bert_flops(layers: int, d: int, ffn: int, t: int) -> float:
    """BERT encoder (base model with pooler): projections, both attention products, MLP."""
    return float(layers * (2 * t * d * 4 * d + 4 * t * t * d + 4 * t * d * ffn) + 2 * d * d)


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def transformers_rows(quick: bool) -> list[tuple[str, Any, float, float, float]]:
    ids = torch.zeros(1, SEQ, dtype=torch.int64, device="meta")
    cases: list[tuple[str, str, dict[str, Any], str, float]] = [
        ("BERT-base", "BertConfig", {}, "prefill", bert_flops(12, 768, 3072, SEQ)),
        ("GPT-2 small", "GPT2Config", {}, "prefill",
         decoder_lm(layers=12, hidden=768, heads=12, vocab_size=50257, seq_len=SEQ).total_flops),
        ("GPT-2 small", "GPT2Config", {}, "decode",
         decoder_lm(layers=12, hidden=768, heads=12, vocab_size=50257, seq_len=SEQ,
                    phase="decode").total_flops),
    ]  # fmt: skip
    llama = {"num_hidden_layers": 2, "hidden_size": 1024, "num_attention_heads": 16,
             "num_key_value_heads": 4, "intermediate_size": 2816, "vocab_size": 32000}  # fmt: skip
    kw = dict(layers=2, hidden=1024, heads=16, kv_heads=4, ffn_hidden=2816, gated_mlp=True,
              vocab_size=32000, seq_len=SEQ)  # fmt: skip
    cases += [
        ("Llama-style 2x1024 GQA", "LlamaConfig", llama, "prefill", decoder_lm(**kw).total_flops)
    ]  # type: ignore[arg-type]
    if not quick:
        seven = dict(layers=32, hidden=4096, heads=32, ffn_hidden=11008, gated_mlp=True,
                     vocab_size=32000, seq_len=2048)  # fmt: skip
        cases += [
            (
                "LLaMA-7B-shaped",
                "LlamaConfig",
                {"max_position_embeddings": 4096},
                "prefill",
                decoder_lm(**seven).total_flops,
            )
        ]  # type: ignore[arg-type]
    rows = []
    for label, config, overrides, phase, analytic in cases:
        seq = 2048 if "7B" in label else SEQ
        result, seconds = timed(lambda c=config, o=overrides, p=phase, s=seq: profile_transformers(
            c, o, seq_len=s, phase=p))  # fmt: skip
        model = build_model(config, overrides)
        tokens = torch.zeros(1, seq, dtype=torch.int64, device="meta")
        extra = {} if config == "BertConfig" else {"logits_to_keep": 1}
        if phase == "decode":
            cache = model(input_ids=tokens, use_cache=True).cache
            counted = eager_flops(model, input_ids=ids[:, :1], cache=cache, **extra)
        else:
            counted = eager_flops(model, input_ids=tokens, **extra)
        rows.append((f"{label} ({phase}, {seq} tokens)", result, seconds, analytic, counted))
    return rows


def cnn_rows() -> list[tuple[str, Any, float, float, float]]:
    rows = []
    for label, cls, want in (("VGG-16, 224x224", ref.VGG16, vgg16()),
                             ("ResNet-50, 224x224", ref.ResNet50, resnet50())):  # fmt: skip
        with torch.device("meta"):
            model = cls()
        result, seconds = timed(lambda m=model: profile_module(m, [(1, 3, 224, 224)]))
        x = torch.zeros(1, 3, 224, 224, device="meta")
        with FlopCounterMode(display=False) as counter:
            model(x)
        rows.append((label, result, seconds, want.total_flops, float(counter.get_total_flops())))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the LLaMA-7B-shaped rows")
    args = parser.parse_args()
    with torch.device("meta"):
        warm = torch.nn.Sequential(torch.nn.Linear(4, 4))
    profile_module(warm, [(1, 4)])
    profile_transformers("GPT2Config", {"n_layer": 1, "n_embd": 32, "n_head": 2}, seq_len=4)
    header = f"{'model':44} {'seconds':>8} {'blocks':>6} {'FLOPs':>10} {'params':>13} " \
             f"{'analytic':>10} {'eager counter':>13}"  # fmt: skip
    print(header)
    for label, result, seconds, analytic, counted in [*cnn_rows(), *transformers_rows(args.quick)]:
        p = result.profile
        print(f"{label:44} {seconds:8.2f} {p.n_blocks:6d} {p.total_flops:10.4g} "
              f"{sum(p.params):13,d} {analytic:10.4g} {counted:13.4g}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
