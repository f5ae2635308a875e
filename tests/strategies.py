"""Hypothesis strategies shared by the test suite."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import strategies as st

from inferplan import Link, Network, Node, Profile
from inferplan.network.costs import CapacityCost, FunctionCost, LinearCost, ModuleCost, TieredCost
from inferplan.profiles.graph import LayerGraph

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


@st.composite
def layer_graphs(draw: st.DrawFn, max_layers: int = 8, branches: int | None = None) -> LayerGraph:
    """Random layer DAGs: a stem, then 1 to 3 branches (chains) that a join layer reads, or
    (``branches=0``) any DAG whose layers each read one or two earlier tensors. FLOPs may be
    zero; some layers have no reader (more outputs)."""
    sizes = st.floats(min_value=0.5, max_value=200.0, allow_nan=False)
    work = st.one_of(st.just(0.0), sizes)
    edges: list[tuple[str, str]] = []
    count = draw(st.integers(min_value=1, max_value=3)) if branches is None else branches
    if count == 0:
        n = draw(st.integers(min_value=1, max_value=max_layers))
        for k in range(n):
            tensors = ["input", *(f"l{j}" for j in range(k))]
            for u in draw(st.sets(st.sampled_from(tensors), min_size=1, max_size=2)):
                edges.append((u, f"l{k}"))
    else:
        stem = draw(st.booleans())
        n = int(stem)
        fork = "l0" if stem else "input"
        if stem:
            edges.append(("input", "l0"))
        tails = []
        room = max(count, max_layers - n - 1)
        lengths = draw(st.lists(st.integers(1, max(1, room // count)), min_size=count,
                                max_size=count))  # fmt: skip
        for length in lengths:
            prev = fork
            for _ in range(length):
                edges.append((prev, f"l{n}"))
                prev = f"l{n}"
                n += 1
            tails.append(prev)
        if count > 1 and draw(st.booleans()):
            edges.extend((t, f"l{n}") for t in tails)
            n += 1
    layers = tuple(f"l{k}" for k in range(n))
    flops = [draw(work) for _ in layers]
    if not any(flops):  # a model does some work
        flops[-1] = 1.0
    return LayerGraph(
        layers=layers,
        flops=tuple(flops),
        output_bits=tuple(draw(sizes) for _ in layers),
        edges=tuple(edges),
        input_bits=draw(sizes),
        params=tuple(draw(st.integers(0, 1000)) for _ in layers),
    )


def path_graph(profile: Profile) -> LayerGraph:
    """``profile``'s blocks as a path of layers (block ``k`` reads block ``k - 1``)."""
    names = tuple(f"b{k}" for k in range(profile.n_blocks))
    return LayerGraph(
        layers=names,
        flops=profile.flops,
        output_bits=profile.activation_bits[1:],
        edges=tuple(itertools.pairwise(("input", *names))),
        input_bits=profile.activation_bits[0],
        params=profile.params,
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


# --- documents for the command-line fuzz tests: extreme but well-formed values ----------------

extreme_seconds = st.one_of(
    st.sampled_from(
        [0.0, 5e-324, 1e-300, 1e-9, 0.5, 1.0, 1e3, 1e300, 1e308, 1.7976931348623157e308]
    ),
    st.floats(min_value=0.0, max_value=1e308, allow_nan=False),
)
"""Propagation delays and latency bounds anywhere in floating point (non-negative, finite)."""

latency_bounds = st.one_of(
    extreme_seconds.map(repr),
    st.sampled_from(["0", "-1", "nan", "inf", "1e400", "x"]),
)
"""``--latency`` arguments: any seconds, and some that are no bound at all."""


@st.composite
def delayed_network_docs(draw: st.DrawFn, base: dict) -> dict:
    """``base`` (a network document) with a drawn ``delay_s`` on each link (often 0, often
    extreme: their sums may pass floating point)."""
    doc = {**base, "links": [dict(e) for e in base["links"]]}
    for link in doc["links"]:
        if draw(st.booleans()):
            link["delay_s"] = draw(extreme_seconds)
    return doc


memory_amounts = st.one_of(
    st.sampled_from([0.0, 1.0, 1500.0, 1e6, 1e9, 1e300, 1e308]),
    st.floats(min_value=0.0, max_value=1e12, allow_nan=False),
)


@st.composite
def memory_network_docs(draw: st.DrawFn, base: dict) -> dict:
    """``base`` with memory on some nodes: a limit, a price, a cost function (modules or
    tiers), at extreme sizes."""
    doc = {**base, "nodes": [dict(n) for n in base["nodes"]]}
    for node in doc["nodes"]:
        kind = draw(st.sampled_from(["none", "limit", "price", "modules", "tiers"]))
        if kind == "none":
            continue
        node["memory"] = draw(memory_amounts)
        if kind == "price":
            node["memory_price"] = draw(st.sampled_from([0.0, 1e-9, 1.0, 1e300]))
        elif kind == "modules":
            node["memory_cost"] = {"kind": "modules", "size": draw(memory_amounts) or 1.0,
                                   "price": draw(st.sampled_from([0.0, 1e-6, 1e300]))}  # fmt: skip
        elif kind == "tiers":
            dearer = draw(st.sampled_from([1e-8, 1e300]))
            node["memory_cost"] = {"kind": "tiers", "upto": [draw(memory_amounts) or 1.0],
                                   "price": [1e-9, dearer]}  # fmt: skip
    return doc


@st.composite
def graph_profile_docs(draw: st.DrawFn, max_layers: int = 6) -> dict:
    """A profile document holding only a layer graph (:func:`layer_graphs`), with a drawn
    ``bytes_per_param``, sometimes ``state_bytes`` (of a drawn length), huge parameter
    counts, or a layer named as a reserved tensor."""
    graph = draw(layer_graphs(max_layers=max_layers))
    layers = [{"id": v, "flops": f, "params": p, "output_bits": b}
              for v, f, p, b in zip(graph.layers, graph.flops, graph.params, graph.output_bits,
                                    strict=True)]  # fmt: skip
    edges = [list(e) for e in graph.edges]
    doc: dict = {"name": "fuzz", "input_bits": graph.input_bits,
                 "graph": {"layers": layers, "edges": edges}}  # fmt: skip
    if draw(st.booleans()):
        doc["bytes_per_param"] = draw(st.sampled_from([0.5, 1.0, 2.0, 4.0, 1e-300, 1e308, 0]))
    if draw(st.booleans()):
        doc["state_bytes"] = draw(st.lists(memory_amounts, max_size=len(layers) + 1))
    if draw(st.integers(0, 4)) == 0:
        layers[draw(st.integers(0, len(layers) - 1))]["params"] = draw(
            st.sampled_from([2**62, 2**63, 2**64, 10**30])
        )
    if draw(st.integers(0, 5)) == 0:
        k = draw(st.integers(0, len(layers) - 1))
        old, new = layers[k]["id"], draw(st.sampled_from(["input", "output"]))
        layers[k]["id"] = new
        doc["graph"]["edges"] = [[new if t == old else t for t in e] for e in edges]
    return doc


@st.composite
def channel_docs(draw: st.DrawFn) -> dict:
    """Well-formed Markov and Gauss-Markov (Rayleigh or Rician) channel documents at extreme
    but valid values: nearly absorbing states, SNRs near the float range, K factors of 0 to
    huge, correlations at 0 and near 1."""
    snr = st.sampled_from([1e-300, 1e-9, 0.5, 3.0, 1e9, 1e300])
    if draw(st.booleans()):
        n = draw(st.integers(1, 3))
        rows = []
        for _ in range(n):
            stay = draw(st.sampled_from([1.0, 1 - 1e-15, 0.5, 0.0]))
            rest = [(1 - stay) / (n - 1)] * (n - 1) if n > 1 else []
            rows.append([stay, *rest] if n > 1 else [1.0])
        return {"kind": "markov", "snr": sorted(draw(snr) for _ in range(n)), "transition": rows}
    doc = {"kind": "gauss-markov", "mean_snr": draw(snr),
           "rho": draw(st.sampled_from([0.0, 0.5, 0.9999, 1 - 1e-12])),
           "grid": draw(st.sampled_from([2, 3, 5])),
           "fading": draw(st.sampled_from(["rayleigh", "rician"]))}  # fmt: skip
    if doc["fading"] == "rician":
        doc["k_factor"] = draw(st.sampled_from([0.0, 1e-300, 1.0, 1e6, 1e300]))
        doc["radii"], doc["phases"] = 2, 2
    return doc
