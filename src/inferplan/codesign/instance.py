"""A network and a profile compiled into arrays: the state graph every co-design solver walks.

Only nodes on some source-target path are kept, in a topological order (file order among
equals) when the relevant part of the network is acyclic.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import numpy.typing as npt

from inferplan.codesign.costs import CapacityCost
from inferplan.errors import NetworkHasCycle
from inferplan.network.network import Link, Network
from inferplan.profiles.profile import Profile

__all__ = ["CodesignInstance", "compile_instance"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class CodesignInstance:
    """Arrays of one co-design problem (SI units).

    Nodes are indexed ``0..V-1`` in topological order (``source`` first when acyclic), links
    ``0..E-1``. ``prefix_flops`` is ``S_0..S_N`` and ``activation_bits`` is ``D_0..D_N``.
    """

    network: Network
    profile: Profile
    node_ids: tuple[str, ...]
    capacity: FloatArray
    node_costs: tuple[CapacityCost, ...]
    links: tuple[Link, ...]
    link_src: IntArray
    link_dst: IntArray
    bandwidth: FloatArray
    link_costs: tuple[CapacityCost, ...]
    in_links: tuple[IntArray, ...]
    out_links: tuple[IntArray, ...]
    prefix_flops: FloatArray
    activation_bits: FloatArray
    source: int
    target: int
    acyclic: bool

    @property
    def n_blocks(self) -> int:
        return self.profile.n_blocks

    def link_index(self, u: int, v: int) -> int:
        """Index of the link ``u -> v`` (node indices)."""
        outs = self.out_links[u]
        return int(outs[np.flatnonzero(self.link_dst[outs] == v)[0]])


def _find_cycle(graph: nx.DiGraph) -> list[str]:
    cycle = nx.find_cycle(graph)
    return [str(u) for u, _ in cycle] + [str(cycle[0][0])]


def compile_instance(
    network: Network, profile: Profile, *, require_acyclic: bool = True
) -> CodesignInstance:
    """Compile ``network`` and ``profile`` for the solvers.

    Raises
    ------
    NetworkHasCycle
        If ``require_acyclic`` and a cycle lies on the way from source to target.
    """
    keep = network.on_path_nodes()
    sub = network.graph.subgraph(keep)
    acyclic = nx.is_directed_acyclic_graph(sub)
    if not acyclic and require_acyclic:
        cycle = " -> ".join(repr(v) for v in _find_cycle(sub))
        raise NetworkHasCycle(
            f"cycle {cycle} lies on the way from source to target; PSG, PFP, PWF and T* are "
            "exact only on acyclic networks (use --method milp for cyclic ones)",
            field="links",
        )
    if acyclic:
        position = {v: k for k, v in enumerate(keep)}
        order = list(nx.lexicographical_topological_sort(sub, key=lambda v: position[v]))
    else:
        order = list(keep)
    index = {v: k for k, v in enumerate(order)}
    links = tuple(e for e in network.links if e.source in index and e.target in index)
    link_src = np.array([index[e.source] for e in links], dtype=np.int64)
    link_dst = np.array([index[e.target] for e in links], dtype=np.int64)
    nodes = [network.node_by_id[v] for v in order]
    in_links = tuple(np.flatnonzero(link_dst == k) for k in range(len(order)))
    out_links = tuple(np.flatnonzero(link_src == k) for k in range(len(order)))
    return CodesignInstance(
        network=network,
        profile=profile,
        node_ids=tuple(order),
        capacity=np.array([n.capacity for n in nodes], dtype=np.float64),
        node_costs=tuple(n.capacity_cost for n in nodes),
        links=links,
        link_src=link_src,
        link_dst=link_dst,
        bandwidth=np.array([e.capacity for e in links], dtype=np.float64),
        link_costs=tuple(e.capacity_cost for e in links),
        in_links=in_links,
        out_links=out_links,
        prefix_flops=profile.prefix_flops(),
        activation_bits=np.asarray(profile.activation_bits, dtype=np.float64),
        source=index[network.source],
        target=index[network.target],
        acyclic=acyclic,
    )
