"""Independent brute-force oracles for the co-design problem.

They enumerate every simple source-target path (networkx) and every partition vector, and
price each deployment from the problem definition alone (docs/model.md, part A), sharing no
code with the solvers under test.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import networkx as nx
import numpy as np

from inferplan import Network, Node, Profile
from inferplan.profiles.graph import LayerGraph

CostFn = Callable[[float], float]


@dataclass(frozen=True)
class Candidate:
    path: tuple[str, ...]
    partition: tuple[int, ...]
    interval: float  # under the existing capacities
    cost: float  # least cost to reach the target interval with this deployment


def deployments(
    network: Network, n_blocks: int
) -> Iterator[tuple[tuple[str, ...], tuple[int, ...]]]:
    """Every simple s-t path with every non-decreasing partition vector ending at N."""
    graph = nx.DiGraph()
    graph.add_nodes_from(n.id for n in network.nodes)
    graph.add_edges_from((e.source, e.target) for e in network.links)
    for path in nx.all_simple_paths(graph, network.source, network.target):
        for inner in itertools.combinations_with_replacement(range(n_blocks + 1), len(path) - 1):
            yield tuple(path), (*inner, n_blocks)


def _scalar(cost: object) -> CostFn:
    fn = cost

    def call(x: float) -> float:
        return float(np.asarray(fn(np.array([x])))[0])  # type: ignore[operator]

    return call


def evaluate(
    network: Network,
    profile: Profile,
    path: tuple[str, ...],
    partition: tuple[int, ...],
    beta: float,
) -> Candidate:
    """Interval and least upgrade cost of one deployment, straight from the definitions."""
    nodes = {n.id: n for n in network.nodes}
    links = {(e.source, e.target): e for e in network.links}
    S = [0.0, *itertools.accumulate(profile.flops)]
    D = profile.activation_bits
    interval, cost, prev = 0.0, 0.0, 0
    for k, v in enumerate(path):
        b = partition[k]
        work = S[b] - S[prev]
        node = nodes[v]
        interval = max(interval, work / node.capacity)
        cost += _scalar(node.capacity_cost)(max(0.0, work / beta - node.capacity))
        if k + 1 < len(path):
            link = links[(v, path[k + 1])]
            interval = max(interval, D[b] / link.capacity)
            cost += _scalar(link.capacity_cost)(max(0.0, D[b] / beta - link.capacity))
        prev = b
    return Candidate(path, partition, interval, cost)


def brute_force_cost(network: Network, profile: Profile, beta: float) -> float:
    """Minimum co-design cost over all deployments."""
    return min(
        evaluate(network, profile, p, b, beta).cost
        for p, b in deployments(network, profile.n_blocks)
    )


def brute_force_interval(network: Network, profile: Profile) -> float:
    """``T*``: the least interval over all deployments under the existing capacities."""
    return min(
        evaluate(network, profile, p, b, math.inf).interval
        for p, b in deployments(network, profile.n_blocks)
    )


def most_added(cost: object) -> float:
    """The most capacity a cost function sells: its ``max_amount``, or as many whole modules of
    ``size`` as fit under it."""
    cap = float(cost.max_amount)  # type: ignore[attr-defined]
    size = getattr(cost, "size", None)
    if size is None or math.isinf(cap):
        return cap
    return math.floor(cap / size * (1 + 1e-9)) * size


def stage_times_at_caps(
    network: Network, profile: Profile, path: tuple[str, ...], partition: tuple[int, ...]
) -> dict[tuple[str, str], float]:
    """Each stage's time with every node and link at its capacity plus the most its cost
    function sells, by ``(kind, id)`` (a link's id ``u->v``)."""
    nodes = {n.id: n.capacity + most_added(n.capacity_cost) for n in network.nodes}
    links = {(e.source, e.target): e.capacity + most_added(e.capacity_cost) for e in network.links}
    times, prev = {}, 0
    for k, v in enumerate(path):
        times[("node", v)] = sum(profile.flops[prev : partition[k]]) / nodes[v]
        if k + 1 < len(path):
            bits = profile.activation_bits[partition[k]]
            times[("link", f"{v}->{path[k + 1]}")] = bits / links[v, path[k + 1]]
        prev = partition[k]
    return times


def brute_force_interval_at_caps(network: Network, profile: Profile) -> float:
    """The least interval any plan can reach: ``T*`` over all deployments with every node and
    link at its cap (:func:`stage_times_at_caps`)."""
    return min(
        max(stage_times_at_caps(network, profile, p, b).values())
        for p, b in deployments(network, profile.n_blocks)
    )


CYCLIC_NETWORK = {
    "source": "s",
    "target": "t",
    "nodes": [{"id": "s", "capacity": 1e9, "price": 1e-9},
              {"id": "a", "capacity": 5e9, "price": 1e-10},
              {"id": "b", "capacity": 2e9, "price": 1e-9},
              {"id": "t", "capacity": 1e10, "price": 1e-10}],
    "links": [{"source": "s", "target": "a", "capacity": 1e8, "price": 1e-8},
              {"source": "a", "target": "b", "capacity": 1e8, "price": 1e-8},
              {"source": "b", "target": "a", "capacity": 1e8, "price": 1e-8},
              {"source": "s", "target": "b", "capacity": 1e7, "price": 1e-8},
              {"source": "b", "target": "t", "capacity": 1e8, "price": 1e-8}],
}  # fmt: skip
"""A network file with a cycle on the way from source to target: s -> a <-> b -> t, s -> b."""


def graph_ideals(graph: LayerGraph) -> list[frozenset[str]]:
    """Every down-closed set of layers (a layer with each layer it reads), by brute force over
    all subsets, smallest first."""
    reads = {v: {u for u, w in graph.edges if w == v and u != "input"} for v in graph.layers}
    found = []
    for size in range(len(graph.layers) + 1):
        for subset in itertools.combinations(graph.layers, size):
            chosen = set(subset)
            if all(reads[v] <= chosen for v in chosen):
                found.append(frozenset(chosen))
    return found


def boundary_bits(graph: LayerGraph, done: frozenset[str]) -> float:
    """Bits leaving ``done``: each tensor made there (the input too) that a layer outside it
    reads, and each output (a layer nobody reads) in it."""
    bits = dict(zip(graph.layers, graph.output_bits, strict=True))
    bits["input"] = graph.input_bits
    readers: dict[str, set[str]] = {v: set() for v in ["input", *graph.layers]}
    for u, v in graph.edges:
        readers[u].add(v)
    made = {"input", *done}
    return math.fsum(
        bits[u] for u in sorted(made)
        if (readers[u] - done) or (u != "input" and not readers[u])
    )  # fmt: skip


def evaluate_graph(
    network: Network,
    graph: LayerGraph,
    path: tuple[str, ...],
    chain: tuple[frozenset[str], ...],
    beta: float,
) -> Candidate:
    """Interval and least upgrade cost of running ``chain[l] - chain[l-1]`` on ``path[l]``."""
    nodes = {n.id: n for n in network.nodes}
    links = {(e.source, e.target): e for e in network.links}
    flops = dict(zip(graph.layers, graph.flops, strict=True))
    interval, cost, prev = 0.0, 0.0, frozenset[str]()
    for k, v in enumerate(path):
        work = math.fsum(flops[x] for x in chain[k] - prev)
        node = nodes[v]
        interval = max(interval, work / node.capacity)
        cost += _scalar(node.capacity_cost)(max(0.0, work / beta - node.capacity))
        if k + 1 < len(path):
            link = links[(v, path[k + 1])]
            d = boundary_bits(graph, chain[k])
            interval = max(interval, d / link.capacity)
            cost += _scalar(link.capacity_cost)(max(0.0, d / beta - link.capacity))
        prev = chain[k]
    return Candidate(path, (), interval, cost)


def graph_deployments(
    network: Network, graph: LayerGraph
) -> Iterator[tuple[tuple[str, ...], tuple[frozenset[str], ...]]]:
    """Every simple s-t path with every chain of ideals ending at all layers."""
    nx_graph = nx.DiGraph()
    nx_graph.add_nodes_from(n.id for n in network.nodes)
    nx_graph.add_edges_from((e.source, e.target) for e in network.links)
    ideals = graph_ideals(graph)
    everything = ideals[-1]
    for path in nx.all_simple_paths(nx_graph, network.source, network.target):
        for inner in itertools.combinations_with_replacement(range(len(ideals)), len(path) - 1):
            chain = (*(ideals[k] for k in inner), everything)
            if all(a <= b for a, b in itertools.pairwise(chain)):
                yield tuple(path), chain


def plan_latency(
    network: Network,
    profile: Profile,
    path: tuple[str, ...],
    partition: tuple[int, ...],
    node_upgrades: dict[str, float] | None = None,
    link_upgrades: dict[tuple[str, str], float] | None = None,
) -> float:
    """One inference's time through a deployment, straight from the definition: every
    node's blocks at its capacity (plus upgrades), every link's bits at its bandwidth (plus
    upgrades), and every link's propagation delay."""
    nodes = {n.id: n for n in network.nodes}
    links = {(e.source, e.target): e for e in network.links}
    more_c, more_b = node_upgrades or {}, link_upgrades or {}
    D = profile.activation_bits
    total, prev = 0.0, 0
    for k, v in enumerate(path):
        b = partition[k]
        total += sum(profile.flops[prev:b]) / (nodes[v].capacity + more_c.get(v, 0.0))
        if k + 1 < len(path):
            link = links[(v, path[k + 1])]
            total += D[b] / (link.capacity + more_b.get((v, path[k + 1]), 0.0)) + link.delay_s
        prev = b
    return total


def memory_need(profile: Profile, received: int, sent: int) -> float:
    """Bytes a node running blocks ``received+1..sent`` holds, from the definition
    (docs/model.md): parameters and kept state of its blocks plus the largest input+output
    activation of one of them; the relayed activation when it runs none."""
    D = profile.activation_bits
    if received == sent:
        return D[sent] / 8
    blocks = range(received, sent)  # 0-based block indices
    held = math.fsum(profile.params[n] * profile.bytes_per_param + profile.state_bytes[n]
                     for n in blocks)  # fmt: skip
    return held + max((D[n] + D[n + 1]) / 8 for n in blocks)


def memory_cost(
    network: Network,
    profile: Profile,
    path: tuple[str, ...],
    partition: tuple[int, ...],
    memory: dict[str, float] | None = None,
) -> float:
    """The least price of the memory a deployment needs beyond each node's (``inf`` where it
    cannot be bought); ``memory`` in place of the nodes' own, when given."""
    nodes = {n.id: n for n in network.nodes}
    total, prev = 0.0, 0
    for v, b in zip(path, partition, strict=True):
        node = nodes[v]
        have = (memory or {}).get(v, math.inf if node.memory is None else node.memory)
        total += short_memory_price(node, memory_need(profile, prev, b) - have)
        prev = b
    return total


def short_memory_price(node: Node, short: float) -> float:
    """The price of ``short`` bytes more on ``node`` (0 for none, ``inf`` if it cannot buy)."""
    if short <= 0:
        return 0.0
    if node.memory_cost is not None:
        return _scalar(node.memory_cost)(short)
    if node.memory_price is not None:
        return node.memory_price * short
    return math.inf


def brute_force_memory_cost(network: Network, profile: Profile, beta: float) -> float:
    """Minimum co-design cost over all deployments, memory priced per node."""
    return min(
        evaluate(network, profile, p, b, beta).cost + memory_cost(network, profile, p, b)
        for p, b in deployments(network, profile.n_blocks)
    )


def brute_force_fitting_interval(network: Network, profile: Profile) -> float:
    """``T*`` among the deployments that fit today's memory (``inf`` if none does)."""
    return min(
        (evaluate(network, profile, p, b, math.inf).interval
         for p, b in deployments(network, profile.n_blocks)
         if all(memory_need(profile, a, c) <= (math.inf if n.memory is None else n.memory)
                for n, a, c in zip([network.node_by_id[v] for v in p], (0, *b[:-1]), b,
                                   strict=True))),
        default=math.inf,
    )  # fmt: skip


def graph_memory_cost(
    network: Network,
    graph: LayerGraph,
    path: tuple[str, ...],
    chain: tuple[frozenset[str], ...],
    bytes_per_param: float = 4.0,
) -> float:
    """The least price of the memory a deployment at ideals needs beyond each node's: a node
    holds its layers' parameters and the largest working set of one of them (the tensors it
    reads and its output), or, forwarding, the boundary it relays; ``inf`` where it cannot be
    bought."""
    bits = dict(zip(graph.layers, graph.output_bits, strict=True))
    bits["input"] = graph.input_bits
    params = dict(zip(graph.layers, graph.params, strict=True))
    reads = {v: [u for u, w in graph.edges if w == v] for v in graph.layers}
    nodes = {n.id: n for n in network.nodes}
    total, prev = 0.0, frozenset[str]()
    for v, done in zip(path, chain, strict=True):
        runs = done - prev
        if runs:
            need = math.fsum(bytes_per_param * params[x] for x in runs) + max(
                math.fsum([*(bits[u] for u in reads[x]), bits[x]]) / 8.0 for x in runs
            )
        else:
            need = boundary_bits(graph, prev) / 8.0
        node = nodes[v]
        total += short_memory_price(node, need - (math.inf if node.memory is None else node.memory))
        prev = done
    return total
