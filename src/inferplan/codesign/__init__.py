"""Co-design of DNN deployment and infrastructure capacity on a network (seed paper A)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inferplan.lazy import export_lazily

if TYPE_CHECKING:
    from inferplan.codesign.engine.psg import reference_psg, solve_psg
    from inferplan.codesign.engine.throughput import throughput_optimal
    from inferplan.codesign.frontier import Frontier, cost_frontier, latency_frontier
    from inferplan.codesign.heuristics import solve_pfp, solve_pwf
    from inferplan.codesign.instance import CodesignInstance, compile_instance
    from inferplan.codesign.latency.bound import solve_latency
    from inferplan.codesign.latency.least import least_latency, throughput_within
    from inferplan.codesign.methods import (
        METHODS,
        SERVICE_METHODS,
        Method,
        get_method,
        method_names,
    )
    from inferplan.codesign.milp.cost import solve_milp
    from inferplan.codesign.plan import STATUSES, Deployment, LinkUpgrade, Plan
    from inferplan.codesign.provision import (
        explain,
        latency_optimal,
        provision,
        target_interval,
        throughput,
    )
    from inferplan.codesign.services.file import load_services
    from inferplan.codesign.services.joint import Service, ServicesPlan, provision_services

__all__ = [
    "METHODS",
    "SERVICE_METHODS",
    "STATUSES",
    "CodesignInstance",
    "Deployment",
    "Frontier",
    "LinkUpgrade",
    "Method",
    "Plan",
    "Service",
    "ServicesPlan",
    "compile_instance",
    "cost_frontier",
    "explain",
    "get_method",
    "latency_frontier",
    "latency_optimal",
    "least_latency",
    "load_services",
    "method_names",
    "provision",
    "provision_services",
    "reference_psg",
    "solve_latency",
    "solve_milp",
    "solve_pfp",
    "solve_psg",
    "solve_pwf",
    "target_interval",
    "throughput",
    "throughput_optimal",
    "throughput_within",
]

export_lazily(
    __name__,
    {
        "inferplan.codesign.frontier": ("Frontier", "cost_frontier", "latency_frontier"),
        "inferplan.codesign.heuristics": ("solve_pfp", "solve_pwf"),
        "inferplan.codesign.instance": ("CodesignInstance", "compile_instance"),
        "inferplan.codesign.methods": (
            "METHODS",
            "SERVICE_METHODS",
            "Method",
            "get_method",
            "method_names",
        ),
        "inferplan.codesign.milp.cost": ("solve_milp",),
        "inferplan.codesign.plan": ("STATUSES", "Deployment", "LinkUpgrade", "Plan"),
        "inferplan.codesign.latency.bound": ("solve_latency",),
        "inferplan.codesign.latency.least": ("least_latency", "throughput_within"),
        "inferplan.codesign.provision": (
            "explain",
            "latency_optimal",
            "provision",
            "target_interval",
            "throughput",
        ),
        "inferplan.codesign.engine.psg": ("reference_psg", "solve_psg"),
        "inferplan.codesign.services.file": ("load_services",),
        "inferplan.codesign.services.joint": ("Service", "ServicesPlan", "provision_services"),
        "inferplan.codesign.engine.throughput": ("throughput_optimal",),
    },
)
