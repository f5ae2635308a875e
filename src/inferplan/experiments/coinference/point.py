"""The co-inference study's point: its parameters and options, the system a point
describes, and the rows it produces (see :mod:`inferplan.experiments.coinference`)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from inferplan.coinference import (
    DEFAULT_CHANNEL,
    DEFAULT_DEVICE,
    DEFAULT_EDGE,
    STRATEGIES,
    Channel,
    GaussMarkov,
    Layers,
    LogNormal,
    Nakagami,
    Rayleigh,
    RicianGaussMarkov,
    System,
    compare_baselines,
    expected_costs,
    layers_from_profile,
    mlp_layers,
    mlp_placement,
    optimality_probabilities,
    plan_placement,
    planner_names,
    simulate,
)
from inferplan.coinference.system import (
    DEFAULT_DOWNLINK_BPS,
    DEFAULT_ENERGY_WEIGHT,
    DEFAULT_INFERENCES_PER_UPDATE,
)
from inferplan.errors import InferplanError
from inferplan.experiments.space import distinct_known
from inferplan.profiles import load_profile

__all__ = [
    "BASELINES",
    "CoinferenceOptions",
    "CoinferenceParams",
    "build_system",
    "check_values",
    "coinference_point",
]

#: Baselines the joint plan (optimal placement + optimal splitting) is compared with: every
#: strategy that does not reach the joint optimum.
BASELINES = tuple(name for name, s in STRATEGIES.items() if not s.exact)

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class CoinferenceParams(BaseModel):
    """The parameters of one point (see the module docstring); ``None`` keeps the default."""

    model_config = ConfigDict(extra="forbid")

    profile: str = "alexnet"
    inferences_per_update: Annotated[int, Field(ge=1)] | None = None
    energy_weight: Annotated[float, Field(ge=0, le=1)] | None = None
    bandwidth_hz: Positive | None = None
    downlink_bps: Positive | None = None
    device_cpu_hz: Positive | None = None
    edge_cpu_hz: Positive | None = None
    tx_power_w: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    channel: Literal["rayleigh", "nakagami", "lognormal", "gauss-markov"] = "rayleigh"
    mean_snr: Positive | None = None
    min_snr: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    nakagami_m: Positive | None = None
    sigma_db: Positive | None = None
    speed_mps: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    carrier_hz: Positive | None = None
    rho: Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)] | None = None
    k_factor: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)] | None = None
    sample: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _finite_channel(self) -> CoinferenceParams:
        if self.channel != "nakagami" and self.nakagami_m is not None:
            raise ValueError(f"nakagami_m applies to channel nakagami, not {self.channel}")
        if self.channel != "lognormal" and self.sigma_db is not None:
            raise ValueError(f"sigma_db applies to channel lognormal, not {self.channel}")
        if self.channel == "lognormal" and self.min_snr is not None:
            raise ValueError("a lognormal channel has no outage floor: drop min_snr")
        memory = (self.speed_mps, self.carrier_hz, self.rho, self.k_factor)
        if self.channel != "gauss-markov" and any(v is not None for v in memory):
            raise ValueError(
                "speed_mps, carrier_hz, rho and k_factor apply to channel gauss-markov, not "
                f"{self.channel}"
            )
        if self.channel == "gauss-markov" and (self.rho is None) == (
            self.speed_mps is None or self.carrier_hz is None
        ):
            raise ValueError("channel gauss-markov needs rho, or speed_mps and carrier_hz")
        try:
            _channel(self).mean_inv_log()
        except InferplanError as exc:
            raise ValueError(exc.message) from None
        return self


class CoinferenceOptions(BaseModel):
    """Options shared by every point."""

    model_config = ConfigDict(extra="forbid")

    methods: list[str] = Field(default_factory=lambda: list(planner_names()), min_length=1)
    simulate: Annotated[int, Field(ge=0)] = 0
    confidence: Annotated[float, Field(gt=0, lt=1)] = 0.999

    @field_validator("methods")
    @classmethod
    def _known(cls, methods: list[str]) -> list[str]:
        return distinct_known(methods, planner_names(), "method")

    @field_validator("simulate")
    @classmethod
    def _enough(cls, inferences: int) -> int:
        if inferences == 1:
            raise ValueError("simulate needs at least 2 inferences (or 0: no simulation)")
        return inferences


def check_values(name: str, value: Any) -> None:
    """Check a ``profile`` value can be loaded, before a sweep starts.

    Raises
    ------
    InferplanError
        The loader's error, e.g. an unknown profile name or a missing file.
    """
    if name == "profile":
        profile_layers(str(value))


def mlp_shape(profile: str) -> tuple[int, int] | None:
    key = profile.strip().lower()
    width, sep, depth = key.removeprefix("mlp-").partition("x")
    if key.startswith("mlp-") and sep and width.isdigit() and depth.isdigit():
        return int(width), int(depth)
    return None


@lru_cache(maxsize=32)
def profile_layers(profile: str) -> Layers:
    # Consecutive points of a sweep share the DNN: build its layers once per process.
    shape = mlp_shape(profile)
    if shape is not None:
        return mlp_layers(*shape)
    return layers_from_profile(load_profile(profile))


def _channel(p: CoinferenceParams) -> Channel:
    assert isinstance(DEFAULT_CHANNEL, Rayleigh)
    mean = p.mean_snr if p.mean_snr is not None else DEFAULT_CHANNEL.mean_snr
    floor = DEFAULT_CHANNEL.min_snr if p.min_snr is None else (p.min_snr or None)
    if p.channel == "rayleigh":
        return Rayleigh(mean, min_snr=floor)
    if p.channel == "nakagami":
        return Nakagami(p.nakagami_m or 2.0, mean, min_snr=floor)
    if p.channel == "gauss-markov" and p.k_factor is not None:
        return RicianGaussMarkov(mean, p.k_factor, floor, p.rho, p.speed_mps, p.carrier_hz)
    if p.channel == "gauss-markov":
        return GaussMarkov(mean, floor, p.rho, p.speed_mps, p.carrier_hz)
    sigma_db = p.sigma_db or 6.0
    # 10 log10(gamma) ~ Normal(mean_db, sigma_db) has linear mean
    # 10^(mean_db / 10) exp((sigma_db ln10 / 10)^2 / 2): choose mean_db to make it `mean`.
    mean_db = 10 * math.log10(mean) - sigma_db**2 * math.log(10) / 20
    return LogNormal(mean_db, sigma_db)


def build_system(params: Mapping[str, Any]) -> System:
    """The system of one point: the default system with the point's parameters.

    Examples
    --------
    >>> s = build_system({"profile": "mlp-64x3", "energy_weight": 0.2, "mean_snr": 20.0})
    >>> s.n_layers, s.energy_weight, s.channel.mean_snr
    (3, 0.2, 20.0)
    """
    p = CoinferenceParams.model_validate(params)
    device = replace(
        DEFAULT_DEVICE,
        **{
            name: value
            for name, value in (
                ("cpu_hz", p.device_cpu_hz),
                ("bandwidth_hz", p.bandwidth_hz),
                ("tx_power_w", p.tx_power_w),
            )
            if value is not None
        },
    )
    edge = DEFAULT_EDGE if p.edge_cpu_hz is None else replace(DEFAULT_EDGE, cpu_hz=p.edge_cpu_hz)
    return System(
        device=device,
        edge=edge,
        layers=profile_layers(p.profile),
        channel=_channel(p),
        downlink_bps=p.downlink_bps or DEFAULT_DOWNLINK_BPS,
        inferences_per_update=p.inferences_per_update or DEFAULT_INFERENCES_PER_UPDATE,
        energy_weight=(DEFAULT_ENERGY_WEIGHT if p.energy_weight is None else p.energy_weight),
    )


def _equal_layers(system: System) -> bool:
    layers = system.layers
    return all(len(set(getattr(layers, k))) == 1 for k in ("cycles", "input_bits", "param_bits"))


def coinference_point(
    params: Mapping[str, Any], seed: int, options: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Curves over ``M`` and every planner and baseline on one system (the study's point
    function; rows as in the module docstring).

    Examples
    --------
    >>> rows = coinference_point({"profile": "alexnet"}, 0, {})
    >>> [r["M"] for r in rows if r["record"] == "curve"]
    [0, 1, 2, 3, 4, 5, 6, 7, 8]
    >>> best = {r["strategy"]: r for r in rows if r["record"] == "strategy"}
    >>> best["optimal"]["placement"], best["optimal"]["cost"] <= best["edge-only"]["cost"]
    (5, True)
    """
    opts = CoinferenceOptions.model_validate(options)
    system = build_system(params)
    z_opt = expected_costs(system)
    z_sla = expected_costs(system, rule="1sla")
    same = optimality_probabilities(system)
    rows: list[dict[str, Any]] = [
        {
            "record": "curve",
            "M": m,
            "placement_cost": float(system.placement_costs[m]),
            "z_optimal": float(z_opt[m]),
            "z_1sla": float(z_sla[m]),
            "p_1sla_optimal": float(same[m]),
        }
        for m in range(system.n_layers + 1)
    ]
    base = compare_baselines(system)
    strategies: dict[str, dict[str, Any]] = {}
    for method in opts.methods:
        start = time.perf_counter()
        plan = plan_placement(system, method=method)
        seconds = time.perf_counter() - start
        strategies[method] = {
            "cost": plan.expected_cost,
            "placement": plan.placement,
            "runtime_s": seconds,
            "stage_evaluations": plan.stage_evaluations,
        }
    for name, strategy in STRATEGIES.items():
        if not strategy.planner:
            d = strategy.decide(system)
            strategies[name] = {
                "cost": d.expected_cost,
                "placement": d.placement,
                "split_stage": d.split_stage,
            }
    if "1sla" in strategies and _equal_layers(system):
        strategies["1sla"]["closed_form_placement"] = mlp_placement(system).placement
    if opts.simulate:
        sim = simulate(
            system,
            list(strategies),
            inferences=opts.simulate,
            seed=seed,
            confidence=opts.confidence,
        )
        for name in strategies:
            result = sim[name]
            strategies[name].update(
                sim_mean=result.mean_cost,
                sim_ci_low=result.ci_low,
                sim_ci_high=result.ci_high,
                sim_confidence=opts.confidence,
            )
    for name, values in strategies.items():
        cost = float(values["cost"])
        rows.append(
            {
                "record": "strategy",
                "strategy": name,
                "cost": cost,
                "placement": values["placement"],
                "split_stage": values.get("split_stage"),
                "saving": 1.0 - base.joint / cost,
                "runtime_s": values.get("runtime_s"),
                "stage_evaluations": values.get("stage_evaluations"),
                "closed_form_placement": values.get("closed_form_placement"),
                "sim_mean": values.get("sim_mean"),
                "sim_ci_low": values.get("sim_ci_low"),
                "sim_ci_high": values.get("sim_ci_high"),
                "sim_confidence": values.get("sim_confidence"),
            }
        )
    return rows
