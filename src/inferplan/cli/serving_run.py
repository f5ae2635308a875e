"""``inferplan run NET MODEL --workload W --requests K``: serve a decoder LM by its serving
plan (docs/runtime.md) and measure TTFT, TPOT and tokens/s beside the predicted ones."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from inferplan.cli.render import console, print_json
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.units import si

__all__ = ["serve_run"]

_FLOAT32_BYTES = 4  # a hidden state's element as the ranks send it


def testbed_links(network: Any, decoder: Any, plan: Any) -> tuple[list[float], list[float],
                                                                   float]:  # fmt: skip
    """The links between consecutive ranks of ``plan`` on the testbed: each one's rate (bit/s)
    and delay (the sum of the plan's links' between the two nodes), and the planned time of a
    decode step on the plan's links that no rank crosses.

    The plan's links between two nodes move a step's bits at ``R`` (``1 / R`` the sum of their
    ``1 / capacity``); the ranks send float32 hidden states, where the plan counts the
    decoder's ``bytes_per_element``: the link is shaped at ``R`` times their ratio, so that a
    step's hidden states take their planned time."""
    ends = {(link.source, link.target): (link.capacity, link.delay_s) for link in network.links}
    where = {v: k for k, v in enumerate(plan.path)}
    kept = [s for s in plan.stages if s.last > s.first]
    rates, delays, crossed = [], [], 0.0
    for a, b in itertools.pairwise(kept):
        hops = [ends[u, v] for u, v in itertools.pairwise(plan.path[where[a.node]:
                                                                    where[b.node] + 1])]
        rate = 1 / math.fsum(1 / c for c, _ in hops)
        rates.append(rate * _FLOAT32_BYTES / decoder.bytes_per_element)
        delays.append(math.fsum(d for _, d in hops))
        crossed += decoder.cut_bits(a.last, plan.batch, plan.batch) / rate + delays[-1]
    unrealised = plan.decode_step_s - math.fsum(s.decode_s for s in plan.stages) - crossed
    return rates, delays, max(0.0, unrealised)


def _request(network: Path, model: str, workload: Path, requests: int, config: list[str],
             batches: list[int] | None, emulate: bool, seed: int, timeout: float,
             testbed: bool = False) -> tuple[Any, Any, dict[str, Any]]:  # fmt: skip
    """The serving plan, what to run and the plan's part of the JSON (checked before any
    rank starts); on the ``testbed``, with ``testbed_links`` (:func:`testbed_links`)."""
    from inferplan.cli.serving import load_service
    from inferplan.codesign.serving.planner import DEFAULT_BATCHES, plan_serving, predictions
    from inferplan.codesign.serving.replay import replay_run
    from inferplan.runtime.serving import ServeRequest, ServeStage, request_arrivals, split_layers

    if not model.startswith("transformers:"):
        raise InvalidArgument("serving runs a model built from a transformers config: give "
                              "transformers:CONFIG_CLASS", field="model")  # fmt: skip
    if requests < 1:
        raise InvalidArgument(f"must be at least 1, got {requests}", field="requests")
    if not (math.isfinite(timeout) and timeout > 0):
        raise InvalidArgument(f"must be a positive number of seconds, got {timeout}",
                              field="timeout")  # fmt: skip
    net, decoder, work = load_service(network, model, config, workload)
    plan = plan_serving(net, decoder, work, objective="goodput",
                        batches=tuple(batches or DEFAULT_BATCHES))  # fmt: skip
    if work.requests_per_s > plan.max_requests_per_s:
        raise Infeasible(f"the network serves at most {plan.max_requests_per_s:.4g} requests/s "
                         f"(bound by {plan.binding}), the workload asks "
                         f"{work.requests_per_s:g}", details={"binding": plan.binding})  # fmt: skip
    from inferplan.profiles.from_transformers import _config, parse_config_overrides

    hf = _config(model.removeprefix("transformers:"), parse_config_overrides(config))
    kept = [s for s in plan.stages if s.last > s.first]
    ranks = split_layers([(s.first, s.last) for s in kept], decoder.layers)
    stages = tuple(ServeStage(a, b, e, h, s.decode_s, s.prefill_s)
                   for (a, b, e, h), s in zip(ranks, kept, strict=True))  # fmt: skip
    links = plan.decode_step_s - math.fsum(s.decode_s for s in plan.stages)
    prefill = [math.fsum(s.prefill_s[k] for s in plan.stages) for k in range(len(work.classes))]
    tpot, ttft = predictions(work, plan.batch, plan.decode_step_s, prefill, work.requests_per_s)
    shares = [c.share for c in work.classes]
    run = ServeRequest(hf, stages, plan.batch, work.requests_per_s,
                       tuple((c.prompt_tokens, c.output_tokens, c.share) for c in work.classes),
                       requests, seed=seed, emulate=emulate, link_decode_s=max(0.0, links),
                       timeout_s=timeout)  # fmt: skip
    came = [(a, k) for a, k, _ in request_arrivals(run)]
    summary = {
        "predicted_run": {
            **replay_run(work, plan.batch, plan.decode_step_s, prefill, came).to_dict(),
            "decode_step_s": plan.decode_step_s, "stage_decode_s": [s.decode_s for s in kept],
        },
        "predicted_ttft": math.fsum(s * t for s, t in zip(shares, ttft, strict=True)),
        "predicted_ttft_per_class": list(ttft), "predicted_tpot": tpot,
        "predicted_tokens_per_s": work.requests_per_s * work.mean_output_tokens,
        "plan": {**plan.to_dict(),
                 "layers_per_node": {s.node: s.layers for s in plan.stages},
                 "kv_cache_bytes": {s.node: s.kv_cache_bytes for s in plan.stages}},
    }  # fmt: skip
    if testbed:
        summary["testbed_links"] = testbed_links(net, decoder, plan)
    return plan, run, summary


def serve_run(network: Path, model: str, workload: Path, requests: int | None,
              config: list[str] | None, batches: list[int] | None, emulate: bool, seed: int,
              timeout: float, as_json: bool, others: list[str], *, testbed: bool = False,
              dilation: float | None = None) -> None:  # fmt: skip
    """Serve ``requests`` requests of ``workload`` through the serving plan of ``model`` on
    ``network`` and print what was measured beside what was predicted; on the ``testbed``
    (:mod:`inferplan.runtime.testbed.serving`), time dilated at least ``dilation`` times."""
    from inferplan.runtime.checks import check_testbed_options

    check_testbed_options(emulate, testbed, dilation)
    if others:
        raise InvalidArgument(f"{', '.join(others)} run co-design plans, not a --workload",
                              field="workload")  # fmt: skip
    if requests is None:
        raise InvalidArgument("give --requests K, the requests to serve", field="requests")
    _, run, summary = _request(network, model, workload, requests, list(config or ()), batches,
                               emulate, seed, timeout, testbed)  # fmt: skip
    measured = serve(run, summary, dilation)
    data = {"status": "served", "emulate": emulate, **measured, **summary}
    if as_json:
        print_json(data)
        return
    console.print(
        f"{measured['requests']} requests, {measured['tokens']} tokens through "
        f"{len(run.stages)} stage(s), batch {run.batch} (at most {measured['max_in_flight']} "
        f"in flight): TTFT {si(measured['ttft'], 's')} (predicted "
        f"{si(summary['predicted_ttft'], 's')}), TPOT {si(measured['tpot'], 's')} (predicted "
        f"{si(summary['predicted_tpot'], 's')}), {measured['tokens_per_s']:.4g} tokens/s; "
        f"tokens {'match' if measured['tokens_match'] else 'DIFFER from'} the unsplit model"
        + (f"; on the testbed, time dilated {measured['testbed']['dilation']:.3g}x"
           if "testbed" in measured else "")
    )


def serve(run: Any, summary: dict[str, Any], dilation: float | None = None) -> dict[str, Any]:
    """Serve ``run`` (from :func:`_request`): on the testbed when ``summary`` has its links,
    with what the testbed was (``testbed``) in the record."""
    from inferplan.runtime.serving import run_serving

    links = summary.pop("testbed_links", None)
    if links is None:
        return run_serving(run)
    from inferplan.runtime.testbed.serving import serving_testbed

    rates, delays, unrealised = links
    with serving_testbed(run, rates, delays, unrealised, at_least=dilation or 1.0) as (
        dilated, bed,
    ):
        return {**run_serving(dilated, bed), "testbed": bed.summary()}
