"""The studies a sweep spec can name, and how to add one.

A :class:`Study` ties a point function (by import path, so workers can import it) to pydantic
models of its point parameters and of its options. ``inferplan sweep`` validates every point
and the options against them before running anything. A spec may also name any point function
directly (``study: package.module:function``); its parameters are then taken as they are.

To add a study (e.g. the co-inference one), write its point function and models in its own
module and add a :class:`Study` to :data:`STUDIES` with :func:`register_study`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from inferplan.experiments import coinference, latency, provisioning, services

__all__ = ["STUDIES", "Study", "register_study"]


@dataclass(frozen=True)
class Study:
    """A named kind of sweep.

    Attributes
    ----------
    name
        What a spec's ``study`` field says.
    function
        ``"package.module:function"``, called as ``function(params, seed, options)``.
    parameters, options
        pydantic models of one point's parameters and of the shared options.
    seed_from
        Default parameters a point's seed depends on (``None``: all of them).
    check_value
        Called as ``check_value(name, value)`` once per distinct parameter value, to fail
        early (e.g. an unknown profile); raises an :class:`~inferplan.errors.InferplanError`.
    summary
        One line for help texts.
    metric, group_by
        The column a sweep's summary reports per swept parameter (its median and spread), and
        the column that splits its rows into groups (``None``: one group).
    replicates
        The parameters that only index repeats of one setting (a random network's
        ``topology``): a summary pools them into the spread (``sample``, a sampled point's
        index, always is one).
    report
        Called as ``report(rows, out, notes)`` after every sweep of the study, beside its
        summary: writes the study's own tables and figures into ``out`` and returns them
        (``notes`` takes what it could not write); ``None``: none.
    """

    name: str
    function: str
    parameters: type[BaseModel]
    options: type[BaseModel]
    seed_from: tuple[str, ...] | None = None
    check_value: Callable[[str, Any], None] | None = None
    summary: str = ""
    metric: str | None = None
    group_by: str | None = None
    replicates: tuple[str, ...] = ()
    report: Callable[[Sequence[Mapping[str, Any]], Path, list[str]], list[Path]] | None = None


STUDIES: dict[str, Study] = {}


def register_study(study: Study) -> None:
    """Make ``study`` available to sweep specs under ``study.name``."""
    STUDIES[study.name] = study


register_study(
    Study(
        name="provisioning",
        function="inferplan.experiments.provisioning:provisioning_point",
        parameters=provisioning.ProvisioningParams,
        options=provisioning.ProvisioningOptions,
        seed_from=("network", "topology"),
        check_value=provisioning.check_values,
        summary="co-design methods (PSG, PFP, PWF, ...) over networks, DNNs and targets",
        metric="ratio",
        group_by="method",
        replicates=("topology",),
    )
)
register_study(
    Study(
        name="coinference",
        function="inferplan.experiments.coinference:coinference_point",
        parameters=coinference.CoinferenceParams,
        options=coinference.CoinferenceOptions,
        check_value=coinference.check_values,
        summary="co-inference placement and splitting (Z(M) curves, planners, baselines)",
        metric="saving",
        group_by="strategy",
    )
)
register_study(
    Study(
        name="services",
        function="inferplan.experiments.services:services_point",
        parameters=services.ServicesParams,
        options=services.ServicesOptions,
        seed_from=("network", "topology", "services"),
        check_value=services.check_values,
        summary="several services on one network: joint plan vs each planned alone",
        metric="saving",
        replicates=("topology",),
    )
)
register_study(
    Study(
        name="latency",
        function="inferplan.experiments.latency:latency_point",
        parameters=latency.LatencyParams,
        options=latency.LatencyOptions,
        seed_from=("network", "topology"),
        check_value=provisioning.check_values,
        summary="what a latency bound below the cheapest plan's latency costs (PSG, exact)",
        metric="cost_ratio",
        group_by="dnn",
        replicates=("topology",),
        report=latency.latency_report,
    )
)
