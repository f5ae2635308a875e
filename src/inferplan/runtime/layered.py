"""A model as ``N`` layers for device-edge co-inference, its system, and the device's policy.

Both sides of the co-inference system build the same model from the same ``MODEL`` (a built-in
name or a ``MODULE:FACTORY`` with input shapes and blocks, as for ``inferplan profile``) and split
it into one stage per profile block: layer ``i`` is stage ``i``, and the activation before layer
``n`` is the set of tensors crossing cut ``n - 1``. The edge builds it with real weights (seeded);
the device builds only its structure, on the ``meta`` device, and downloads the weights of the
layers it places. The system's layers must be the model's blocks, one for one.

The device runs any strategy of the registry :data:`inferplan.coinference.STRATEGIES` (or
``fixed:K``): :func:`plan_device` adds to its decision what the run is measured against.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from inferplan.coinference import Policy, System, decide, evaluate_policy, load_system
from inferplan.coinference.io import layer_count_error
from inferplan.errors import InvalidArgument, InvalidProfile
from inferplan.profiles import Profile
from inferplan.profiles.cuts import BlockSpec
from inferplan.profiles.from_torch import load_module_factory
from inferplan.runtime.examples import builtin_model, check_weights, is_builtin_model
from inferplan.runtime.measure import build_model
from inferplan.runtime.split import trace_model

__all__ = [
    "DevicePlan",
    "LayeredModel",
    "ModelSpec",
    "build_layers",
    "load_model_system",
    "plan_device",
]

TensorSpecs = tuple[tuple[tuple[int, ...], str], ...]


@dataclass(frozen=True)
class ModelSpec:
    """How to build the model: as ``inferplan profile`` takes a PyTorch model.

    Attributes
    ----------
    model
        ``alexnet``, ``mlp-WIDTHxDEPTH``, ``module.path:factory`` or ``file.py:factory``.
    input_shapes
        One shape per positional input (built-in models have a default).
    blocks
        The ``--blocks`` of ``inferplan profile`` (``None``: top-level modules).
    dtype
        Floating-point dtype of weights and activations.
    input_dtypes
        The dtype of each input where it is not ``dtype``.
    """

    model: str
    input_shapes: tuple[tuple[int, ...], ...] = ()
    blocks: BlockSpec = None
    dtype: str = "float32"
    input_dtypes: tuple[str | None, ...] = ()


@dataclass(frozen=True, eq=False)
class LayeredModel:
    """The model split into one stage per layer.

    Attributes
    ----------
    name
        The model's name.
    profile
        Its profile: ``N`` blocks, FLOPs, activation and parameter sizes.
    module
        The unsplit model (on ``meta`` when built without weights).
    stages
        ``N`` modules; stage ``i - 1`` computes layer ``i`` from the tensors crossing cut
        ``i - 1`` and returns the tuple crossing cut ``i``.
    crossings
        For each cut ``c = 0..N``: the ``(shape, dtype)`` of each tensor crossing it (cut 0:
        the inputs, cut ``N``: the outputs).
    """

    name: str
    profile: Profile
    module: nn.Module
    stages: tuple[nn.Module, ...]
    crossings: tuple[TensorSpecs, ...]

    @property
    def n_layers(self) -> int:
        """``N``."""
        return len(self.stages)

    def describe(self) -> dict[str, Any]:
        """What the edge publishes about the model, so that a device can check it is the same."""
        return {
            "model": self.name,
            "layers": self.n_layers,
            "names": list(self.profile.blocks),
            "crossings": [
                [{"shape": list(shape), "dtype": dtype} for shape, dtype in specs]
                for specs in self.crossings
            ],
        }


def build_layers(spec: ModelSpec, *, weights: bool, seed: int = 0) -> LayeredModel:
    """Build the model and split it into one stage per profile block.

    Parameters
    ----------
    spec
        The model.
    weights
        ``True``: real weights on the CPU, drawn after ``torch.manual_seed(seed)`` (the edge).
        ``False``: structure only, on ``meta`` (the device, which downloads its weights).
    seed
        Seed of the weights.

    Examples
    --------
    >>> layered = build_layers(ModelSpec("mlp-8x3"), weights=True)
    >>> layered.n_layers, layered.crossings[0]
    (3, (((1, 8), 'float32'),))
    """
    shapes = spec.input_shapes
    if is_builtin_model(spec.model):
        builtin = builtin_model(spec.model)
        check_weights(builtin.params, spec.dtype, builtin.name)  # the device downloads them
        shapes = shapes or (builtin.input_shape,)
        name = builtin.name
        if weights:
            torch.manual_seed(seed)
            module = builtin.factory().to(getattr(torch, spec.dtype))
        else:
            with torch.device("meta"):
                module = builtin.factory()
    else:
        name = spec.model.rpartition(":")[2]
        if weights:
            module = build_model(spec.model, seed=seed, dtype=spec.dtype)
        else:
            module = load_module_factory(spec.model)
            check_weights(sum(p.numel() for p in module.parameters()), spec.dtype, name)
    if not shapes:
        raise InvalidProfile("give the shape of each input (--input-shape)", field="input-shape")
    module.eval()
    traced = trace_model(
        module,
        shapes,
        blocks=spec.blocks,
        dtype=spec.dtype,
        input_dtypes=spec.input_dtypes,
        name=name,
    )
    n_layers = traced.profile.n_blocks
    split = traced.split(range(n_layers + 1))
    crossings = tuple(
        tuple((tuple(t.shape), t.dtype) for t in split.crossing(c)) for c in range(n_layers + 1)
    )
    for stage in split.stages:
        stage.eval()
    stages = split.stages
    profile = split.profile
    return LayeredModel(name, profile, module, stages, crossings)


def load_model_system(path: str | Path, profile: Profile) -> System:
    """Read the system file at ``path`` for a model with ``profile``.

    A file that names no profile and gives no explicit layers takes its layers from the model's
    profile, by the rules and defaults of :func:`~inferplan.coinference.layers_from_profile`
    (those of ``inferplan coinfer`` for the same profile; ``layers: {input_bits_per_element:
    32}`` and the like change them); a file with layers must have exactly one per block of the
    model.
    """
    system = load_system(path, model=profile)
    if system.n_layers != profile.n_blocks:
        raise layer_count_error(path, system.n_layers, profile.name, profile.blocks)
    return system


@dataclass(frozen=True)
class DevicePlan:
    """The policy the device runs and what the analysis expects of it.

    Attributes
    ----------
    method
        A strategy of :data:`inferplan.coinference.STRATEGIES` or ``fixed:K``.
    policy
        The thresholds (per stage, or per stage and channel state on a channel with memory);
        ``policy.placement`` is ``M``.
    expected_cost
        ``E[eta_S(gamma_S)]`` per inference under this policy.
    placement_cost
        ``c(M)``, the download amortised over ``K`` inferences per update.
    split_probabilities
        ``P(split at n)``, ``n = 1..M+1``.
    """

    method: str
    policy: Policy
    expected_cost: float
    placement_cost: float
    split_probabilities: tuple[float, ...]

    @property
    def placement(self) -> int:
        """``M``."""
        return self.policy.placement

    @property
    def expected_total_cost(self) -> float:
        """``Z(M) = c(M) + E[eta_S]``."""
        return self.placement_cost + self.expected_cost


def plan_device(system: System, method: str) -> DevicePlan:
    """The device's policy for the strategy ``method`` (a name of
    :data:`inferplan.coinference.STRATEGIES` or ``fixed:K``) and what it is expected to cost.

    Examples
    --------
    >>> from inferplan.coinference import default_system, plan_placement
    >>> s = default_system("alexnet")
    >>> plan_device(s, "edge-only").placement, plan_device(s, "fixed:3").placement
    (0, 3)
    >>> plan_device(s, "optimal").placement == plan_placement(s).placement
    True
    """
    try:
        decision = decide(system, method)
    except InvalidArgument as exc:
        raise InvalidArgument(exc.message, field="method") from None
    method, policy = decision.strategy, decision.policy
    expected, split = evaluate_policy(system, policy)
    return DevicePlan(
        method=method,
        policy=policy,
        expected_cost=expected,
        placement_cost=float(system.placement_costs[policy.placement]),
        split_probabilities=tuple(float(p) for p in split),
    )
