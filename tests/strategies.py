"""Hypothesis strategies shared by the test suite."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import strategies as st

from inferplan import Link, Network, Node, Profile
from inferplan.network.costs import CapacityCost, FunctionCost, LinearCost, ModuleCost, TieredCost

capacities = st.floats(min_value=1.0, max_value=100.0, allow_nan=False)
# propagation delays beside stage times of about 0.005 to 200 s; often none at all
link_delays = st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=5.0, allow_nan=False))
prices = st.one_of(st.just(0.0), st.floats(min_value=0.01, max_value=10.0, allow_nan=False))


COST_KINDS = ("linear", "capped", "modules", "tiers", "function")
caps = st.floats(min_value=1.0, max_value=300.0, allow_nan=False)
# Shapes for FunctionCost: non-decreasing and zero at zero, neither linear nor convex.
_SHAPES = {
    "sqrt": lambda p: lambda x: p * np.sqrt(x),
    "square": lambda p: lambda x: p * np.square(x) / 10.0,
    "step": lambda p: lambda x: p * (np.asarray(x) > 0) + p * (np.asarray(x) > 20.0),
}


@st.composite
def capacity_costs(draw: st.DrawFn, kind: str) -> CapacityCost:
    """A capacity cost of ``kind`` (one of :data:`COST_KINDS`) with random parameters."""
    price = draw(prices)
    if kind == "linear":
        return LinearCost(price)
    if kind == "capped":
        return LinearCost(price, draw(caps))
    if kind == "modules":
        size = draw(st.floats(min_value=0.5, max_value=60.0))
        cap = draw(st.one_of(st.just(math.inf), caps))
        return ModuleCost(size, price, cap)
    if kind == "tiers":
        widths = draw(st.lists(st.floats(min_value=0.5, max_value=80.0), min_size=1, max_size=3))
        upto = tuple(itertools.accumulate(widths))
        bounded = draw(st.booleans())
        tier_prices = draw(st.lists(prices, min_size=len(upto) + (0 if bounded else 1),
                                    max_size=len(upto) + (0 if bounded else 1)))  # fmt: skip
        cap = draw(st.one_of(st.just(math.inf), caps))  # may cut tiers short
        return TieredCost(upto, tuple(tier_prices), cap)
    shape = draw(st.sampled_from(sorted(_SHAPES)))
    return FunctionCost(_SHAPES[shape](price), name=shape)


def _element_cost(draw: st.DrawFn, kinds: tuple[str, ...] | None) -> CapacityCost | None:
    return draw(capacity_costs(draw(st.sampled_from(kinds)))) if kinds else None


@st.composite
def small_dags(
    draw: st.DrawFn,
    max_nodes: int = 6,
    cost_kinds: tuple[str, ...] | None = None,
    delays: bool = False,
) -> Network:
    """Small random DAGs with a source-target path, including nodes that reach no target,
    nodes the source cannot reach, possibly a direct source-target link, and zero prices.

    With ``cost_kinds`` each node and link gets a cost function of one of those kinds; with
    ``delays`` each link a propagation delay (often 0)."""
    n = draw(st.integers(min_value=2, max_value=max_nodes))
    ids = [f"n{k}" for k in range(n)]
    target = draw(st.integers(min_value=1, max_value=n - 1))
    pairs = {(ids[u], ids[v]) for u in range(n) for v in range(u + 1, n) if draw(st.booleans())}
    # Guarantee a path: a random increasing chain from n0 to the target.
    chain = sorted(draw(st.sets(st.integers(1, target - 1), max_size=3))) if target > 1 else []
    hops = [0, *chain, target]
    pairs |= {(ids[a], ids[b]) for a, b in itertools.pairwise(hops)}
    return _network(draw, ids, pairs, ids[0], ids[target], cost_kinds, delays)


def _network(
    draw: st.DrawFn,
    ids: list[str],
    pairs: set[tuple[str, str]],
    source: str,
    target: str,
    cost_kinds: tuple[str, ...] | None,
    delays: bool = False,
) -> Network:
    nodes = tuple(
        Node(v, draw(capacities), draw(prices), _element_cost(draw, cost_kinds)) for v in ids
    )
    links = tuple(
        Link(u, v, draw(capacities), draw(prices), _element_cost(draw, cost_kinds),
             draw(link_delays) if delays else 0.0)
        for u, v in sorted(pairs)
    )  # fmt: skip
    return Network(nodes=nodes, links=links, source=source, target=target)


@st.composite
def small_networks(
    draw: st.DrawFn,
    max_nodes: int = 5,
    cost_kinds: tuple[str, ...] | None = None,
    delays: bool = False,
) -> Network:
    """Small random directed networks that may have cycles (links both ways, longer loops)
    on the way from source to target; a source-target path always exists. ``cost_kinds``
    and ``delays`` as for :func:`small_dags`."""
    n = draw(st.integers(min_value=2, max_value=max_nodes))
    ids = [f"n{k}" for k in range(n)]
    pairs = {(ids[u], ids[v]) for u in range(n) for v in range(n) if u != v and draw(st.booleans())}
    order = draw(st.permutations(range(1, n)))
    hops = [0, *order[: draw(st.integers(min_value=1, max_value=n - 1))]]
    pairs |= {(ids[a], ids[b]) for a, b in itertools.pairwise(hops)}
    return _network(draw, ids, pairs, ids[0], ids[hops[-1]], cost_kinds, delays)


@st.composite
def small_profiles(draw: st.DrawFn, max_blocks: int = 5) -> Profile:
    n = draw(st.integers(min_value=1, max_value=max_blocks))
    positive = st.floats(min_value=0.5, max_value=200.0, allow_nan=False)
    return Profile(
        "random",
        flops=tuple(draw(positive) for _ in range(n)),
        activation_bits=tuple(draw(positive) for _ in range(n + 1)),
    )


MEMORY_KINDS = ("limit", "price", *COST_KINDS)
"""How a node's memory may be given: a limit alone (not for sale), a price, or a cost function."""


@st.composite
def profiles_with_params(draw: st.DrawFn, max_blocks: int = 5) -> Profile:
    """:func:`small_profiles` whose blocks have parameters (some none), a ``bytes_per_param``
    and sometimes kept state (a KV cache)."""
    base = draw(small_profiles(max_blocks))
    n = base.n_blocks
    return Profile(
        "random",
        flops=base.flops,
        activation_bits=base.activation_bits,
        params=tuple(draw(st.integers(0, 40)) for _ in range(n)),
        bytes_per_param=draw(st.sampled_from((4.0, 2.0, 0.5))),
        state_bytes=tuple(draw(st.sampled_from((0.0, 0.0, 12.5, 30.0))) for _ in range(n)),
    )


@st.composite
def with_memory(
    draw: st.DrawFn, network: Network, most: float, kinds: tuple[str, ...] = MEMORY_KINDS
) -> Network:
    """``network`` with memory on some nodes (up to ``most`` bytes, often less than a
    deployment needs), each of a kind of :data:`MEMORY_KINDS`."""
    nodes = []
    for node in network.nodes:
        if draw(st.integers(0, 3)) == 0:  # unlimited
            nodes.append(node)
            continue
        memory = draw(st.floats(min_value=0.0, max_value=most))
        kind = draw(st.sampled_from(kinds))
        price = draw(prices) if kind == "price" else None
        cost = draw(capacity_costs(kind)) if kind in COST_KINDS else None
        nodes.append(Node(node.id, node.capacity, node.price, node.cost, memory, price, cost))
    return Network(nodes=nodes, links=network.links, source=network.source,
                   target=network.target)  # fmt: skip
