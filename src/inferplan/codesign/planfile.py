"""Plan files (what ``provision --json`` prints) and checking a plan against a network and a
profile before it is carried out.

Reading is tolerant: keys a newer or older ``provision`` may add (a ``status``, ...) are
ignored; the fields a plan needs are checked strictly. A plan cut between blocks gives its
``partition`` (block counts); a plan cut at ideals of a layer graph (``cuts: graph``) its
``ideals`` (ideal numbers) and no ``partition`` (``null``). Files written before plans had
``ideals`` gave a graph plan's ideal numbers as its ``partition``: ``cuts: graph`` and no
``ideals`` say so, and they are read as the ideals they are.

Examples
--------
>>> import inferplan
>>> net = inferplan.load_network("examples/network.json")
>>> vgg = inferplan.load_profile("vgg16")
>>> plan = plan_from_dict(inferplan.provision(net, vgg, throughput=30).to_dict())
>>> check_plan(net, vgg, plan) is None
True
>>> check_plan(net, inferplan.load_profile("resnet50"), plan)
Traceback (most recent call last):
...
inferplan.errors.InvalidArgument: partition: the plan covers 16 blocks, the model has 18 (...)
"""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from inferplan.codesign.instance import compile_instance
from inferplan.codesign.memory import NodeMemory
from inferplan.codesign.plan import Bottleneck, LinkUpgrade, Plan, PlanStatus
from inferplan.codesign.stages import stage_sends, stage_units, stages
from inferplan.documents import read_document, validate_document
from inferplan.errors import InvalidArgument
from inferplan.network.network import Network
from inferplan.profiles.ideals import CutKind, cuts_of
from inferplan.profiles.profile import Profile

__all__ = ["check_plan", "check_plan_model", "check_plan_shape", "load_plan", "plan_from_dict"]

Amount = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]

# A plan's interval, recomputed from its own numbers, differs by rounding only.
_SAME_INTERVAL = 1e-6


class _LinkUpgradeFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    source: str
    target: str
    amount: Amount


class _NodeMemoryFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    need: Amount
    memory: Amount | None = None
    added: Amount = 0.0


class _BottleneckFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    kind: Literal["node", "link"]
    id: str


class _PlanFile(BaseModel):
    model_config = ConfigDict(extra="ignore")

    method: str = "file"
    # A file from before plans carried a status makes no claim of optimality.
    status: PlanStatus = "heuristic"
    cost: Annotated[float, Field(allow_inf_nan=False, strict=True)] = 0.0
    interval: Seconds
    target_interval: Seconds | None = None
    path: list[str] = Field(min_length=1)
    partition: list[Annotated[int, Field(ge=0, strict=True)]] | None = Field(None, min_length=1)
    ideals: list[Annotated[int, Field(ge=0, strict=True)]] | None = Field(None, min_length=1)
    node_upgrades: dict[str, Amount] = Field(default_factory=dict)
    link_upgrades: list[_LinkUpgradeFile] = Field(default_factory=list)
    bottleneck: _BottleneckFile | None = None
    memory: list[_NodeMemoryFile] = Field(default_factory=list)  # none in older files
    # A file from before plans named their cuts cut between blocks.
    cuts: CutKind = "chain"
    layers: list[list[str]] = Field(default_factory=list)
    sends: list[list[str]] = Field(default_factory=list)
    # A file from before plans carried their latency says nothing of it.
    latency: Amount | None = None
    target_latency: Seconds | None = None


def plan_from_dict(data: object, *, source: str | None = None) -> Plan:
    """A :class:`Plan` from ``provision --json`` data (unknown keys ignored)."""
    doc = validate_document(_PlanFile, data, source=source, error=InvalidArgument)
    partition, ideals = _cuts_read(doc, source)
    plan = Plan(
        method=doc.method,
        status=doc.status,
        cost=doc.cost,
        interval=doc.interval,
        target_interval=doc.target_interval or doc.interval,
        path=tuple(doc.path),
        partition=partition,
        ideals=ideals,
        node_upgrades=dict(doc.node_upgrades),
        link_upgrades=tuple(LinkUpgrade(u.source, u.target, u.amount) for u in doc.link_upgrades),
        bottleneck=(Bottleneck(doc.bottleneck.kind, doc.bottleneck.id) if doc.bottleneck else None),
        memory=tuple(NodeMemory(m.id, m.need, m.memory, m.added) for m in doc.memory),
        layers=tuple(tuple(names) for names in doc.layers),
        sends=tuple(tuple(names) for names in doc.sends),
        cuts=doc.cuts,
        latency=doc.latency,
        target_latency=doc.target_latency,
    )
    check_plan_shape(plan, source=source)
    return plan


def _cuts_read(
    doc: _PlanFile, source: str | None
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """``(partition, ideals)`` of a plan file: block counts on a chain, ideal numbers at
    ideals (an older file's ``partition`` under ``cuts: graph``, see the module docstring)."""

    def bad(field: str, message: str) -> InvalidArgument:
        return InvalidArgument(message, source=source, field=field)

    if doc.cuts == "chain":
        if doc.ideals is not None:
            raise bad("ideals", "a plan cut between blocks (cuts: chain) has a partition, "
                                "no ideals: give block counts as partition, or cuts: graph")
        if doc.partition is None:
            raise bad("partition", "missing: a plan cut between blocks gives the blocks done "
                                   "up to each path node")  # fmt: skip
        return tuple(doc.partition), None
    if doc.ideals is None:
        if doc.partition is None:
            raise bad("ideals", "missing: a plan cut at ideals (cuts: graph) gives the ideal "
                                "each path node ends at")  # fmt: skip
        return None, tuple(doc.partition)  # a file from before plans had ideals
    if doc.partition is not None:
        raise bad("partition", "a plan cut at ideals (cuts: graph) gives its ideals and "
                               "no partition: an ideal is no block count (drop partition)")
    return None, tuple(doc.ideals)


def load_plan(path: str | Path) -> Plan:
    """Read a plan file (JSON or YAML) that ``provision --json`` wrote."""
    return plan_from_dict(read_document(path), source=str(path))


def check_plan_shape(plan: Plan, *, source: str | None = None) -> None:
    """Raise :class:`InvalidArgument` (naming ``source`` and the field) unless ``plan`` is
    whole by itself: a path that visits no node twice, one partition (or ideals) entry per
    path node and not decreasing, and the layers and tensors of each stage (when given) one
    entry per path node and per path link. Every reader of a plan file runs these
    (:func:`plan_from_dict`)."""
    path, partition, named = plan.path, plan.cut_indices, _cut_field(plan)
    if len(set(path)) != len(path):
        raise InvalidArgument("visits a node twice", source=source, field="path")
    if len(partition) != len(path):
        raise InvalidArgument(f"needs one entry per path node ({len(path)}), got "
                              f"{len(partition)}", source=source, field=named)  # fmt: skip
    if any(b < a for a, b in pairwise(partition)):
        raise InvalidArgument(f"must not decrease, got {list(partition)}", source=source,
                              field=named)  # fmt: skip
    for name, given, count, each in (("layers", plan.layers, len(path), "node"),
                                     ("sends", plan.sends, len(path) - 1, "link")):  # fmt: skip
        if given and len(given) != count:
            raise InvalidArgument(f"needs one entry per path {each} ({count}), got {len(given)}",
                                  source=source, field=name)  # fmt: skip


def check_plan_model(profile: Profile, plan: Plan, *, source: str | None = None) -> None:
    """Raise :class:`InvalidArgument` (naming ``source`` and the field) unless ``plan`` cuts
    ``profile``: its partition ends at the model's last cut and is a chain of its cuts, and
    the layers and tensors it names for each stage (when given) are those of its partition.
    :func:`check_plan` runs this, and so does every command that reads a plan and a model."""

    def bad(field: str, message: str) -> InvalidArgument:
        return InvalidArgument(message, source=source, field=field)

    partition, named = plan.cut_indices, _cut_field(plan)
    if plan.cuts == "graph" and profile.graph is None:
        raise bad("cuts", "the plan cuts a layer graph and the profile has none (a plan for "
                          "another model?)")  # fmt: skip
    cuts = cuts_of(profile, plan.cuts, pairs=False)
    n = cuts.n_cuts - 1
    if partition[-1] != n:
        said = (f"the plan covers {partition[-1]} blocks, the model has {n}"
                if plan.cuts == "chain" else
                f"the plan ends at ideal {partition[-1]}, the model's whole layer graph is "
                f"ideal {n}")  # fmt: skip
        raise bad(named, f"{said} (a plan for another model?)")
    if any(not cuts.inside(a, b) for a, b in pairwise(partition)):
        raise bad(named, f"ideals {list(partition)} are no chain of ideals of the model's "
                         "layer graph (a plan for another model?)")  # fmt: skip
    for name, given, found in (
        ("layers", plan.layers, stage_units(cuts, partition)),
        ("sends", plan.sends, stage_sends(cuts, partition)),
    ):
        if given and given != found:
            raise bad(name, f"not those of the {named} (a plan for another model?)")


def _cut_field(plan: Plan) -> str:
    """The field of a plan that says where it cuts: ``ideals`` or ``partition``."""
    return "ideals" if plan.cuts == "graph" else "partition"


def check_plan(
    network: Network, profile: Profile | None, plan: Plan, *, source: str | None = None
) -> None:
    """Raise :class:`InvalidArgument` (naming ``source`` and the field) unless ``plan`` runs
    ``profile`` on ``network``: its path is a source-to-target path of links of the network,
    its partition covers exactly the profile's blocks, its upgrades name nodes and links of the
    network, and its interval and latency (when it gives one) are what those numbers give (a
    plan made for another profile or network is refused). With ``profile=None`` only what
    concerns the network is checked (before a model is traced)."""

    def bad(field: str, message: str) -> InvalidArgument:
        return InvalidArgument(message, source=source, field=field)

    nodes = network.node_by_id
    links = {(e.source, e.target) for e in network.links}
    path, partition = plan.path, plan.cut_indices
    for node in path:
        if node not in nodes:
            raise bad("path", f"node {node!r} is not in the network")
    if path[0] != network.source or path[-1] != network.target:
        raise bad("path", f"must run from the source {network.source!r} to the target "
                          f"{network.target!r}, got {path[0]!r} .. {path[-1]!r}")  # fmt: skip
    for u, v in pairwise(path):
        if (u, v) not in links:
            raise bad("path", f"the network has no link {u!r} -> {v!r}")
    check_plan_shape(plan, source=source)
    for node in plan.node_upgrades:
        if node not in nodes:
            raise bad("node_upgrades", f"node {node!r} is not in the network")
    for up in plan.link_upgrades:
        if (up.source, up.target) not in links:
            raise bad("link_upgrades", f"the network has no link {up.source!r} -> {up.target!r}")
    if profile is None:
        return
    check_plan_model(profile, plan, source=source)
    inst = compile_instance(network, profile, require_acyclic=False, cuts=plan.cuts)
    index = {v: k for k, v in enumerate(inst.node_ids)}
    _, capacity, bandwidth = inst.scalars
    deployment = stages(inst, [index[v] for v in path], partition)
    upgraded = (
        capacity,
        bandwidth,
        {index[v]: x for v, x in plan.node_upgrades.items() if v in index},
        {
            inst.link_index(index[u.source], index[u.target]): u.amount
            for u in plan.link_upgrades
            if u.source in index and u.target in index
        },
    )
    interval, latency = deployment.interval(*upgraded), deployment.latency(*upgraded)
    if not math.isclose(interval, plan.interval, rel_tol=_SAME_INTERVAL):
        raise bad("interval", f"the plan says {plan.interval:.6g} s, but its deployment of this "
                              f"model on this network gives {interval:.6g} s (a plan for "
                              "another model or network?)")  # fmt: skip
    if plan.latency is not None and not math.isclose(latency, plan.latency,
                                                     rel_tol=_SAME_INTERVAL):  # fmt: skip
        raise bad("latency", f"the plan says {plan.latency:.6g} s, but its deployment of this "
                             f"model on this network takes {latency:.6g} s (a plan for another "
                             "model or network?)")  # fmt: skip
