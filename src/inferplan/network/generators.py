"""Random networks: the co-design paper's tiered instances and large layered DAGs."""

from __future__ import annotations

import numpy as np

from inferplan.network.network import Link, Network, Node

__all__ = ["layered_dag", "tiered"]

GIGA, MEGA = 1e9, 1e6


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def tiered(seed: int | np.random.Generator | None = None) -> Network:
    """A network of the co-design paper's study (Section IV), drawn from ``seed``.

    ``s``; an access, a middle and a remote tier of 2-3 nodes each; ``t``. ``s`` and each tier
    node link to 1-3 distinct random nodes of the next tier; every remote node links to ``t``.
    Capacities are uniform per tier (GFLOP/s: access and ``s`` 6-30, middle 30-90, remote and
    ``t`` 90-180; Mbit/s of links into access 30-100, middle 100-300, remote and ``t``
    300-1000); prices log-uniform (0.1-10 per GFLOP/s, 0.01-1 per Mbit/s). Returned in SI units.

    Examples
    --------
    >>> net = tiered(seed=1)
    >>> 8 <= len(net.nodes) <= 11
    True
    """
    rng = _rng(seed)
    tiers = [["s"]]
    for name in ("a", "m", "r"):
        size = int(rng.integers(2, 4))
        tiers.append([f"{name}{k + 1}" for k in range(size)])
    tiers.append(["t"])
    compute = {0: (6, 30), 1: (6, 30), 2: (30, 90), 3: (90, 180), 4: (90, 180)}
    bandwidth = {1: (30, 100), 2: (100, 300), 3: (300, 1000), 4: (300, 1000)}
    nodes = [
        Node(v, rng.uniform(*compute[level]) * GIGA, _log_uniform(rng, 0.1, 10) / GIGA)
        for level, tier in enumerate(tiers)
        for v in tier
    ]
    links = []
    for level in range(len(tiers) - 1):
        nxt = tiers[level + 1]
        for u in tiers[level]:
            fanout = min(int(rng.integers(1, 4)), len(nxt))
            for k in sorted(rng.choice(len(nxt), size=fanout, replace=False)):
                links.append(
                    Link(
                        u,
                        nxt[int(k)],
                        rng.uniform(*bandwidth[level + 1]) * MEGA,
                        _log_uniform(rng, 0.01, 1) / MEGA,
                    )
                )
    return Network(nodes=tuple(nodes), links=tuple(links), source="s", target="t")


def layered_dag(
    n_nodes: int,
    n_links: int,
    *,
    layers: int | None = None,
    seed: int | np.random.Generator | None = None,
) -> Network:
    """A random layered DAG from ``s`` to ``t`` for scaling studies.

    ``n_nodes - 2`` inner nodes are spread over ``layers`` layers (about ``sqrt(n_nodes)`` by
    default); every inner node gets one link from the previous layer (``s`` for the first) so
    all are reachable, the last layer links to ``t``, and the remaining links join random
    nodes of consecutive layers. Capacities and prices follow the tiered study's ranges.
    """
    rng = _rng(seed)
    inner = max(n_nodes - 2, 1)
    layers = layers or max(1, int(round(inner**0.5)))
    layers = min(layers, inner)
    members = np.array_split(np.arange(inner), layers)
    names = [[f"v{int(k)}" for k in layer] for layer in members]
    ids = ["s", *[v for layer in names for v in layer], "t"]
    nodes = tuple(
        Node(v, rng.uniform(6, 180) * GIGA, _log_uniform(rng, 0.1, 10) / GIGA) for v in ids
    )
    pairs: set[tuple[str, str]] = set()
    levels = [["s"], *names, ["t"]]
    has_out: set[str] = set()
    for prev, layer in zip(levels[:-1], levels[1:], strict=True):
        for v in layer:
            u = prev[int(rng.integers(len(prev)))]
            pairs.add((u, v))
            has_out.add(u)
        for u in prev:
            if u not in has_out:
                pairs.add((u, layer[int(rng.integers(len(layer)))]))
    budget = n_links - len(pairs)
    consecutive = list(zip(levels[:-1], levels[1:], strict=True))
    sizes = np.array([len(a) * len(b) for a, b in consecutive], dtype=float)
    attempts = 0
    while budget > 0 and attempts < 20 * n_links:
        attempts += 1
        a, b = consecutive[int(rng.choice(len(consecutive), p=sizes / sizes.sum()))]
        pair = (a[int(rng.integers(len(a)))], b[int(rng.integers(len(b)))])
        if pair not in pairs:
            pairs.add(pair)
            budget -= 1
    links = tuple(
        Link(u, v, rng.uniform(30, 1000) * MEGA, _log_uniform(rng, 0.01, 1) / MEGA)
        for u, v in sorted(pairs)
    )
    return Network(nodes=nodes, links=links, source="s", target="t")
