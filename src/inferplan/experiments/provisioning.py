"""The provisioning study: every co-design method on one network, DNN and target per point.

Parameters of a point (validated by :class:`ProvisioningParams`):

``network``
    ``"tiered"`` (default): a network of the co-design paper's study, drawn from the point's
    seed; or the path of a network file.
``topology``
    Replicate index (default 0). It only matters through the seed: with the default
    ``seed_from = ["network", "topology"]`` every DNN, target and method of one topology runs on
    the same random network.
``dnn``
    A built-in profile name (``vgg16``, ``resnet50``, ...) or a profile file.
``alpha`` | ``interval`` | ``throughput``
    The target: ``beta = alpha * T*`` (relative to the network's throughput-optimal interval),
    an interval in seconds, or inferences per second. Exactly one.
``sample``
    The index of the point in a random sample (set by the engine; only tells points apart).

Options (shared by all points): ``methods``, names from
:data:`inferplan.codesign.METHODS`, or a baseline with its tie-break fixed
(:func:`inferplan.codesign.method_names`): ``pwf-keep`` (PWF with ``tie_break="keep"``; ``pwf``
is ``tie_break="solver"``), ``pfp-random`` and ``pwf-random`` (a throughput-optimal deployment
drawn uniformly among the tied ones, seeded by the point's seed). Default ``[psg, pfp, pwf]``.

One row per method: ``method, status, cost, ratio, runtime_s, engine, interval,
target_interval, latency, t_star, t_star_ties, path, partition``. ``status`` is the plan's (one of
:data:`inferplan.codesign.STATUSES`) or ``infeasible`` when the method has no plan within the
capacity caps (then ``cost``, ``interval`` and ``latency`` are empty); ``latency`` is the
plan's, in seconds. ``ratio`` is the cost over PSG's cost
on the same instance (when ``psg`` is among the methods); ``runtime_s`` is the wall time of
that one solver call, the instance being compiled and ``T*`` found once per point beforehand;
``engine`` is ``compiled`` when PSG and ``T*`` ran as numba-compiled kernels, ``numpy``
otherwise. ``t_star_ties`` is the number of deployments that reach ``T*`` under the existing
capacities (:class:`~inferplan.codesign.optima.OptimalDeployments`): the ties PFP and PWF
choose among.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from inferplan.codesign import CodesignInstance, Plan, compile_instance, method_names
from inferplan.codesign.engine.compiled import compiled_engine
from inferplan.codesign.engine.throughput import throughput_optimal
from inferplan.codesign.methods import resolve, solve
from inferplan.codesign.optima import OptimalDeployments
from inferplan.codesign.plan import cut_csv
from inferplan.errors import Infeasible
from inferplan.experiments.space import distinct_known
from inferplan.network import load_network, tiered
from inferplan.profiles import load_profile

__all__ = [
    "DEFAULT_METHODS",
    "ProvisioningOptions",
    "ProvisioningParams",
    "check_values",
    "provisioning_point",
]

DEFAULT_METHODS = ("psg", "pfp", "pwf")
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class ProvisioningParams(BaseModel):
    """The parameters of one point."""

    model_config = ConfigDict(extra="forbid")

    network: str = "tiered"
    topology: Annotated[int, Field(ge=0)] = 0
    dnn: str
    alpha: Positive | None = None
    interval: Positive | None = None
    throughput: Positive | None = None
    sample: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _one_target(self) -> ProvisioningParams:
        given = [n for n in ("alpha", "interval", "throughput") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of alpha, interval or throughput"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self


class ProvisioningOptions(BaseModel):
    """Options shared by every point."""

    model_config = ConfigDict(extra="forbid")

    methods: list[str] = Field(default_factory=lambda: list(DEFAULT_METHODS), min_length=1)

    @field_validator("methods")
    @classmethod
    def _known(cls, methods: list[str]) -> list[str]:
        return distinct_known(methods, method_names(), "method")


def check_values(name: str, value: Any) -> None:
    """Check a ``network`` or ``dnn`` value can be loaded, before a sweep starts.

    Raises
    ------
    InferplanError
        The loader's error, e.g. an unknown profile name or a missing file.
    """
    if name == "dnn":
        load_profile(str(value))
    elif name == "network" and value != "tiered":
        load_network(Path(str(value)))


@lru_cache(maxsize=32)
def _instance(
    network: str, seed: int, dnn: str, acyclic: bool
) -> tuple[CodesignInstance, float, float]:
    # Consecutive points of a grid usually share the network and DNN: compile, find T* and
    # count its ties once.
    net = tiered(seed=seed) if network == "tiered" else load_network(Path(network))
    inst = compile_instance(net, load_profile(dnn), require_acyclic=acyclic)
    t_star = throughput_optimal(inst).interval
    ties = OptimalDeployments(inst, inst.capacity, inst.bandwidth, t_star).count
    return inst, t_star, float(round(ties)) if ties < 2**53 else ties


def _ratio(cost: float, optimum: float) -> float:
    if optimum > 0:
        return cost / optimum
    return 1.0 if cost == 0 else math.inf


def provisioning_point(
    params: Mapping[str, Any], seed: int, options: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Run every method of ``options`` on the instance of ``params`` (the study's point function).

    Examples
    --------
    >>> rows = provisioning_point({"topology": 1, "dnn": "vgg16", "alpha": 0.5}, 42, {})
    >>> [r["method"] for r in rows], rows[0]["ratio"]
    (['psg', 'pfp', 'pwf'], 1.0)
    """
    p = ProvisioningParams.model_validate(params)
    methods = ProvisioningOptions.model_validate(options).methods
    acyclic = any(resolve(m)[0].acyclic_only for m in methods)
    inst, t_star, ties = _instance(p.network, seed, p.dnn, acyclic)
    engine = "compiled" if compiled_engine("auto") else "numpy"
    if p.alpha is not None:
        beta = p.alpha * t_star
    else:
        beta = p.interval if p.interval is not None else 1.0 / (p.throughput or math.nan)
    plans: dict[str, tuple[Plan | None, float]] = {}
    for name in methods:
        start = time.perf_counter()
        seeded = {"seed": seed} if "seed" in resolve(name)[0].options else {}
        try:
            plan: Plan | None = solve(inst, beta, name, **seeded)
        except Infeasible:
            plan = None
        plans[name] = (plan, time.perf_counter() - start)
    best = plans["psg"][0] if "psg" in plans else None
    rows = []
    for name, (found, seconds) in plans.items():
        cost = found.cost if found is not None else math.inf
        rows.append(
            {
                "method": name,
                "status": found.status if found is not None else "infeasible",
                "cost": cost,
                "ratio": _ratio(cost, best.cost) if best is not None else None,
                "runtime_s": seconds,
                "engine": engine,
                "interval": found.interval if found is not None else math.nan,
                "target_interval": beta,
                "latency": found.latency if found is not None else math.nan,
                "t_star": t_star,
                "t_star_ties": ties,
                "path": ">".join(found.path) if found is not None else "",
                "partition": cut_csv(found.partition) if found is not None else "",
                "ideals": cut_csv(found.ideals) if found is not None else "",
            }
        )
    return rows
