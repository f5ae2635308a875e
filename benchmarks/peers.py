"""inferplan against its peers' algorithms, in-process: ``python benchmarks/peers.py [--quick]``.

No peer's code is in this repository: this script restates two published dynamic programmes
in plain Python, builds equivalent instances in-process, checks that every optimum agrees with
inferplan's, then times both.

**PipeDream's partitioning DP** (Narayanan et al., SOSP 2019, its optimizer's recurrence over a
chain of layers), with replication off (each stage on one machine, no data parallelism).
``A(j, m)`` is the time of the slowest stage of the best pipeline of layers ``1..j`` on at
most ``m`` machines::

    A(j, 1) = T(1..j)
    A(j, m) = min( A(j, m - 1),
                   min_{1 <= i < j} max(A(i, m - 1), C_i, T(i+1..j)) )

with ``T(i+1..j)`` the compute seconds of layers ``i+1..j`` on one machine (their FLOPs over
its FLOP/s) and ``C_i`` the seconds the activation after layer ``i`` takes over the link
between two machines. PipeDream's optimizer counts ``2 C_i`` in training (activations forward,
gradients back); in inference only activations move, so the factor is 1. PipeDream's stage
time is ``max(compute, input transfer, output transfer)``; the pipeline's slowest stage is
then the maximum over compute stages and transfers, which is what the recurrence keeps. The
``T`` table is formed from prefix sums of each layer's seconds, as PipeDream's profiles give
them. inferplan also counts the model's output travelling on to the last device, which the
recurrence does not: the instances' outputs (1,000 classes) are small enough that this never
binds, which the agreement of every optimum checks.

**The ideal-based throughput DP** of Tarnawski et al. (NeurIPS 2020, "Efficient algorithms for
device placement of DNN graph operators", max-throughput over the ideals of the layer DAG):
an ideal is a set of layers closed under predecessors; device ``m`` of a pipeline of ``k``
identical devices in a row takes the layers of ``J`` outside ``I`` for ideals ``I ⊆ J``::

    T(J, 1) = W(J) / C                                 if need(∅, J) <= M, else inf
    T(J, m) = min_{I ⊆ J, need(I, J) <= M} max(T(I, m - 1), bits(I) / B, W(J \\ I) / C)

with ``W`` the FLOPs of a set of layers, ``bits(I)`` the tensors that leave ``I`` (the
input, and each layer's output read outside ``I``, the model's output included: the result
travels on to the last device, as in inferplan's model), ``B`` the link bandwidth, ``C`` the FLOP/s
and ``M`` the memory of a device; ``I = J`` is a device that only forwards. The answer is
``T(all layers, k)``, ``O(k P)`` for the ``P`` pairs ``I ⊆ J`` (listed once per graph, as
part of the DP). ``need`` is the memory model of inferplan's docs (weights, kept state and
the largest working set), read from inferplan's pair table so that both solve the same
instance: the DP is the peer's, the instance data shared.

**Instances** (both sides solve the same): a path of ``k`` identical nodes (``C`` FLOP/s,
memory ``M``) joined by links of ``B`` bit/s; inferplan's ``throughput_optimal`` (``T*``) on
it is the least interval over deployments, the same quantity. Families:

- chains, AlexNet (20 layers) and VGG-16 (38 layers) as PipeDream profiles them: the zoo's
  blocks split into their layers (the convolution or linear layer, its ReLU, its max-pool
  with four times the pooled activation as input, the dropouts of the classifier);
- a GNMT-shaped layer graph: an encoder and a decoder stack of 32 LSTM layers each, the
  decoder's layer ``k`` reading the encoder's layer ``k`` (561 ideals; ``two_stack`` of
  ``benchmarks/ideals.py``);
- a BERT-shaped operator graph: 8 encoder layers of two attention heads (each head's query,
  key and value projections, scores, softmax and context as operators), the output
  projection, the residual adds and the two feed-forward layers (1,385 ideals), on devices
  whose memory binds: 0.95, 0.99 or 0.999 times the most any node of the unlimited optimum needs
  (checked: ``T*`` with the limit is above ``T*`` without; a limit no deployment fits is
  left out).

**Timing**: each solver's CPU seconds per call (least of ``--runs``, after a warm-up), the
peer from its inputs (layer seconds, or the graph, its ideals and the need table) to its
optimum. inferplan is timed three ways, each on the faster of ``engine="auto"`` and, on
chains with numba installed, ``engine="compiled"`` (whose optimum is checked too):

- *solve only*: ``throughput_optimal`` on an instance compiled beforehand;
- *end to end*: ``throughput_optimal(compile_instance(network, profile))`` from the same
  ``Network`` and ``Profile`` objects every call, as a sweep that solves one model on many
  networks, or one network for many models, calls it. Compiling keeps what depends on one
  of them alone (a profile's cuts and tables, a network's layout, the kernel's frame for the
  pair; :mod:`inferplan.memo`), so a call after the first assembles a fresh instance from them
  and solves it;
- *cold*: the same call with everything kept forgotten before each one
  (:func:`inferplan.memo.forget_all`), what the first call in a process pays (the compiled
  kernels loaded already): enumerating the ideals and forming every table.

Then the speed-up per case, median and min per family, and with ``--profile`` where the end
to end call's time goes (cProfile, the top functions by own time). ``--family`` keeps the
families whose name holds a given text.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import math
import pstats
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import inferplan
from ideals import two_stack  # this folder's: run as python benchmarks/peers.py
from inferplan.codesign import CodesignInstance, compile_instance, throughput_optimal
from inferplan.codesign.engine.compiled import Engine, compiled_engine
from inferplan.memo import forget_all
from inferplan.network.network import Link, Network, Node
from inferplan.profiles.graph import LayerGraph
from inferplan.profiles.profile import Profile

GPU = 1e13  # FLOP/s of each device
BITS = 32  # per element


# --- instances ------------------------------------------------------------------------------


def pipedream_layers(profile: Profile) -> tuple[list[str], list[float], list[float]]:
    """The layers of a zoo profile as PipeDream profiles them (names, FLOPs, output bits):
    each block's convolution or linear layer, its ReLU (not after the last block), its
    max-pool (a ``+pool`` block: the layer before it outputs four times the pooled
    activation), and a dropout after the first two classifier layers."""
    names, flops, out = [], [], []
    n = profile.n_blocks
    for k, (label, work) in enumerate(zip(profile.blocks, profile.flops, strict=True)):
        bits = float(profile.activation_bits[k + 1])
        main = label.removesuffix("+pool")
        pooled = label.endswith("+pool")
        before = 4 * bits if pooled else bits
        names.append(main)
        flops.append(float(work))
        out.append(before)
        if k < n - 1:
            names.append(f"{main}.relu")
            flops.append(before / BITS)
            out.append(before)
        if pooled:
            names.append(f"{main}.pool")
            flops.append(before / BITS)
            out.append(bits)
        if main in ("fc6", "fc7"):
            names.append(f"{main}.dropout")
            flops.append(bits / BITS)
            out.append(bits)
    return names, flops, out


def chain_profile(profile: Profile) -> Profile:
    names, flops, out = pipedream_layers(profile)
    return Profile(f"{profile.name}-layers", flops=tuple(flops),
                   activation_bits=(float(profile.activation_bits[0]), *out),
                   blocks=tuple(names))  # fmt: skip


def bert(layers: int = 8, heads: int = 2, d: int = 768, tokens: int = 128) -> Profile:
    """A BERT-shaped operator graph: per encoder layer, per head a query, key and value
    projection (each reading the layer's input), scores (query, key), softmax, context
    (softmax, value); the output projection (every head's context), a residual add, two
    feed-forward layers and a second residual add."""
    names: list[str] = []
    flops: list[float] = []
    out: list[float] = []
    params: list[int] = []
    edges: list[tuple[str, str]] = []
    act = float(tokens * d * BITS)
    dh = d // heads

    def op(name: str, work: float, bits: float, weights: int, reads: Sequence[str]) -> str:
        names.append(name)
        flops.append(work)
        out.append(bits)
        params.append(weights)
        edges.extend((r, name) for r in reads)
        return name

    x = "input"
    for layer in range(layers):
        contexts = []
        for h in range(heads):
            p = f"l{layer}.h{h}"
            q = op(f"{p}.q", 2.0 * tokens * d * dh, tokens * dh * BITS, d * dh, [x])
            k = op(f"{p}.k", 2.0 * tokens * d * dh + 1, tokens * dh * BITS, d * dh, [x])
            v = op(f"{p}.v", 2.0 * tokens * d * dh + 2, tokens * dh * BITS, d * dh, [x])
            s = op(f"{p}.scores", 2.0 * tokens * tokens * dh, tokens * tokens * BITS, 0, [q, k])
            sm = op(f"{p}.softmax", 5.0 * tokens * tokens, tokens * tokens * BITS, 0, [s])
            contexts.append(op(f"{p}.context", 2.0 * tokens * tokens * dh, tokens * dh * BITS,
                               0, [sm, v]))  # fmt: skip
        o = op(f"l{layer}.proj", 2.0 * tokens * d * d, act, d * d, contexts)
        a1 = op(f"l{layer}.add1", float(tokens * d), act, 2 * d, [x, o])
        f1 = op(f"l{layer}.ff1", 8.0 * tokens * d * d, 4 * act, 4 * d * d, [a1])
        f2 = op(f"l{layer}.ff2", 8.0 * tokens * d * d, act, 4 * d * d, [f1])
        x = op(f"l{layer}.add2", float(tokens * d), act, 2 * d, [a1, f2])
    graph = LayerGraph(tuple(names), tuple(flops), tuple(out), tuple(edges), input_bits=act,
                       params=tuple(params))  # fmt: skip
    return Profile.from_graph(f"bert-{layers}x{heads}", graph)


def row_network(k: int, bandwidth: float, memory: float | None = None) -> Network:
    """``k`` identical devices in a row."""
    ids = [f"d{m}" for m in range(k)]
    nodes = tuple(Node(v, GPU, 1e-9, memory=memory) for v in ids)
    links = tuple(Link(u, v, bandwidth, 1e-9) for u, v in itertools.pairwise(ids))
    return Network(nodes=nodes, links=links, source=ids[0], target=ids[-1])


# --- the peers ------------------------------------------------------------------------------


def pipedream(layer_seconds: Sequence[float], transfer: Sequence[float], machines: int) -> float:
    """PipeDream's recurrence (module docstring): ``layer_seconds[l]`` the compute seconds of
    layer ``l + 1``, ``transfer[i]`` the link seconds of the activation after layer ``i``
    (``i = 1..n-1`` used)."""
    n = len(layer_seconds)
    prefix = [0.0]
    for s in layer_seconds:
        prefix.append(prefix[-1] + s)
    T = [[prefix[j] - prefix[i] for j in range(n + 1)] for i in range(n + 1)]
    A = [T[0][j] for j in range(n + 1)]  # one machine
    for _ in range(2, machines + 1):
        B = A[:]  # A(j, m - 1): fewer machines
        for j in range(2, n + 1):
            best = B[j]
            for i in range(1, j):
                stage = max(A[i], transfer[i], T[i][j])
                if stage < best:
                    best = stage
            B[j] = best
        A = B
    return A[n]


@dataclass(frozen=True)
class GraphData:
    """A layer graph as the ideal-based DP takes it: each layer's FLOPs, output bits,
    predecessors and successors (bit masks over the layers, in topological order; bit ``n``
    of a successor mask is the model's output, read outside every ideal), the input's bits and
    which layers read it."""

    flops: list[float]
    out_bits: list[float]
    preds: list[int]
    readers_of_input: int
    input_bits: float
    succs: list[int]


def graph_data(profile: Profile) -> GraphData:
    graph = profile.graph
    assert graph is not None
    index = {v: k for k, v in enumerate(graph.layers)}
    n = len(graph.layers)
    preds, succs = [0] * n, [0] * n
    readers = 0
    for u, v in graph.edges:
        if v not in index:  # the model's output: read outside every ideal
            succs[index[u]] |= 1 << n
            continue
        if u == "input":
            readers |= 1 << index[v]
        else:
            preds[index[v]] |= 1 << index[u]
            succs[index[u]] |= 1 << index[v]
    for v in range(n):
        if not succs[v]:  # a sink's output is the model's
            succs[v] = 1 << n
    return GraphData(list(graph.flops), list(graph.output_bits), preds, readers,
                     float(graph.input_bits), succs)  # fmt: skip


def ideals(data: GraphData) -> list[int]:
    """Every ideal as a bit mask, by breadth-first growth from the empty one."""
    n = len(data.flops)
    seen = {0}
    frontier = [0]
    while frontier:
        grown = []
        for ideal in frontier:
            for v in range(n):
                bit = 1 << v
                if not ideal & bit and data.preds[v] & ~ideal == 0 and ideal | bit not in seen:
                    seen.add(ideal | bit)
                    grown.append(ideal | bit)
        frontier = grown
    return sorted(seen, key=lambda s: (s.bit_count(), s))


def tarnawski(
    data: GraphData,
    found: list[int],
    devices: int,
    flops_per_s: float,
    bandwidth: float,
    need: Callable[[int, int], float] | None = None,
    memory: float = math.inf,
) -> float:
    """The ideal-based DP (module docstring) over the ideals ``found`` (``need(a, b)``: the
    bytes a device needs to run ideal ``b`` outside ideal ``a``, by position in ``found``)."""
    n = len(data.flops)
    K = len(found)
    work, bits = [], []
    for ideal in found:
        work.append(math.fsum(data.flops[v] for v in range(n) if ideal >> v & 1))
        leaving = data.input_bits if data.readers_of_input & ~ideal else 0.0
        leaving += math.fsum(data.out_bits[v] for v in range(n)
                             if ideal >> v & 1 and data.succs[v] & ~ideal)  # fmt: skip
        bits.append(leaving)
    pairs = [[a for a in range(b + 1) if found[a] & ~found[b] == 0] for b in range(K)]
    if need is not None:
        pairs = [[a for a in row if need(a, b) <= memory] for b, row in enumerate(pairs)]
    first = [work[b] / flops_per_s if 0 in pairs[b] else math.inf for b in range(K)]
    T = first
    for _ in range(2, devices + 1):
        link = [bits[a] / bandwidth for a in range(K)]
        U = []
        for b in range(K):
            best = math.inf
            wb = work[b]
            for a in pairs[b]:
                stage = max(T[a], link[a], (wb - work[a]) / flops_per_s)
                if stage < best:
                    best = stage
            U.append(best)
        T = U
    return T[K - 1]


# --- measuring ------------------------------------------------------------------------------


def cpu_seconds(fn: Callable[[], Any], runs: int) -> float:
    fn()
    best = math.inf
    for _ in range(runs):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def per_call(fn: Callable[[], Any], runs: int, budget: float = 0.2) -> float:
    """Least CPU seconds per call, calls batched to at least ``budget`` seconds when short."""
    start = time.process_time()
    fn()
    once = max(time.process_time() - start, 1e-6)
    batch = max(1, int(budget / once))

    def many() -> None:
        for _ in range(batch):
            fn()

    return cpu_seconds(many, runs) / batch


@dataclass
class Case:
    family: str
    label: str
    peer: Callable[[], float]
    inst: CodesignInstance
    build: Callable[[], CodesignInstance]


def agree(peer: float, ours: float) -> bool:
    return math.isclose(peer, ours, rel_tol=1e-9)


def chain_cases(quick: bool) -> list[Case]:
    cases = []
    machines = (2, 4, 8) if quick else (2, 3, 4, 6, 8, 12, 16)
    for family, zoo in (
        ("AlexNet chain", inferplan.alexnet()),
        ("VGG-16 chain", inferplan.vgg16()),
    ):
        prof = chain_profile(zoo)
        seconds = [f / GPU for f in prof.flops]
        for k, bandwidth in itertools.product(machines, (1e9, 1e10, 1e11)):
            transfer = [b / bandwidth for b in prof.activation_bits]
            net = row_network(k, bandwidth)
            cases.append(Case(
                family, f"{prof.n_blocks} layers, {k} machines, {bandwidth:.0e} bit/s",
                lambda s=seconds, t=transfer, k=k: pipedream(s, t, k),
                compile_instance(net, prof),
                lambda n=net, p=prof: compile_instance(n, p),
            ))  # fmt: skip
    return cases


def graph_cases(quick: bool) -> list[Case]:
    cases = []
    g = two_stack(32)  # benchmarks/ideals.py's GNMT shape
    data = graph_data(g)
    found = ideals(data)
    for k, bandwidth in itertools.product((2, 4) if quick else (2, 4, 8), (1e9, 1e10)):
        net = row_network(k, bandwidth)
        inst = compile_instance(net, g, cuts="graph")
        assert inst.n_cuts == len(found), (inst.n_cuts, len(found))
        cases.append(Case(
            "GNMT graph", f"{len(found)} ideals, {k} devices, {bandwidth:.0e} bit/s",
            lambda k=k, b=bandwidth: tarnawski(data, found, k, GPU, b),
            inst, lambda n=net: compile_instance(n, g, cuts="graph"),
        ))  # fmt: skip
    b = bert()
    bdata = graph_data(b)
    bfound = ideals(bdata)
    probe = compile_instance(row_network(2, 1e10), b, cuts="graph")
    assert probe.n_cuts == len(bfound), (probe.n_cuts, len(bfound))
    members = probe.cuts.members
    assert members is not None
    position = {sum(1 << v for v in np.flatnonzero(row).tolist()): k
                for k, row in enumerate(members)}  # fmt: skip
    table = probe.memory_need
    for k, share in itertools.product((3, 4) if quick else (2, 3, 4, 6), (0.95, 0.99, 0.999)):
        # below the most memory a node of the unlimited optimum needs: the limit binds
        free = throughput_optimal(compile_instance(row_network(k, 1e10), b, cuts="graph"))
        ends = free.cut_indices
        done = [0, *ends[:-1]]
        memory = share * max(float(table[i, j]) for i, j in zip(done, ends, strict=True))
        net = row_network(k, 1e10, memory)
        inst = compile_instance(net, b, cuts="graph")
        try:
            bound = throughput_optimal(inst).interval
        except inferplan.Infeasible:
            continue  # no deployment fits: a case for neither
        assert bound > free.interval, "the memory limit binds"
        index = [position[s] for s in bfound]

        def need(a: int, c: int, index: list[int] = index) -> float:
            return float(table[index[a], index[c]])

        cases.append(Case(
            "BERT graph, memory", f"{len(bfound)} ideals, {k} devices, memory {share:.2f} x "
            f"(T* {bound / free.interval:.2f} x unlimited)",
            lambda k=k, m=memory, need=need: tarnawski(bdata, bfound, k, GPU, 1e10, need, m),
            inst, lambda n=net: compile_instance(n, b, cuts="graph"),
        ))  # fmt: skip
    return cases


def engines(inst: CodesignInstance) -> tuple[Engine, ...]:
    """The engines inferplan is timed on (the faster counts): ``"auto"``, and ``"compiled"``
    on chains when numba is installed."""
    return ("auto", "compiled") if compiled_engine("auto") and inst.cuts.is_chain else ("auto",)


def where_time_goes(cases: list[Case], top: int = 8) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for case in cases:
        engine = engines(case.inst)[-1]
        for _ in range(20):
            throughput_optimal(case.build(), engine=engine)
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    for (file, line, name), (_, calls, own, _, _) in rows:
        where = "/".join(file.split("/")[-2:]) + f":{line}" if "/" in file else file
        print(f"    {100 * own / total:5.1f} %  {name} ({where}), {calls} calls")


def least(solve: Callable[[Engine], Any], choices: Sequence[Engine], runs: int) -> float:
    """The least CPU seconds per call of ``solve`` over the engines ``choices``."""
    return min(per_call(lambda e=e: solve(e), runs) for e in choices)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer cases per family")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per solver (least kept)")
    parser.add_argument("--profile", action="store_true", help="where inferplan's time goes")
    parser.add_argument("--family", default="", help="only the families whose name holds this")
    args = parser.parse_args()
    cases = [c for c in chain_cases(args.quick) + graph_cases(args.quick)
             if args.family.lower() in c.family.lower()]  # fmt: skip
    print(f"{'family':<20} {'case':<52} {'optimum s':>11} {'peer ms':>9} {'solve ms':>9} "
          f"{'e2e ms':>8} {'cold ms':>8} {'solve':>7} {'e2e':>7} {'cold':>7}")  # fmt: skip
    ups: dict[str, list[tuple[float, float, float]]] = {}
    for case in cases:
        peer_value = case.peer()
        choices = engines(case.inst)
        for engine in choices:
            ours = throughput_optimal(case.inst, engine=engine).interval
            fresh = throughput_optimal(case.build(), engine=engine).interval
            if not (agree(peer_value, ours) and agree(peer_value, fresh)):
                raise SystemExit(f"{case.family} {case.label}: the peer's optimum "
                                 f"{peer_value!r} is not inferplan's {ours!r} "
                                 f"({engine})")  # fmt: skip

        def cold(engine: Engine, c: Case = case) -> None:
            forget_all()
            throughput_optimal(c.build(), engine=engine)

        peer_s = per_call(case.peer, args.runs)
        ours_s = least(lambda e, c=case: throughput_optimal(c.inst, engine=e), choices, args.runs)
        built_s = least(lambda e, c=case: throughput_optimal(c.build(), engine=e), choices,
                        args.runs)  # fmt: skip
        cold_s = least(cold, choices, args.runs)
        up = (peer_s / ours_s, peer_s / built_s, peer_s / cold_s)
        ups.setdefault(case.family, []).append(up)
        print(f"{case.family:<20} {case.label:<52} {ours:>11.5g} {peer_s * 1e3:>9.3f} "
              f"{ours_s * 1e3:>9.4f} {built_s * 1e3:>8.4f} {cold_s * 1e3:>8.3f} "
              f"{up[0]:>6.1f}x {up[1]:>6.1f}x {up[2]:>6.1f}x", flush=True)  # fmt: skip
    print("\nper family: speed-up over the peer, median and min (solve only; end to end; cold)")
    print(f"{'family':<20} {'cases':>5}" + "".join(f" {h:>8} {'min':>7}" for h in
                                                  ("solve", "e2e", "cold")))  # fmt: skip
    for family, values in ups.items():
        cells = []
        for k in range(3):
            column = [v[k] for v in values]
            cells.append(f" {statistics.median(column):>7.1f}x {min(column):>6.1f}x")
        print(f"{family:<20} {len(values):>5}" + "".join(cells))
    if args.profile:
        for family in ups:
            print(f"\nwhere the end to end call's time goes, {family} (own time, cProfile):")
            where_time_goes([c for c in cases if c.family == family])


if __name__ == "__main__":
    main()
