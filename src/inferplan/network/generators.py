"""Random networks: the co-design paper's tiered instances and large layered DAGs."""

from __future__ import annotations

import itertools

import numpy as np

from inferplan.network.network import Labels, Link, Network, Node

__all__ = ["layered_dag", "tiered"]

GIGA, MEGA = 1e9, 1e6


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def tiered(*, seed: int | np.random.Generator | None = None) -> Network:
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
    default); every inner node gets one link from the previous layer (``s`` for the first) and
    every node one link into the next layer, so all lie on some ``s``-``t`` path; the remaining
    links are drawn uniformly, without replacement, from all links between consecutive layers,
    until ``n_links`` or every such link exists. Capacities and prices
    follow the tiered study's ranges (compute 6-180 GFLOP/s, bandwidth 30-1000 Mbit/s).
    Vectorised, built column-wise: 50,000 nodes and 500,000 links take well under a second.

    Examples
    --------
    >>> net = layered_dag(50, 300, seed=1)
    >>> len(net.nodes), len(net.links)
    (50, 300)
    """
    rng = _rng(seed)
    inner = max(n_nodes - 2, 1)
    layers = min(layers or max(1, round(inner**0.5)), inner)
    # Node 0 is s, 1..inner the inner nodes layer by layer, inner + 1 is t.
    levels = [np.array([0]), *np.array_split(np.arange(1, inner + 1), layers),
              np.array([inner + 1])]  # fmt: skip
    n = inner + 2
    chosen: list[np.ndarray] = []
    for prev, layer in itertools.pairwise(levels):
        chosen.append(prev[rng.integers(prev.size, size=layer.size)] * n + layer)
        has_out = np.isin(prev, chosen[-1] // n)
        lonely = prev[~has_out]
        chosen.append(lonely * n + layer[rng.integers(layer.size, size=lonely.size)])
    pairs = np.unique(np.concatenate(chosen))
    # Every link between consecutive layers is equally likely: draw the rest without
    # replacement from those not yet chosen.
    possible = np.concatenate([(a[:, None] * n + b[None, :]).ravel()
                               for a, b in itertools.pairwise(levels)])  # fmt: skip
    free = np.ones(possible.size, dtype=bool)  # both sorted, and every chosen link possible
    free[np.searchsorted(possible, pairs)] = False
    free = possible[free]
    extra = rng.choice(free, size=min(max(n_links - pairs.size, 0), free.size), replace=False)
    pairs = np.sort(np.concatenate((pairs, extra)))
    ids = ["s", *(f"v{k - 1}" for k in range(1, inner + 1)), "t"]
    compute = rng.uniform(6, 180, size=n) * GIGA
    node_price = np.exp(rng.uniform(np.log(0.1), np.log(10), size=n)) / GIGA
    bandwidth = rng.uniform(30, 1000, size=pairs.size) * MEGA
    link_price = np.exp(rng.uniform(np.log(0.01), np.log(1), size=pairs.size)) / MEGA
    return Network.from_columns(
        node_ids=ids,
        node_capacity=compute,
        node_price=node_price,
        link_source=Labels(pairs // n, ids),
        link_target=Labels(pairs % n, ids),
        link_capacity=bandwidth,
        link_price=link_price,
        source="s",
        target="t",
    )
