"""The co-inference reproduction's sweeps and the summaries of its rows: curves, savings
against each baseline, placements and costs along each swept parameter."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from inferplan.coinference import (
    DEFAULT_CHANNEL,
    DEFAULT_DEVICE,
    STRATEGIES,
    Rayleigh,
)
from inferplan.coinference.system import (
    DEFAULT_ENERGY_WEIGHT,
    DEFAULT_INFERENCES_PER_UPDATE,
)
from inferplan.errors import InvalidArgument
from inferplan.experiments.coinference.point import (
    BASELINES,
    CoinferenceOptions,
    mlp_shape,
    profile_layers,
)
from inferplan.experiments.engine import Sweep
from inferplan.experiments.space import make_points

__all__ = [
    "COINFERENCE_DNNS",
    "COINFERENCE_SWEEPS",
    "CURVE_COLUMNS",
    "SAVINGS_COLUMNS",
    "SWEEP_COLUMNS",
    "coinference_sweep",
    "curve_summary",
    "savings_summary",
    "sweep_summary",
]

#: The DNNs of the reproduction. ``mlp-1024x8`` is the paper's equal-width MLP (Section IV-C,
#: closed-form placement) with as many layers as AlexNet; why 1024 wide: see the report.
COINFERENCE_DNNS = ("alexnet", "vgg16", "mlp-1024x8")


def default_values() -> dict[str, float | int]:
    assert isinstance(DEFAULT_CHANNEL, Rayleigh)
    return {
        "inferences_per_update": DEFAULT_INFERENCES_PER_UPDATE,
        "mean_snr": DEFAULT_CHANNEL.mean_snr,
        "bandwidth_hz": DEFAULT_DEVICE.bandwidth_hz,
        "energy_weight": DEFAULT_ENERGY_WEIGHT,
    }


#: One parameter varied at a time around the default system (whose value each list holds).
COINFERENCE_SWEEPS: dict[str, tuple[float | int, ...]] = {
    "inferences_per_update": (10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000),
    "mean_snr": (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0),
    "bandwidth_hz": (2.5e5, 5e5, 1e6, 2e6, 5e6, 1e7, 2e7, 5e7),
    "energy_weight": (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0),
}

PARAM_NAMES = {
    "inferences_per_update": "K (inferences per model update)",
    "mean_snr": "mean SNR",
    "bandwidth_hz": "uplink bandwidth W",
    "energy_weight": "energy weight beta_e",
}
_DNN_NAMES = {"alexnet": "AlexNet", "vgg16": "VGG-16", "resnet50": "ResNet-50"}


def cost_column(strategy: str) -> str:
    """The column of ``sweeps.csv`` that holds a strategy's cost (``cost_edge_only``)."""
    return f"cost_{STRATEGIES[strategy].key}"


CURVE_COLUMNS = ("dnn", "M", "placement_cost", "z_optimal", "z_1sla", "p_1sla_optimal")
SAVINGS_COLUMNS = (
    "dnn",
    "parameter",
    "baseline",
    "points",
    "min_saving",
    "median_saving",
    "max_saving",
    "frac_better",
)
SWEEP_COLUMNS = (
    "dnn",
    "parameter",
    "value",
    "placement_optimal",
    "placement_1sla",
    *(cost_column(name) for name, s in STRATEGIES.items() if s.same_as is None),
)
#: A saving counts as "better" above this (relative costs are sums in other orders).
SAVING_TOL = 1e-9


def dnn_name(dnn: str) -> str:
    """A DNN's display name (``mlp-1024x8`` -> ``MLP 1024x8``)."""
    shape = mlp_shape(dnn)
    if shape is not None:
        return f"MLP {shape[0]}x{shape[1]}"
    return _DNN_NAMES.get(dnn, dnn)


def _sweep_params(
    dnns: Sequence[str], sweeps: Mapping[str, Sequence[float | int]]
) -> list[dict[str, Any]]:
    defaults = default_values()
    unknown = sorted(set(sweeps) - set(defaults))
    if unknown:
        raise InvalidArgument(
            f"cannot sweep {', '.join(unknown)} (the reproduction sweeps "
            f"{', '.join(defaults)}; use a sweep spec for other parameters)",
            field="sweeps",
        )
    for dnn in dnns:
        profile_layers(dnn)
    params = []
    for dnn in dnns:
        for name, values in sweeps.items():
            for value in sorted({*values, defaults[name]}):
                params.append({"profile": dnn, **defaults, name: value})
    return params


def coinference_sweep(
    *,
    seed: int = 0,
    dnns: Sequence[str] = COINFERENCE_DNNS,
    sweeps: Mapping[str, Sequence[float | int]] = COINFERENCE_SWEEPS,
    simulate: int = 20_000,
) -> Sweep:
    """The reproduction as a sweep of the ``coinference`` study.

    Every point names the DNN and all swept parameters, so the default system of a DNN is one
    point shared by all its sweeps. ``simulate`` inferences per point check the analytic costs.

    Examples
    --------
    >>> sweep = coinference_sweep(dnns=["alexnet"], sweeps={"mean_snr": [5.0, 20.0]})
    >>> [p.params["mean_snr"] for p in sweep.points]
    [5.0, 10.0, 20.0]
    """
    params = _sweep_params(dnns, sweeps)
    try:
        options = CoinferenceOptions(simulate=simulate).model_dump()
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise InvalidArgument(f"{message}, got {simulate!r}", field="simulate") from None
    return Sweep(
        function="inferplan.experiments.coinference:coinference_point",
        points=make_points(params, sweep_seed=seed),
        options=options,
        seed=seed,
        study="reproduce-coinference",
    )


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def _in_sweep(row: Mapping[str, Any], parameter: str, defaults: Mapping[str, Any]) -> bool:
    return all(row[k] == v for k, v in defaults.items() if k != parameter)


def _is_default(row: Mapping[str, Any], defaults: Mapping[str, Any]) -> bool:
    return all(row[k] == v for k, v in defaults.items())


def dnns_of(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r["profile"]) for r in rows))


def curve_summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The curves over ``M`` of each DNN's default system (:data:`CURVE_COLUMNS`)."""
    defaults = default_values()
    return [
        {"dnn": r["profile"], **{k: r[k] for k in CURVE_COLUMNS[1:]}}
        for r in rows
        if r["record"] == "curve" and _is_default(r, defaults)
    ]


def swept_parameters(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    defaults = default_values()
    return [name for name in defaults if len({r[name] for r in rows}) > 1]


def savings_summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Saving of the joint plan over each baseline, per DNN and swept parameter
    (:data:`SAVINGS_COLUMNS`); ``parameter = "all"`` pools every point of the DNN.

    ``saving = 1 - Z_joint / Z_baseline``; ``frac_better`` is the share of points where it
    exceeds :data:`SAVING_TOL`.
    """
    defaults = default_values()
    strategy_rows = [r for r in rows if r["record"] == "strategy"]
    out = []
    for dnn in dnns_of(strategy_rows):
        mine = [r for r in strategy_rows if r["profile"] == dnn]
        for parameter in [*swept_parameters(strategy_rows), "all"]:
            group = [r for r in mine if parameter == "all" or _in_sweep(r, parameter, defaults)]
            for baseline in BASELINES:
                savings = [float(r["saving"]) for r in group if r["strategy"] == baseline]
                if not savings:
                    continue
                out.append(
                    {
                        "dnn": dnn,
                        "parameter": parameter,
                        "baseline": baseline,
                        "points": len(savings),
                        "min_saving": min(savings),
                        "median_saving": median(savings),
                        "max_saving": max(savings),
                        "frac_better": sum(s > SAVING_TOL for s in savings) / len(savings),
                    }
                )
    return out


def sweep_summary(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per DNN, swept parameter and value: both placements and every strategy's cost
    (:data:`SWEEP_COLUMNS`), the data of the sweep figures."""
    defaults = default_values()
    strategy_rows = [r for r in rows if r["record"] == "strategy"]
    by_point: dict[str, dict[str, Mapping[str, Any]]] = {}
    for r in strategy_rows:
        by_point.setdefault(str(r["point"]), {})[str(r["strategy"])] = r
    out = []
    for dnn in dnns_of(strategy_rows):
        for parameter in swept_parameters(strategy_rows):
            points = [
                s for s in by_point.values()
                if next(iter(s.values()))["profile"] == dnn
                and _in_sweep(next(iter(s.values())), parameter, defaults)
            ]  # fmt: skip
            points.sort(key=lambda s: float(next(iter(s.values()))[parameter]))
            for s in points:
                row: dict[str, Any] = {
                    "dnn": dnn,
                    "parameter": parameter,
                    "value": next(iter(s.values()))[parameter],
                    "placement_optimal": s["optimal"]["placement"] if "optimal" in s else None,
                    "placement_1sla": s["1sla"]["placement"] if "1sla" in s else None,
                }
                for name, strategy in STRATEGIES.items():
                    if strategy.same_as is None:
                        row[cost_column(name)] = s[name]["cost"] if name in s else None
                out.append(row)
    return out
