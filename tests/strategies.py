"""Hypothesis strategies shared by the test suite."""

from __future__ import annotations

import itertools

from hypothesis import strategies as st

from inferplan import Link, Network, Node, Profile

capacities = st.floats(min_value=1.0, max_value=100.0, allow_nan=False)
prices = st.one_of(st.just(0.0), st.floats(min_value=0.01, max_value=10.0, allow_nan=False))


@st.composite
def small_dags(draw: st.DrawFn, max_nodes: int = 6) -> Network:
    """Small random DAGs with a source-target path, including nodes that reach no target,
    nodes the source cannot reach, possibly a direct source-target link, and zero prices."""
    n = draw(st.integers(min_value=2, max_value=max_nodes))
    ids = [f"n{k}" for k in range(n)]
    target = draw(st.integers(min_value=1, max_value=n - 1))
    pairs = {(ids[u], ids[v]) for u in range(n) for v in range(u + 1, n) if draw(st.booleans())}
    # Guarantee a path: a random increasing chain from n0 to the target.
    chain = sorted(draw(st.sets(st.integers(1, target - 1), max_size=3))) if target > 1 else []
    hops = [0, *chain, target]
    pairs |= {(ids[a], ids[b]) for a, b in itertools.pairwise(hops)}
    nodes = tuple(Node(v, draw(capacities), draw(prices)) for v in ids)
    links = tuple(Link(u, v, draw(capacities), draw(prices)) for u, v in sorted(pairs))
    return Network(nodes=nodes, links=links, source=ids[0], target=ids[target])


@st.composite
def small_profiles(draw: st.DrawFn, max_blocks: int = 5) -> Profile:
    n = draw(st.integers(min_value=1, max_value=max_blocks))
    positive = st.floats(min_value=0.5, max_value=200.0, allow_nan=False)
    return Profile(
        "random",
        flops=tuple(draw(positive) for _ in range(n)),
        activation_bits=tuple(draw(positive) for _ in range(n + 1)),
    )
