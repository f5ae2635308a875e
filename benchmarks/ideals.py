"""Planners on the ideals of layer graphs: ``python benchmarks/ideals.py [--quick]``.

Prints five tables:

(a) ResNet-50 at module granularity (the PyTorch model of the profile tests, traced with
    ``torch.export`` at depth 3: convolutions, batch norms and ReLU calls as layers, the
    projections beside the main branch) on the paper's tiered networks (seeds 0-9) at the
    study's targets ``alpha * T*`` (``alpha`` in 0.25, 0.4, 0.6, 0.8): ``provision`` by PSG
    with ``cuts="graph"``, seconds per solve (compiled once per network, mean and worst over
    repeats), and the cost against the chain of its 18 blocks.
(b) T* of a GNMT-shaped two-stack model (an encoder stack and a decoder stack whose layer
    ``k`` reads the decoder's layer ``k - 1`` and the encoder's layer ``k``: ``(L + 1)(L + 2)
    / 2`` ideals) on an 8-node chain, by the number of ideals up to the default limit of
    100,000: the lattice engine (the default) and, up to the 4,096 cuts it holds, the
    all-pairs engine (``engine="numpy"``), which must agree; PFP beside them.
(c) The gain of cutting at ideals: T* with ``cuts="chain"`` (the blocks in topological order)
    against ``cuts="graph"`` on branched models.
(d) Compiling and solving (T*, PSG) two-stack graphs of non-integer FLOPs (528 and 1,431
    ideals), whose exact work table is wider than a float.
(e) PSG past the 4,096 ideals the tables of pairs hold (the subset step,
    ``inferplan.codesign.engine.subsets``): two-stack models of 5,050, 10,011 and 19,900
    ideals (L = 99, 140, 198) on the 8-node chain at 0.6 T*, CPU seconds of ``provision``
    (compiling the instance included) without memory limits and with memory that binds (each
    node holds a quarter of the model's parameters and may buy more); under 4,096 ideals
    (L = 89) the subset step against the all-pairs step, which must agree. A latency bound
    still keeps the tables (its planner is refused past 4,096 ideals).

Needs torch for (a) (the ``torch`` extra). Times are CPU seconds of this process (the machine
is shared: wall times swing with the load, printed first).
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import inferplan
from inferplan.codesign import compile_instance, solve_psg, throughput_optimal
from inferplan.codesign.heuristics import solve_pfp
from inferplan.network.network import Link, Network, Node
from inferplan.profiles.graph import LayerGraph
from inferplan.profiles.ideals import MAX_STATE_CUTS
from inferplan.profiles.profile import Profile

ALPHAS = (0.25, 0.4, 0.6, 0.8)
ROOT = Path(__file__).parents[1]


def resnet50_modules() -> Profile:
    """ResNet-50 traced at module granularity (the profile tests' reference model)."""
    sys.path.insert(0, str(ROOT))
    from tests.profiles.reference_models import ResNet50  # the model the tests check

    from inferplan.profiles.from_torch import profile_module

    return profile_module(ResNet50(), [(1, 3, 224, 224)], blocks=3).profile


def two_stack(layers: int, width: float = 8.2e6, *, seed: int | None = None) -> Profile:
    """A GNMT-shaped model: encoder ``e1..eL`` and decoder ``d1..dL``, ``d_k`` reading
    ``d_(k-1)`` and ``e_k`` (LSTM layers of 1024 units over 64 tokens, FP32). With ``seed``,
    each layer's FLOPs are drawn from ``[1e8, 1e10)`` instead (not integers: the exact work
    of an ideal is then wider than a float)."""
    names = [f"e{k}" for k in range(1, layers + 1)] + [f"d{k}" for k in range(1, layers + 1)]
    edges = [("input", "e1"), ("input", "d1")]
    for k in range(1, layers + 1):
        if k > 1:
            edges += [(f"e{k - 1}", f"e{k}"), (f"d{k - 1}", f"d{k}")]
        edges.append((f"e{k}", f"d{k}"))
    flops = 2 * 4 * 1024 * 2048 * 64  # four gates of a 1024-unit LSTM over 64 tokens
    work = (float(flops),) * len(names)
    if seed is not None:
        work = tuple(random.Random(seed).uniform(1e8, 1e10) for _ in names)
    graph = LayerGraph(tuple(names), work, (width,) * len(names), tuple(edges),
                       input_bits=width)  # fmt: skip
    return Profile.from_graph(f"two-stack-{layers}", graph)


def inception(modules: int = 4) -> Profile:
    """An Inception-style model: ``modules`` modules of four parallel branches (1, 2, 2 and 1
    layers) between joins."""
    edges, names, flops, bits = [], [], [], []
    last = "input"
    for m in range(modules):
        ends = []
        for b, depth in enumerate((1, 2, 2, 1)):
            prev = last
            for d in range(depth):
                name = f"m{m}b{b}l{d}"
                names.append(name)
                flops.append(1.0e9 * (1 + b) * (1 + d))
                bits.append(4.0e6 * (2 - d) / (1 + b % 2))
                edges.append((prev, name))
                prev = name
            ends.append(prev)
        join = f"m{m}join"
        names.append(join)
        flops.append(0.2e9)
        bits.append(6.0e6)
        edges += [(e, join) for e in ends]
        last = join
    graph = LayerGraph(tuple(names), tuple(flops), tuple(bits), tuple(edges), input_bits=4.8e6)
    return Profile.from_graph(f"inception-{modules}", graph)


def chain_network(nodes: int = 8) -> Network:
    """``nodes`` workers in a row, 20-50 GFLOP/s, 1 Gbit/s links, linear prices."""
    ids = [f"w{k}" for k in range(nodes)]
    members = tuple(Node(v, (20 + 30 * ((7 * k) % nodes) / nodes) * 1e9, 1e-9)
                    for k, v in enumerate(ids))  # fmt: skip
    links = tuple(Link(u, v, 1e9, 1e-9) for u, v in itertools.pairwise(ids))
    return Network(nodes=members, links=links, source=ids[0], target=ids[-1])


def timed(fn, repeat: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Mean and worst CPU seconds of ``repeat`` calls after one warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.mean(times), max(times)


def cpu(fn):  # type: ignore[no-untyped-def]
    """``fn()`` and the CPU seconds it took."""
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def table_a(quick: bool) -> None:
    profile = resnet50_modules()
    graph = profile.graph
    assert graph is not None
    print(f"(a) {profile.name} at module granularity: {graph.n_layers} layers, "
          f"{profile.n_blocks} blocks")  # fmt: skip
    print("seed  ideals  alpha  mean s  worst s  cost graph / chain")
    for seed in range(3 if quick else 10):
        net = inferplan.tiered(seed=seed)
        inst = compile_instance(net, profile, cuts="graph")
        chain = compile_instance(net, profile, cuts="chain")
        t_star = throughput_optimal(chain).interval
        for alpha in ALPHAS:
            beta = alpha * t_star
            mean, worst = timed(lambda: solve_psg(inst, beta), 2 if quick else 5)  # noqa: B023
            ratio = solve_psg(inst, beta).cost / solve_psg(chain, beta).cost
            print(f"{seed:4d}  {inst.n_cuts:6d}  {alpha:5.2f}  {mean:6.3f}  {worst:7.3f}  "
                  f"{ratio:.4f}")  # fmt: skip


def table_b(quick: bool) -> None:
    print("(b) T* of two-stack models on an 8-node chain (CPU s)")
    print("stack  ideals  compile  T* lattice  T* all-pairs  PFP at T*/2  interval graph / chain")
    net = chain_network()
    for layers in (10, 30, 60, 199) if quick else (10, 30, 60, 89, 199, 445):
        profile = two_stack(layers)
        inst, compiled = cpu(lambda: compile_instance(net, profile, cuts="graph"))  # noqa: B023
        best, solve = cpu(lambda: throughput_optimal(inst))  # noqa: B023
        dense = "-"
        if inst.n_cuts <= MAX_STATE_CUTS:
            again, seconds = cpu(lambda: throughput_optimal(inst, engine="numpy"))  # noqa: B023
            assert again.interval == best.interval
            dense = f"{seconds:.2f}"
        _, pfp = cpu(lambda: solve_pfp(inst, best.interval / 2))  # noqa: B023
        chain = throughput_optimal(compile_instance(net, profile, cuts="chain"))
        print(f"{layers:5d}  {inst.n_cuts:6d}  {compiled:7.2f}  {solve:10.2f}  {dense:>12s}  "
              f"{pfp:11.2f}  {best.interval / chain.interval:.4f}")  # fmt: skip


def table_c(quick: bool) -> None:
    print("(c) T* cutting at ideals against cutting between the blocks")
    print("model                 network      ideals  T* chain ms  T* graph ms  gain")
    models = [
        ("two-branch", inferplan.load_profile(ROOT / "examples" / "two-branch.yaml")),
        ("inception-4", inception(4)),
        ("two-stack-30", two_stack(30)),
    ]
    if not quick:
        models.append(("resnet50 modules", resnet50_modules()))
    networks = [("8-node chain", chain_network())]
    networks += [(f"tiered {s}", inferplan.tiered(seed=s)) for s in range(3)]
    for name, profile in models:
        for where, net in networks:
            inst = compile_instance(net, profile, cuts="graph")
            chain = throughput_optimal(compile_instance(net, profile, cuts="chain")).interval
            graph = throughput_optimal(inst).interval
            assert graph <= chain
            assert graph == throughput_optimal(inst, engine="numpy").interval
            print(f"{name:20s}  {where:11s}  {inst.n_cuts:6d}  {1e3 * chain:11.2f}  "
                  f"{1e3 * graph:11.2f}  {1 - graph / chain:5.1%}")  # fmt: skip


def table_d(quick: bool) -> None:
    """Compiling and solving (T*, then PSG at 0.6 T*) a two-stack graph of non-integer FLOPs
    on the 8-node chain, whose exact work table is wider than a float."""
    print("(d) two-stack graphs of non-integer FLOPs on an 8-node chain, cuts='graph': "
          "CPU seconds of compile_instance + T* + PSG (least of 3)")  # fmt: skip
    print(f"{'ideals':>7} {'seconds':>8}")
    net = chain_network()
    for layers in (31,) if quick else (31, 52):
        profile = two_stack(layers, seed=0)

        def once() -> int:
            inst = compile_instance(net, profile, cuts="graph")  # noqa: B023
            solve_psg(inst, 0.6 * throughput_optimal(inst).interval)
            return inst.n_cuts

        best = min(cpu(once)[1] for _ in range(3))
        print(f"{once():>7} {best:>8.3f}")


def _memory_network(profile: Profile, nodes: int = 8) -> Network:
    """:func:`chain_network` whose every node holds a quarter of ``profile``'s parameter
    bytes and sells more at 1e-9 per byte."""
    net = chain_network(nodes)
    quarter = profile.bytes_per_param * sum(profile.params) / 4.0
    members = tuple(Node(n.id, n.capacity, n.price, memory=quarter, memory_price=1e-9)
                    for n in net.nodes)  # fmt: skip
    return Network(nodes=members, links=net.links, source=net.source, target=net.target)


def table_e(quick: bool) -> None:
    from inferplan.codesign.engine.psg import psg_path

    print("(e) PSG past the tables of pairs: two-stack models, 8-node chain, 0.6 T* (CPU s)")
    print("stack  ideals  PSG  PSG memory  memory bought  subset / all-pairs at 4,095")
    net = chain_network()
    for layers in (89, 99, 140) if quick else (89, 99, 140, 198):
        profile = _with_params(two_stack(layers))
        beta = 0.6 * inferplan.throughput(net, profile, cuts="graph").interval
        plain, psg = cpu(lambda: inferplan.provision(net, profile, interval=beta))  # noqa: B023
        held = _memory_network(profile)
        bound, mem = cpu(lambda: inferplan.provision(held, profile, interval=beta))  # noqa: B023
        assert plain.cuts == bound.cuts == "graph"
        bought = sum(m.added for m in bound.memory)
        dense = "-"
        inst = compile_instance(held, profile, cuts="graph")
        if inst.n_cuts <= MAX_STATE_CUTS:
            fast, subset = cpu(lambda: psg_path(inst, beta, engine="compiled"))  # noqa: B023
            again, table = cpu(lambda: psg_path(inst, beta, engine="numpy"))  # noqa: B023
            assert fast == again
            dense = f"{subset:.2f} / {table:.2f}"
        print(f"{layers:5d}  {inst.n_cuts:6d}  "
              f"{psg:4.2f}  {mem:10.2f}  {bought:10.3g} B  {dense:>13s}")  # fmt: skip


def _with_params(profile: Profile) -> Profile:
    """``profile`` whose layers have the parameters of 1024-unit LSTM layers (4 gates, input
    and recurrent weights: 8.4 M each)."""
    graph = profile.graph
    assert graph is not None
    params = (8 * 1024 * 1024,) * graph.n_layers
    return Profile.from_graph(profile.name, replace(graph, params=params))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller series")
    parser.add_argument("--tables", default="abcde", help="which tables (default abcde)")
    args = parser.parse_args()
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for key, run in (
        ("a", table_a),
        ("b", table_b),
        ("c", table_c),
        ("d", table_d),
        ("e", table_e),
    ):
        if key in args.tables:
            run(args.quick)
            print()


if __name__ == "__main__":
    main()
