"""Co-design of DNN deployment and infrastructure capacity on a network (seed paper A)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inferplan.lazy import export_lazily

if TYPE_CHECKING:
    from inferplan.codesign.frontier import Frontier, cost_frontier, latency_frontier
    from inferplan.codesign.heuristics import solve_pfp, solve_pwf
    from inferplan.codesign.instance import CodesignInstance, compile_instance
    from inferplan.codesign.latency import least_latency, solve_latency, throughput_within
    from inferplan.codesign.methods import (
        METHODS,
        SERVICE_METHODS,
        Method,
        get_method,
        method_names,
    )
    from inferplan.codesign.milp import solve_milp
    from inferplan.codesign.plan import STATUSES, Deployment, LinkUpgrade, Plan
    from inferplan.codesign.provision import (
        latency_optimal,
        provision,
        target_interval,
        throughput,
    )
    from inferplan.codesign.psg import reference_psg, solve_psg
    from inferplan.codesign.servicefile import load_services
    from inferplan.codesign.services import Service, ServicesPlan, provision_services
    from inferplan.codesign.throughput import throughput_optimal

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
        "inferplan.codesign.milp": ("solve_milp",),
        "inferplan.codesign.plan": ("STATUSES", "Deployment", "LinkUpgrade", "Plan"),
        "inferplan.codesign.latency": ("least_latency", "solve_latency", "throughput_within"),
        "inferplan.codesign.provision": (
            "latency_optimal",
            "provision",
            "target_interval",
            "throughput",
        ),
        "inferplan.codesign.psg": ("reference_psg", "solve_psg"),
        "inferplan.codesign.servicefile": ("load_services",),
        "inferplan.codesign.services": ("Service", "ServicesPlan", "provision_services"),
        "inferplan.codesign.throughput": ("throughput_optimal",),
    },
)
