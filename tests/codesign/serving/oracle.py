"""A brute-force serving planner: every simple path, block partition, hardware and batch."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence

from inferplan.codesign.serving import Decoder, Hardware, Workload
from inferplan.network import Network


def paths(network: Network) -> Iterator[list[str]]:
    out: dict[str, list[str]] = {}
    for link in network.links:
        out.setdefault(link.source, []).append(link.target)

    def walk(path: list[str]) -> Iterator[list[str]]:
        if path[-1] == network.target:
            yield path
            return
        for z in out.get(path[-1], []):
            if z not in path:
                yield from walk([*path, z])

    yield from walk([network.source])


def stage_seconds(
    d: Decoder, w: Workload, b: int, first: int, last: int, hw: Hardware
) -> list[float]:
    """The decode step's and each class's prefill seconds of blocks first..last-1 on hw."""
    layers = sum(1 for k in range(first, last) if k < d.layers)
    head = last == d.layers + 1
    ctx = b * w.mean_context
    flops = layers * (b * d.token_flops + d.context_flops * ctx) + head * b * d.head_flops
    moved = (
        layers * (d.layer_bytes + d.kv_bytes_per_token_layer * ctx)
        + head * d.head_read_bytes
        + 2 * b * d.hidden_bytes
    )
    out = [max(flops / hw.flops, moved / hw.memory_bandwidth)]
    for c in w.classes:
        p = c.prompt_tokens
        flops = layers * p * (d.token_flops + d.context_flops * p) + head * d.head_flops
        moved = (
            layers * (d.layer_bytes + d.kv_bytes_per_token_layer * p)
            + head * d.head_read_bytes
            + 2 * p * d.hidden_bytes
        )
        out.append(max(flops / hw.flops, moved / hw.memory_bandwidth))
    return out


def memory_need(d: Decoder, w: Workload, b: int, first: int, last: int) -> float:
    layers = sum(1 for k in range(first, last) if k < d.layers)
    return d.weights_bytes(first, last) + layers * b * w.max_context * d.kv_bytes_per_token_layer


def serves(w: Workload, b: int, decode: float, prefill: Sequence[float], rate: float) -> bool:
    """Whether a path of these sums serves ``rate`` within the bounds (the model, directly)."""
    shares = [c.share for c in w.classes]
    rho_p = rate * sum(s * t for s, t in zip(shares, prefill, strict=True))
    rho_d = rate * w.mean_output_tokens * decode / b
    if rho_p + rho_d > 1 + 1e-12:
        return False
    residual = (
        rate * sum(s * t * t for s, t in zip(shares, prefill, strict=True)) / 2 + rho_d * decode / 2
    )
    wait = residual / (1 - rho_p)
    # a class-k sequence's tokens after its first: its O_k - 1 steps, the prefills queued
    # behind it when its own ends (rho_p (wait + T_k) s) and those arriving until its last
    # step starts, each second of it bringing rho_p s of prefill
    spans = [
        s * ((c.output_tokens - 1) * decode + rho_p * (wait + t - decode)) / (1 - rho_p)
        for s, t, c in zip(shares, prefill, w.classes, strict=True)
        if c.output_tokens > 1
    ]
    tokens = sum(s * (c.output_tokens - 1) for s, c in zip(shares, w.classes, strict=True))
    tpot = sum(spans) / tokens if tokens else decode / (1 - rho_p)
    if w.tpot_s is not None and tpot > w.tpot_s * (1 + 1e-12):
        return False
    return not (w.ttft_s is not None and wait + max(prefill) > w.ttft_s * (1 + 1e-12))


def best_rate(w: Workload, b: int, decode: float, prefill: Sequence[float]) -> float:
    low, high = 0.0, 1e12
    if not serves(w, b, decode, prefill, 1e-300):
        return 0.0
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if serves(w, b, decode, prefill, mid) else (low, mid)
    return low


def brute_force(
    network: Network,
    d: Decoder,
    w: Workload,
    options: Mapping[str, Sequence[Hardware]],
    batches: Sequence[int],
    objective: str,
) -> float | None:
    """The optimum: least $/h (cost) or most requests/s (goodput); None if infeasible."""
    links = {(e.source, e.target): e for e in network.links}
    n = d.layers + 1
    best: float | None = None
    for b in batches:
        for path in paths(network):
            for cuts in itertools.combinations_with_replacement(range(n + 1), len(path) - 1):
                bounds = [0, *cuts, n]
                choices = []
                for v, first, last in zip(path, bounds, bounds[1:], strict=False):
                    if first == last:
                        choices.append([None])
                    else:
                        choices.append(
                            [
                                h
                                for h in options.get(v, [])
                                if memory_need(d, w, b, first, last) <= h.memory
                            ]
                        )
                for hws in itertools.product(*choices):
                    times = [0.0] * (1 + len(w.classes))
                    price = 0.0
                    for k, hw in enumerate(hws):
                        if hw is None:
                            continue
                        price += hw.price_per_hour
                        secs = stage_seconds(d, w, b, bounds[k], bounds[k + 1], hw)
                        times = [x + y for x, y in zip(times, secs, strict=True)]
                    for k, (u, z) in enumerate(itertools.pairwise(path)):
                        e = links[u, z]
                        cut = bounds[k + 1]
                        bits = [d.cut_bits(cut, b, b)]
                        bits += [d.cut_bits(cut, c.prompt_tokens, 1) for c in w.classes]
                        times = [
                            x + y / e.capacity + e.delay_s for x, y in zip(times, bits, strict=True)
                        ]
                    if objective == "cost":
                        if serves(w, b, times[0], times[1:], w.requests_per_s):
                            best = price if best is None else min(best, price)
                    else:
                        rate = best_rate(w, b, times[0], times[1:])
                        if rate > 0:
                            best = rate if best is None else max(best, rate)
    return best
