"""Many pipelines (replicas) of one LLM service: node-disjoint paths, each with its own layer
partition, decode batch and hardware, the request stream split among them.

The model (docs/serving.md, "Many pipelines"): a random split of a Poisson stream is Poisson,
so a replica given ``lambda_r`` of the workload's requests/s is the one-path model of
:mod:`~inferplan.codesign.serving.planner` at that rate; it meets the bounds at every rate up
to its most (``min`` of :func:`~inferplan.codesign.serving.planner.rate_limits`), since each
condition only tightens as the rate grows. Replicas share the network's source and target
(the front end and the client) and no other node; a GPU on the source or the target belongs
to the one replica that runs blocks there.

This module holds the parts that know nothing of decoders: the paths, the pool of columns and
the MILPs; :func:`~inferplan.codesign.serving.planner.plan_serving` (``pipelines="any"``)
searches the columns and builds the plan. A *column* is one replica: a path with its
partition, batch and hardware, its $/h, its most requests/s and the nodes it holds. The plan
chooses columns by a MILP (HiGHS): ``x_c`` in {0, 1}, at most one chosen column holding each
node; ``cost``: least ``sum cost_c x_c`` with
``sum cap_c x_c >= R``, the rate then split in proportion to the caps; ``goodput``: most
``sum cap_c x_c``, each replica at its most.

Exactness: for each simple source-target path and batch, the planner's label-setting search
on that path alone yields every Pareto-optimal ``($/h, D, T_1..T_K)``, and a replica's most
requests/s falls as ``D`` or any ``T_k`` grows, so each path's columns of least $/h for their
rate (per set of nodes held) are all there are to choose from; a column costing more than a
plan already found cannot be in a cheaper one (the search's own bound). With every path
searched, the MILP's optimum is the plan's. For ``cost`` a lower bound also stops early: the
same search on the whole network (where paths may share nodes) gives a column at least as good
as any path's, and the cheapest multiset of those columns serving the rate (disjointness
relaxed) bounds every plan from below; when the best plan found meets it, the plan is optimal
without searching every path. A time limit, checked between searches, ends the search with
``status: time_limit`` and the gap to the bound proven so far.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from scipy import sparse

from inferplan.codesign.milp.cost import highs
from inferplan.errors import InvalidArgument
from inferplan.network.network import Network

__all__ = [
    "BOUND_SHARE", "DEFAULT_TIME_LIMIT", "MAX_PATHS", "TIE", "Column", "Pool", "gap", "pack",
    "path_network", "relaxed_bound", "simple_paths",
]  # fmt: skip

MAX_PATHS = 20_000
"""The most simple source-target paths a many-pipeline plan enumerates."""

DEFAULT_TIME_LIMIT = 120.0
"""Seconds a many-pipeline plan may search unless told."""

BOUND_SHARE = 4
"""The first lower bound of a least-$/h plan takes the columns serving at least
``1 / BOUND_SHARE`` of the rate, and one standing for all the others."""

TIE = 1e-9
"""Relative: a plan within this of its proven bound is optimal (HiGHS's own gap is 1e-9)."""


@dataclass(frozen=True)
class Column:
    """One replica to choose: its $/h, its most requests/s and the nodes it holds."""

    cost: float
    cap: float
    holds: frozenset[str]


C = TypeVar("C", bound=Column)


def simple_paths(network: Network) -> list[tuple[str, ...]]:
    """Every simple source-target path (the network is acyclic between them), at most
    :data:`MAX_PATHS` of them."""
    on_path = set(network.on_path_nodes())
    out: dict[str, list[str]] = {}
    for link in network.links:
        nexts = out.setdefault(link.source, [])
        if link.source in on_path and link.target in on_path and link.target not in nexts:
            nexts.append(link.target)
    found: list[tuple[str, ...]] = []

    def walk(path: list[str]) -> Iterator[tuple[str, ...]]:
        if path[-1] == network.target:
            yield tuple(path)
            return
        for z in out.get(path[-1], ()):
            if z not in path:
                yield from walk([*path, z])

    for path in walk([network.source]):
        found.append(path)
        if len(found) > MAX_PATHS:
            raise InvalidArgument(
                f"has more than {MAX_PATHS} source-target paths, which many pipelines "
                "enumerate: plan one pipeline, or a smaller network", field="network")  # fmt: skip
    return found


def path_network(network: Network, path: Sequence[str]) -> Network:
    nodes = network.node_by_id
    hops = set(itertools.pairwise(path))
    links = [e for e in network.links if (e.source, e.target) in hops]
    return Network([nodes[v] for v in path], links, network.source, network.target)


class Pool(Generic[C]):
    """The columns found, the Pareto-optimal ones (least $/h, most requests/s) of each set of
    nodes held."""

    def __init__(self) -> None:
        self.by_holds: dict[frozenset[str], list[C]] = {}

    def add(self, col: C) -> bool:
        kept = self.by_holds.setdefault(col.holds, [])
        if any(c.cost <= col.cost and c.cap >= col.cap for c in kept):
            return False
        kept[:] = [c for c in kept if not (col.cost <= c.cost and col.cap >= c.cap)]
        kept.append(col)
        return True

    def columns(self) -> list[C]:
        return [c for cols in self.by_holds.values() for c in cols]


def pack(columns: Sequence[C], objective: str, rate: float,
         time_limit: float) -> tuple[list[C], float, bool] | None:  # fmt: skip
    """The best node-disjoint choice of columns (``None`` if none serves the rate): the
    chosen, HiGHS's proven bound and whether it proved the optimum."""
    if not columns:
        return None
    nodes = sorted({v for c in columns for v in c.holds})
    row = {v: k for k, v in enumerate(nodes)}
    rows = [row[v] for c in columns for v in c.holds]
    cols = [j for j, c in enumerate(columns) for _ in c.holds]
    held = sparse.csr_array((np.ones(len(rows)), (rows, cols)), shape=(len(nodes), len(columns)))
    caps = np.array([c.cap for c in columns])
    if objective == "cost":
        c = np.array([col.cost for col in columns])
        a_ub = sparse.vstack((held, sparse.csr_array(-caps[None, :])))
        b_ub = np.concatenate((np.ones(len(nodes)), [-rate]))
    else:
        c, a_ub, b_ub = -caps, held, np.ones(len(nodes))
    res = highs(c, A_ub=a_ub, b_ub=b_ub, bounds=(0, 1), integrality=np.ones(len(columns)),
                time_limit=max(time_limit, 1e-3))  # fmt: skip
    if res.x is None:
        return None
    chosen = [col for col, x in zip(columns, res.x, strict=True) if x > 0.5]
    bound = getattr(res, "mip_dual_bound", None)
    value = float(res.fun)
    proven = float(bound) if bound is not None and math.isfinite(bound) else value
    if objective == "goodput":
        proven = -proven
    return chosen, proven, res.status == 0


def relaxed_bound(columns: Sequence[Column], rate: float, time_limit: float) -> float:
    """The least $/h of columns serving ``rate`` when a column may be taken any number of
    times (no node held once only): HiGHS's proven bound."""
    if not columns:
        return math.inf
    caps = np.array([c.cap for c in columns])
    res = highs(np.array([c.cost for c in columns]), A_ub=-caps[None, :], b_ub=[-rate],
                bounds=(0, math.ceil(rate / caps.min()) + 1), integrality=np.ones(len(columns)),
                time_limit=max(time_limit, 1e-3))  # fmt: skip
    if res.status == 2:
        return math.inf
    bound = getattr(res, "mip_dual_bound", None)
    if bound is not None and math.isfinite(bound):
        return float(bound)
    return float(res.fun) if res.status == 0 else 0.0


def gap(objective: str, value: float, bound: float | None) -> float | None:
    """The relative gap of ``value`` to ``bound`` (``None``: no bound proven)."""
    if bound is None:
        return None
    if objective == "cost":
        return max(value - bound, 0.0) / value if value > 0 else 0.0
    return max(bound - value, 0.0) / bound if bound > 0 else 0.0
