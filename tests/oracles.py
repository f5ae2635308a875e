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


# --- latency bounds: every deployment allocated exactly, from the definitions -------------
#
# A stage (a node's compute or a link's transfer) has a load ``w``, a capacity ``C``, a least
# purchase ``rho`` (the interval's) and a cost function; buying ``x`` makes it take
# ``w / (C + x)``. For one deployment the cheapest purchases whose delays sum to at most the
# bound less the propagation delays are found by bisection on the multiplier ``lam`` of the
# delay (each stage's best response the least of ``f(x) + lam w / (C + x)`` over its
# candidate points: the interval's least purchase, the cap, every tier boundary and each
# tier's stationary point) when every cost is convex, and by enumerating the module counts
# (and the tier of each falling-tiered stage) otherwise.

_HUGE = 1e30  # "as much as you like" for a free cost without a cap


def _pieces(cost: object) -> list[tuple[float, float, float, float]] | None:
    """``(start, end, slope, cost at start)`` of a linear or tiered cost, read from its
    fields; ``None`` for modules."""
    from inferplan.network.costs import LinearCost, ModuleCost, TieredCost

    if isinstance(cost, ModuleCost):
        return None
    if isinstance(cost, LinearCost):
        return [(0.0, cost.max_amount, cost.price, 0.0)]
    assert isinstance(cost, TieredCost)
    out, start, value = [], 0.0, 0.0
    for k, price in enumerate(cost.prices):
        end = cost.upto[k] if k < len(cost.upto) else math.inf
        end = min(end, cost.max_amount)
        if start >= end and k:
            break
        out.append((start, end, price, value))
        value += price * (end - start) if math.isfinite(end) else 0.0
        start = end
    return out


@dataclass(frozen=True)
class _OracleStage:
    w: float
    C: float
    rho: float
    pieces: tuple[tuple[float, float, float, float], ...]  # a point piece: start == end

    def best(self, lam: float) -> tuple[float, float]:
        """(cost, delay) of the best response at ``lam``."""
        if self.w == 0:
            return self.cost(self.rho), 0.0
        found = (math.inf, math.inf, math.inf)
        for a, b, p, v in self.pieces:
            lo = max(a, self.rho)
            if lo > b:
                continue
            hi = min(b, _HUGE)
            points = [lo, hi]
            if p > 0 and lam > 0:
                points.append(min(max(math.sqrt(lam * self.w / p) - self.C, lo), hi))
            for x in points:
                f = v + p * (x - a)
                d = self.w / (self.C + x)
                if f + lam * d < found[0]:
                    found = (f + lam * d, f, d)
        return found[1], found[2]

    def cost(self, x: float) -> float:
        for a, b, p, v in self.pieces:
            if a <= x <= b:
                return v + p * (x - a)
        return math.inf

    @property
    def fastest(self) -> float:
        most = max((min(b, _HUGE) for a, b, _, _ in self.pieces if max(a, self.rho) <= b),
                   default=-math.inf)  # fmt: skip
        return self.w / (self.C + most) if most >= 0 else math.inf


def _convex(stages: list[_OracleStage], budget: float) -> float:
    return _convex_at(stages, budget)[0]


def _convex_at(stages: list[_OracleStage], budget: float) -> tuple[float, float]:
    """The least cost of ``stages`` within ``budget`` and the multiplier reached."""
    cost = math.fsum(s.best(0.0)[0] for s in stages)
    if math.fsum(s.best(0.0)[1] for s in stages) <= budget:
        return cost, 0.0
    if math.fsum(s.fastest for s in stages) > budget:
        return math.inf, math.inf
    lo, hi = math.log(1e-12), math.log(1e40)
    for _ in range(90):
        mid = 0.5 * (lo + hi)
        if math.fsum(s.best(math.exp(mid))[1] for s in stages) <= budget:
            hi = mid
        else:
            lo = mid
    return math.fsum(s.best(math.exp(hi))[0] for s in stages), math.exp(hi)


def _rounded_up(stages: list[tuple[float, float, float, object]], budget: float) -> float:
    """A feasible cost: modules priced per unit (their relaxation), allocated, and each
    module stage's purchase rounded up to whole modules (faster, so still within budget)."""
    from inferplan.network.costs import ModuleCost

    relaxed = []
    for w, C, rho, cost in stages:
        if isinstance(cost, ModuleCost):
            most = cost.max_modules * cost.size
            relaxed.append(_OracleStage(w, C, rho, ((0.0, most, cost.price / cost.size, 0.0),)))
        else:
            relaxed.append(_OracleStage(w, C, rho, tuple(_pieces(cost) or ())))
    _, lam = _convex_at(relaxed, budget)
    if math.isinf(lam):
        return math.inf
    total = 0.0
    for (w, C, rho, cost), stage in zip(stages, relaxed, strict=True):
        f, d = stage.best(lam)
        if isinstance(cost, ModuleCost):
            x = C * 0 + (w / d - C if d > 0 else rho) if w > 0 else rho
            f = cost.price * math.ceil(max(x, rho) / cost.size * (1 - 1e-12))
        total += f
    return total


def _allocated(
    stages: list[tuple[float, float, float, object]], budget: float, upper: float
) -> float:
    """The least cost of purchases for ``stages`` ``(w, C, rho, cost)`` whose delays sum to
    at most ``budget`` (``inf`` if none) below ``upper``: the module counts (from the least
    the interval needs, while the rest could still do with their least) and the tier of
    each falling-tiered stage enumerated, the convex rest by bisection."""
    from inferplan.network.costs import ModuleCost, TieredCost

    fixed: list[_OracleStage] = []
    odd: list[tuple[float, float, float, object]] = []
    for w, C, rho, cost in stages:
        pieces = _pieces(cost)
        if w > 0 and (pieces is None or (isinstance(cost, TieredCost) and not cost.convex)):
            odd.append((w, C, rho, cost))
        elif pieces is None:
            fixed.append(_OracleStage(w, C, rho, ((0.0, 0.0, 0.0, 0.0),)))
        else:
            fixed.append(_OracleStage(w, C, rho, tuple(pieces)))
    slowest = [math.fsum(s.best(0.0)[1] for s in fixed)]  # delays at the least purchases
    best = [min(upper, _rounded_up(stages, budget) * (1 + 1e-9))]

    def options(w: float, C: float, rho: float, cost: object) -> Iterator[_OracleStage]:
        pieces = _pieces(cost)
        if pieces is not None:
            yield from (_OracleStage(w, C, rho, (piece,)) for piece in pieces)
            return
        assert isinstance(cost, ModuleCost)
        m = math.ceil(rho / cost.size * (1 - 1e-12))
        if cost.price == 0:
            most = cost.max_modules * cost.size if math.isfinite(cost.max_modules) else _HUGE
            yield _OracleStage(w, C, rho, ((most, most, 0.0, 0.0),))
            return
        while m <= cost.max_modules and cost.price * m < best[0]:
            yield _OracleStage(w, C, rho, ((m * cost.size, m * cost.size, 0.0, cost.price * m),))
            m += 1

    def relaxed(x: tuple[float, float, float, object]) -> _OracleStage:
        """A convex stage costing at most ``x``'s: modules priced per unit, falling tiers
        at their lowest marginal price."""
        w, C, rho, cost = x
        pieces = _pieces(cost)
        if pieces is None:
            assert isinstance(cost, ModuleCost)
            most = cost.max_modules * cost.size
            return _OracleStage(w, C, rho, ((0.0, most, cost.price / cost.size, 0.0),))
        return _OracleStage(w, C, rho, ((0.0, pieces[-1][1], min(p[2] for p in pieces), 0.0),))

    def search(k: int, chosen: list[_OracleStage]) -> None:
        bound = _convex([*fixed, *chosen, *map(relaxed, odd[k:])], budget)
        if bound >= best[0]:
            return  # not even the relaxation of the rest beats the best
        if k == len(odd):
            best[0] = bound
            return
        w, C, rho, cost = odd[k]
        later_least = math.fsum(x[0] / (x[1] + x[2]) for x in odd[k + 1 :])
        taken = math.fsum(s.best(0.0)[1] for s in chosen)
        for option in options(w, C, rho, cost):
            search(k + 1, [*chosen, option])
            if (isinstance(cost, ModuleCost)
                    and slowest[0] + taken + option.fastest + later_least <= budget):  # fmt: skip
                break  # the rest fit at their least: more modules here only cost more

    search(0, [])
    return best[0]


def brute_force_latency_cost(
    network: Network,
    profile: Profile,
    beta: float,
    latency: float,
    *,
    memory: bool = False,
    keep: Callable[[tuple[str, ...], tuple[int, ...]], bool] | None = None,
) -> float:
    """The least cost of a plan whose stages all take at most ``beta`` and whose latency is
    at most ``latency``: every simple path (cycles or not) and partition, allocated exactly
    (``inf`` when none can be); with ``memory``, each deployment's memory priced too; with
    ``keep``, only the deployments ``(path, partition)`` it keeps."""
    nodes = {n.id: n for n in network.nodes}
    links = {(e.source, e.target): e for e in network.links}
    S = [0.0, *itertools.accumulate(profile.flops)]
    D = profile.activation_bits
    best = math.inf
    for path, partition in deployments(network, profile.n_blocks):
        if keep is not None and not keep(path, partition):
            continue
        stages, propagation, prev = [], 0.0, 0
        for k, v in enumerate(path):
            b = partition[k]
            work, node = S[b] - S[prev], nodes[v]
            stages.append((work, node.capacity, max(0.0, work / beta - node.capacity),
                           node.capacity_cost))  # fmt: skip
            if k + 1 < len(path):
                link = links[(v, path[k + 1])]
                stages.append((D[b], link.capacity, max(0.0, D[b] / beta - link.capacity),
                               link.capacity_cost))  # fmt: skip
                propagation += link.delay_s
            prev = b
        held = memory_cost(network, profile, path, partition) if memory else 0.0
        if evaluate(network, profile, path, partition, beta).cost + held >= best:
            continue  # even the interval's least purchases cost more
        best = min(best, held + _allocated(stages, latency - propagation, best - held))
    return best


def plan_price_and_interval(
    network: Network, profile: Profile, plan: object
) -> tuple[float, float]:
    """What a plan's compute and bandwidth upgrades cost under the network's cost functions,
    and the interval its deployment reaches with them, from the definitions."""
    nodes = {n.id: n for n in network.nodes}
    links = {(e.source, e.target): e for e in network.links}
    more_c = dict(plan.node_upgrades)  # type: ignore[attr-defined]
    more_b = {(u.source, u.target): u.amount for u in plan.link_upgrades}  # type: ignore[attr-defined]
    price = math.fsum(
        [
            *(_scalar(nodes[v].capacity_cost)(x) for v, x in more_c.items()),
            *(_scalar(links[e].capacity_cost)(x) for e, x in more_b.items()),
        ]
    )
    path, partition = plan.path, plan.partition  # type: ignore[attr-defined]
    D, times, prev = profile.activation_bits, [], 0
    for k, v in enumerate(path):
        b = partition[k]
        times.append(sum(profile.flops[prev:b]) / (nodes[v].capacity + more_c.get(v, 0.0)))
        if k + 1 < len(path):
            e = (v, path[k + 1])
            times.append(D[b] / (links[e].capacity + more_b.get(e, 0.0)))
        prev = b
    return price, max(times)


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


def layouts(network: Network, n_blocks: int) -> Iterator[dict[str, tuple[int, int]]]:
    """Every layout: each node holds nothing or one range ``(a, b]``, ``0 <= a < b <= N``."""
    ranges = [None, *itertools.combinations(range(n_blocks + 1), 2)]
    ids = [n.id for n in network.nodes]
    for pick in itertools.product(ranges, repeat=len(ids)):
        yield {v: r for v, r in zip(ids, pick, strict=True) if r is not None}


BlockSeconds = dict[str, list[float]]
"""Seconds each block takes on some nodes, measured at their capacity (a node times file)."""


def range_load(
    network: Network, profile: Profile, node: str, a: int, b: int,
    block_seconds: BlockSeconds | None = None,
) -> float:  # fmt: skip
    """Node ``node``'s load (FLOPs) for blocks ``a+1..b``: the blocks' FLOPs, or where
    ``block_seconds`` measures the node, its seconds for them times its capacity."""
    times = (block_seconds or {}).get(node)
    if times is None:
        return math.fsum(profile.flops[a:b])
    capacity = next(n.capacity for n in network.nodes if n.id == node)
    return math.fsum(times[a:b]) * capacity


def _layout_lp(
    network: Network, profile: Profile, layout: dict[str, tuple[int, int]], rate: float | None,
    block_seconds: BlockSeconds | None = None,
) -> float:
    """The largest rate (``rate`` None) or the least upgrade cost of ``rate`` for one layout,
    from the definitions: compute arcs ``(v, a) -> (v, b)`` of the layout's ranges, link arcs
    ``(u, j) -> (v, j)`` (none into the source or out of the target), balance at every state.
    Linear, capped and module costs (module counts integral). ``inf`` when infeasible. Node
    loads by :func:`range_load` (``block_seconds``: measured times on some nodes)."""
    from scipy.optimize import LinearConstraint, milp

    N = profile.n_blocks
    D = profile.activation_bits
    s, t = network.source, network.target
    names: list[tuple[str, object]] = []  # variable names
    arcs: list[tuple[tuple[str, int], tuple[str, int], int]] = []  # tail, head, variable
    for v, (a, b) in layout.items():
        names.append(("compute", v))
        arcs.append(((v, a), (v, b), len(names) - 1))
    for e in network.links:
        if e.target == s or e.source == t:
            continue
        for j in range(N + 1):
            names.append(("send", (e.source, e.target, j)))
            arcs.append(((e.source, j), (e.target, j), len(names) - 1))
    names.append(("rate", None))
    f_col = len(names) - 1
    cost: list[float] = []
    integral: list[int] = []
    lower: list[float] = []
    upper: list[float] = []
    rows: list[tuple[dict[int, float], float, float]] = []

    def new(c: float, lo: float, hi: float, integer: bool = False) -> int:
        names.append(("extra", None))
        cost.append(c)
        integral.append(int(integer))
        lower.append(lo)
        upper.append(hi)
        return len(names) - 1

    base = len(names)
    cost += [0.0] * base
    integral += [0] * base
    lower += [0.0] * base
    upper += [math.inf] * base
    if rate is None:
        cost[f_col] = -1.0
    else:
        lower[f_col] = upper[f_col] = rate

    def bought(price_cost: object) -> tuple[int | None, float]:
        """A column of capacity added and its most, or ``None`` when nothing can be added."""
        most = most_added(price_cost)
        size = getattr(price_cost, "size", None)
        if rate is None or most <= 0:
            return None, 0.0
        if size is None:
            return new(float(price_cost.price), 0.0, most), 1.0  # type: ignore[attr-defined]
        count = math.floor(most / size * (1 + 1e-9)) if math.isfinite(most) else math.inf
        m = new(float(price_cost.price), 0.0, count, True)  # type: ignore[attr-defined]
        return m, float(size)

    nodes = {n.id: n for n in network.nodes}
    for v, (a, b) in layout.items():
        col = next(k for k, (kind, x) in enumerate(names) if kind == "compute" and x == v)
        row = {col: range_load(network, profile, v, a, b, block_seconds)}
        extra, size = bought(nodes[v].capacity_cost)
        if extra is not None:
            row[extra] = -size
        rows.append((row, -math.inf, nodes[v].capacity))
    for e in network.links:
        row = {k: D[j] for k, (kind, x) in enumerate(names)
               if kind == "send" and x[:2] == (e.source, e.target) for j in [x[2]]}  # type: ignore[index]
        if not row:
            continue
        extra, size = bought(e.capacity_cost)
        if extra is not None:
            row[extra] = -size
        rows.append((row, -math.inf, e.capacity))
    states = {st for tail, head, _ in arcs for st in (tail, head)} | {(s, 0), (t, N)}
    for state in states:
        row: dict[int, float] = {}
        for tail, head, k in arcs:
            if head == state:
                row[k] = row.get(k, 0.0) + 1.0
            if tail == state:
                row[k] = row.get(k, 0.0) - 1.0
        if state == (s, 0):
            row[f_col] = row.get(f_col, 0.0) + 1.0
        if state == (t, N):
            row[f_col] = row.get(f_col, 0.0) - 1.0
        rows.append((row, 0.0, 0.0))
    n = len(names)
    matrix = np.zeros((len(rows), n))
    for r, (row, _, _) in enumerate(rows):
        for k, val in row.items():
            matrix[r, k] = val
    result = milp(
        np.array(cost[:n] + [0.0] * (n - len(cost))),
        constraints=LinearConstraint(matrix, [lo for _, lo, _ in rows], [hi for _, _, hi in rows]),
        integrality=np.array(integral),
        bounds=(np.array(lower), np.array(upper)),
    )
    if result.x is None:
        return math.inf
    return float(-result.fun) if rate is None else float(result.fun)


def brute_force_flow(
    network: Network, profile: Profile, block_seconds: BlockSeconds | None = None
) -> float:
    """The largest rate of any flow plan: the best layout's LP."""
    return max(_layout_lp(network, profile, lay, None, block_seconds)
               for lay in layouts(network, profile.n_blocks))  # fmt: skip


def brute_force_flow_cost(
    network: Network, profile: Profile, rate: float, block_seconds: BlockSeconds | None = None
) -> float:
    """The least upgrade cost of a flow plan of ``rate``: the best layout's LP."""
    return min(_layout_lp(network, profile, lay, rate, block_seconds)
               for lay in layouts(network, profile.n_blocks))  # fmt: skip
