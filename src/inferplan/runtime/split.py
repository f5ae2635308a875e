"""A PyTorch model cut at its profile's valid cuts into stage modules (extra ``torch``).

The model is traced with :mod:`torch.fx` exactly as :func:`~inferplan.profiles.from_torch.
profile_module` traces it (``tracer="fx"``), and each operation runs in its profile block
(:attr:`GraphProfile.placement`): the stages are the profile's blocks, regrouped at the
requested cuts. A cut may carry several tensors (a skip connection, a U-Net's encoder
outputs); all of them travel, in a fixed order (:meth:`SplitModel.crossing`). Values made from
weights alone (constants) never travel: each stage computes those it needs. Each stage is a
``torch.fx.GraphModule`` that holds exactly the submodules and parameters its operations use,
so its ``state_dict()`` is its part of the weights.

Examples
--------
>>> import torch
>>> torch.manual_seed(0)  # doctest: +ELLIPSIS
<torch._C.Generator object at ...>
>>> net = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
>>> split = split_model(net, [(1, 8)], cuts=[0, 1, 2])
>>> split.profile.flops
(64.0, 16.0)
>>> split.crossing(1)
(TensorSpec(shape=(1, 4), dtype='float32'),)
>>> x = torch.randn(1, 8)
>>> (hidden,) = split.stages[0](x)
>>> (out,) = split.stages[1](hidden)
>>> torch.allclose(out, net(x))
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import torch
from torch.fx import Graph, GraphModule

from inferplan.codesign.plan import Plan
from inferplan.codesign.planfile import check_plan_model
from inferplan.errors import InvalidArgument, InvalidProfile
from inferplan.profiles.cuts import BlockSpec, Granularity, GraphProfile, TensorInfo
from inferplan.profiles.from_torch import fx_trace, profile_module, torch_dtype
from inferplan.profiles.profile import Profile

__all__ = [
    "PlanStage",
    "SplitModel",
    "TensorSpec",
    "TracedModel",
    "run_layer",
    "split_model",
    "trace_model",
]

Shape = tuple[int, ...]
Tensors = tuple[torch.Tensor, ...]


def run_layer(stage: Any, values: Tensors, repeats: int = 1) -> Tensors:
    """``stage(*values)``, computed ``repeats`` times, the last result returned (the same each
    time): on the testbed a host runs its work that many times under a quota that many times
    larger (:func:`~inferplan.runtime.testbed.linux.repeats`).

    Examples
    --------
    >>> double = lambda x: (2 * x,)
    >>> run_layer(double, (torch.ones(2),), 3)
    (tensor([2., 2.]),)
    """
    out: Tensors = stage(*values)
    for _ in range(repeats - 1):
        out = stage(*values)
    return out


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype (``float32``, ``int64``, ...) of a tensor crossing a cut."""

    shape: Shape
    dtype: str

    @property
    def torch_dtype(self) -> Any:
        """The ``torch.dtype`` of this tensor (an unknown name is refused)."""
        return torch_dtype(self.dtype)


@dataclass(frozen=True)
class SplitModel:
    """A model cut into stages at ``cuts`` (profile cut indices ``0 = c_0 < ... < c_k = N``).

    Attributes
    ----------
    profile
        The model's profile, exactly as :func:`profile_module` gives it.
    cuts
        The cuts, ``c_0..c_k``.
    stages
        ``k`` modules; stage ``i`` computes blocks ``c_i + 1 .. c_{i+1}``. Its ``forward`` takes
        the tensors crossing ``c_i`` (stage 0: the model's inputs) and returns a tuple of the
        tensors crossing ``c_{i+1}`` (the last stage: the model's outputs).
    boundaries
        Split at ideals (:meth:`TracedModel.split_layers`): the names of the values each
        stage receives, then what the last returns (``k + 1`` entries); ``cuts`` is then
        ``0..k`` and cut ``i`` of :meth:`crossing` is what stage ``i`` receives. Empty for a
        split at the profile's cuts.
    """

    profile: Profile
    cuts: tuple[int, ...]
    stages: tuple[torch.nn.Module, ...]
    _crossing: dict[int, tuple[TensorSpec, ...]]
    boundaries: tuple[tuple[str, ...], ...] = ()

    def crossing(self, cut: int) -> tuple[TensorSpec, ...]:
        """The tensors crossing cut ``cut`` (a profile cut ``0..N``, or ``0..k`` for a split
        at ideals), in the order stages pass them."""
        if cut not in self._crossing:
            raise InvalidArgument(f"no cut {cut}: the split has cuts 0..{max(self._crossing)}")
        return self._crossing[cut]

    def run(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Run every stage in order on ``inputs`` (one process): the model's outputs."""
        values: tuple[torch.Tensor, ...] = tuple(inputs)
        for stage in self.stages:
            values = stage(*values)
        return values


@dataclass(frozen=True)
class PlanStage:
    """What one path node of a plan runs (:meth:`TracedModel.plan_stages`).

    Attributes
    ----------
    module
        Its stage module, or ``None`` for a node that only forwards what it receives.
    receives, receives_specs
        The names, shapes and dtypes of the values it receives (the first node: the model's
        inputs), in the order they travel.
    sends, sends_specs
        Those it returns and passes on (the last node: the model's outputs).
    """

    module: torch.nn.Module | None
    receives: tuple[str, ...]
    receives_specs: tuple[TensorSpec, ...]
    sends: tuple[str, ...]
    sends_specs: tuple[TensorSpec, ...]


class TracedModel:
    """A model traced once, ready to be split at any set of its profile's cuts.

    Use :func:`trace_model` to make one; :meth:`split` cuts it.
    """

    def __init__(self, module: torch.nn.Module, traced: GraphProfile) -> None:
        self.graph_module = fx_trace(module)  # the same trace profile_module made
        self.traced = traced
        self.profile = traced.profile
        self._kept = [c.index for c in traced.cuts if c.kept]
        nodes = list(self.graph_module.graph.nodes)
        self._order = {node.name: k for k, node in enumerate(nodes)}
        outputs = next(n for n in nodes if n.op == "output").all_input_nodes
        self._outputs = [n.name for n in outputs]

    def crossing_names(self, cut: int) -> tuple[str, ...]:
        """Names of the values crossing profile cut ``cut``: the model's inputs at 0, its
        outputs (in the order it returns them) at ``N``, otherwise in the order they are made."""
        tensors = self.traced.cuts[self._kept[cut]].tensors
        if cut == self.profile.n_blocks:
            return tuple(self._outputs)
        return tuple(sorted((t.name for t in tensors), key=self._order.__getitem__))

    def crossing(self, cut: int) -> tuple[TensorSpec, ...]:
        """The tensors crossing profile cut ``cut``, in the order stages pass them."""
        info = {t.name: t for t in self.traced.cuts[self._kept[cut]].tensors}
        return _specs(self.crossing_names(cut), info, f"cut {cut}")

    def split(self, cuts: Sequence[int]) -> SplitModel:
        """Cut the model at the profile cuts ``cuts`` (``0 = c_0 < ... < c_k = N``)."""
        n = self.profile.n_blocks
        cuts = tuple(int(c) for c in cuts)
        if len(cuts) < 2 or cuts[0] != 0 or cuts[-1] != n:
            raise InvalidArgument(
                f"cuts must run from 0 to N = {n}, got {list(cuts)}", field="cuts"
            )
        if any(b <= a for a, b in pairwise(cuts)):
            raise InvalidArgument(f"cuts must increase, got {list(cuts)}", field="cuts")
        crossing = {c: self.crossing(c) for c in range(n + 1)}
        stages = tuple(self._stage(a, b) for a, b in pairwise(cuts))
        return SplitModel(self.profile, cuts, stages, crossing)

    def split_layers(self, layers: Sequence[Sequence[str]]) -> SplitModel:
        """Cut the model into stages that run ``layers[i]`` of its layer graph, in order:
        the layers of the first ``i + 1`` stages must form an ideal (each layer with every
        layer it reads) and all stages together every layer once, as a plan cut at ideals
        lists them (:attr:`~inferplan.codesign.plan.Plan.layers`; a stage that runs no layer
        passes on what it receives). Stage ``i`` takes the tensors crossing into it and
        returns those crossing out of it, each in the order of the model's graph (the
        model's inputs first, its outputs last in the order it returns them); a tensor that a
        later stage reads passes through every stage between.

        Raises
        ------
        InvalidArgument
            If the stages are no chain of ideals covering the graph.
        InvalidProfile
            If the profile has no layer graph.
        """
        graph = self.profile.graph
        if graph is None:
            raise InvalidProfile("the profile has no layer graph to split at", field="graph")
        position = graph.index
        done: set[int] = set()
        stage_of: dict[int, int] = {}
        for i, names in enumerate(layers):
            for name in names:
                if name not in position:
                    raise InvalidArgument(f"unknown layer {name!r}", field=f"layers[{i}]")
                if position[name] in stage_of:
                    raise InvalidArgument(f"layer {name!r} runs twice", field=f"layers[{i}]")
                stage_of[position[name]] = i
            for name in names:
                for u in graph.predecessors[position[name]]:
                    if stage_of.get(u, i + 1) > i:
                        raise InvalidArgument(
                            f"layer {name!r} reads {graph.layers[u]!r}, which no stage up to "
                            "its own runs (not an ideal)",
                            field=f"layers[{i}]",
                        )
            done.update(position[name] for name in names)
        if len(done) != graph.n_layers:
            missing = [v for k, v in enumerate(graph.layers) if k not in done]
            raise InvalidArgument(f"no stage runs {missing[0]!r}", field="layers")
        layer_of, constants = self.traced.layer_placement, self.traced.constants
        nodes = [n for n in self.graph_module.graph.nodes if n.op not in ("placeholder", "output")]
        where = {n.name: stage_of[layer_of[n.name]] for n in nodes if n.name not in constants}
        inputs = [n.name for n in self.graph_module.graph.nodes if n.op == "placeholder"]
        where.update(dict.fromkeys(inputs, -1))
        last_use: dict[str, int] = {}
        for node in nodes:
            if node.name in where:
                for arg in node.all_input_nodes:
                    if arg.name in where:
                        last_use[arg.name] = max(last_use.get(arg.name, -1), where[node.name])
        k = len(layers)
        boundaries = [tuple(inputs)]
        outputs = set(self._outputs)
        for i in range(k - 1):  # what is made up to stage i and read, or returned, after it
            sent = [v for v, made in where.items()
                    if made <= i and (last_use.get(v, -1) > i or v in outputs)]  # fmt: skip
            # the outputs alone travel as the model returns them: stages that only forward
            # them to the end pass them on as they are
            in_order = sorted(sent, key=self._order.__getitem__)
            boundaries.append(tuple(self._outputs if set(sent) == outputs else in_order))
        boundaries.append(tuple(self._outputs))
        stages = tuple(
            self._graph_stage(boundaries[i], boundaries[i + 1],
                              {v for v, s in where.items() if s == i}, f"Stage{i}")
            for i in range(k)
        )  # fmt: skip
        info = self.traced.values
        crossing = {
            i: _specs(names, info, f"the boundary after stage {i - 1}" if i else "the input")
            for i, names in enumerate(boundaries)
        }
        return SplitModel(self.profile, tuple(range(k + 1)), stages, crossing, tuple(boundaries))

    def plan_stages(self, plan: Plan) -> tuple[PlanStage, ...]:
        """What each node of ``plan.path`` runs, cut between blocks (``plan.cuts ==
        "chain"``: node ``l`` computes blocks ``partition[l-1] + 1 .. partition[l]``) or at
        ideals (``"graph"``: node ``l`` computes ``plan.layers[l]``, see :meth:`split_layers`).

        Raises
        ------
        InvalidArgument
            If the plan does not fit this model (a partition that does not cover its blocks,
            layers that are no chain of ideals of its layer graph).
        InvalidProfile
            For a plan cut at ideals when the profile has no layer graph.
        """
        check_plan_model(self.profile, plan)  # the layers it names are its partition's
        if plan.cuts == "graph":
            if len(plan.layers) != len(plan.path):
                raise InvalidArgument("a plan cut at ideals names the layers of each path node",
                                      field="layers")  # fmt: skip
            split = self.split_layers(plan.layers)
            return tuple(
                PlanStage(split.stages[k] if names else None, split.boundaries[k],
                          split.crossing(k), split.boundaries[k + 1], split.crossing(k + 1))
                for k, names in enumerate(plan.layers)
            )  # fmt: skip
        partition = plan.cut_indices
        cuts = [0, *sorted(set(partition) - {0})]
        by_first = dict(zip(cuts, self.split(cuts).stages, strict=False))
        stages = []
        for k, last in enumerate(partition):
            first = partition[k - 1] if k else 0
            stages.append(PlanStage(by_first[first] if last > first else None,
                                    self.crossing_names(first), self.crossing(first),
                                    self.crossing_names(last), self.crossing(last)))  # fmt: skip
        return tuple(stages)

    def _graph_stage(
        self, receives: Sequence[str], sends: Sequence[str], own: set[str], label: str
    ) -> GraphModule:
        """A stage module running the operations ``own`` (and the constants they read) from
        the values ``receives`` to the values ``sends``."""
        constants = self.traced.constants
        nodes = [n for n in self.graph_module.graph.nodes if n.op not in ("placeholder", "output")]
        needed: set[str] = set()
        stack = [i for n in nodes if n.name in own for i in n.all_input_nodes]
        while stack:  # the constants this stage's operations read, and what they come from
            node = stack.pop()
            if node.name in constants and node.name not in needed:
                needed.add(node.name)
                stack.extend(node.all_input_nodes)
        graph = Graph()
        env: dict[str, Any] = {name: graph.placeholder(name) for name in receives}
        for node in nodes:
            if node.name in own or node.name in needed:
                env[node.name] = graph.node_copy(node, lambda arg: env[arg.name])
        graph.output(tuple(env[name] for name in sends))
        return GraphModule(self.graph_module, graph, class_name=label)

    def _stage(self, first: int, last: int) -> GraphModule:
        placement, constants = self.traced.placement, self.traced.constants
        low, high = self._kept[first], self._kept[last]
        own = {n.name for n in self.graph_module.graph.nodes
               if n.op not in ("placeholder", "output") and n.name not in constants
               and low < placement[n.name] <= high}  # fmt: skip
        return self._graph_stage(self.crossing_names(first), self.crossing_names(last), own,
                                 f"Stage{first}to{last}")  # fmt: skip


def _specs(names: Sequence[str], info: Mapping[str, TensorInfo], where: str
           ) -> tuple[TensorSpec, ...]:  # fmt: skip
    """The shape and dtype of each value ``names``, which ``where`` passes on."""
    specs = []
    for name in names:
        t = info[name]
        if t.shape is None:
            raise InvalidProfile(
                f"{where} carries {name!r}, a {t.dtype} rather than a tensor: a stage "
                "boundary can only pass tensors",
                field="cuts",
            )
        specs.append(TensorSpec(t.shape, t.dtype))
    return tuple(specs)


def trace_model(
    model: torch.nn.Module,
    input_shapes: Sequence[Shape],
    *,
    blocks: BlockSpec = None,
    dtype: str = "float32",
    input_dtypes: Sequence[str | None] = (),
    name: str | None = None,
    granularity: Granularity = "blocks",
) -> TracedModel:
    """Trace ``model`` and profile it (see :func:`profile_module` for the arguments)."""
    traced = profile_module(model, input_shapes, blocks=blocks, dtype=dtype,
                            input_dtypes=input_dtypes, name=name, tracer="fx",
                            granularity=granularity)  # fmt: skip
    return TracedModel(model, traced)


def split_model(
    model: torch.nn.Module,
    input_shapes: Sequence[Shape],
    *,
    blocks: BlockSpec = None,
    cuts: Sequence[int],
    dtype: str = "float32",
    input_dtypes: Sequence[str | None] = (),
) -> SplitModel:
    """Cut ``model`` at the profile cuts ``cuts`` into stage modules that share its weights.

    Parameters
    ----------
    model
        A ``torch.nn.Module`` with real weights (put it in ``eval()`` mode for inference).
    input_shapes, blocks, dtype, input_dtypes
        As for :func:`~inferplan.profiles.from_torch.profile_module`: they define the profile
        and so the cuts.
    cuts
        Increasing profile cut indices ``0 = c_0 < c_1 < ... < c_k = N``.

    Returns
    -------
    SplitModel
        The profile, the ``k`` stage modules and the tensors crossing each cut.
    """
    traced = trace_model(model, input_shapes, blocks=blocks, dtype=dtype,
                         input_dtypes=input_dtypes)  # fmt: skip
    return traced.split(cuts)
