"""inferplan: plan where deep-learning inference runs and what infrastructure it needs.

Examples
--------
>>> import inferplan
>>> net = inferplan.tiered(seed=3)
>>> plan = inferplan.provision(net, inferplan.load_profile("resnet50"), throughput=40.0)
>>> plan.method, plan.path[0], plan.path[-1]
('psg', 's', 't')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inferplan.lazy import export_lazily

if TYPE_CHECKING:
    from inferplan.codesign import (
        Deployment,
        Plan,
        Service,
        ServicesPlan,
        explain,
        latency_optimal,
        load_services,
        provision,
        provision_services,
        throughput,
    )
    from inferplan.coinference import (
        Discrete,
        LogNormal,
        Nakagami,
        PlacementPlan,
        Rayleigh,
        SplitPolicy,
        System,
        Trace,
        compare_baselines,
        default_system,
        expected_costs,
        load_system,
        optimality_probabilities,
        plan_placement,
        simulate,
        solve_stopping,
    )
    from inferplan.errors import (
        DivergentCost,
        Infeasible,
        InferplanError,
        InvalidArgument,
        InvalidFile,
        InvalidNetwork,
        InvalidProfile,
        InvalidSystem,
        NetworkHasCycle,
    )
    from inferplan.network import (
        LinearCost,
        Link,
        Network,
        Node,
        layered_dag,
        load_network,
        network_from_dict,
        save_network,
        tiered,
    )
    from inferplan.profiles import (
        Profile,
        alexnet,
        load_profile,
        mlp,
        profile_from_dict,
        resnet50,
        save_profile,
        vgg16,
    )

__version__ = "0.1.0"

__all__ = [
    "Deployment",
    "Discrete",
    "DivergentCost",
    "Infeasible",
    "InferplanError",
    "InvalidArgument",
    "InvalidFile",
    "InvalidNetwork",
    "InvalidProfile",
    "InvalidSystem",
    "LinearCost",
    "Link",
    "LogNormal",
    "Nakagami",
    "Network",
    "NetworkHasCycle",
    "Node",
    "PlacementPlan",
    "Plan",
    "Profile",
    "Rayleigh",
    "Service",
    "ServicesPlan",
    "SplitPolicy",
    "System",
    "Trace",
    "alexnet",
    "compare_baselines",
    "default_system",
    "expected_costs",
    "explain",
    "latency_optimal",
    "layered_dag",
    "load_network",
    "load_profile",
    "load_services",
    "load_system",
    "mlp",
    "network_from_dict",
    "optimality_probabilities",
    "plan_placement",
    "profile_from_dict",
    "provision",
    "provision_services",
    "resnet50",
    "save_network",
    "save_profile",
    "simulate",
    "solve_stopping",
    "throughput",
    "tiered",
    "vgg16",
]

export_lazily(
    __name__,
    {
        "inferplan.codesign": (
            "Deployment",
            "Plan",
            "Service",
            "ServicesPlan",
            "explain",
            "latency_optimal",
            "load_services",
            "provision",
            "provision_services",
            "throughput",
        ),
        "inferplan.coinference": (
            "Discrete",
            "LogNormal",
            "Nakagami",
            "PlacementPlan",
            "Rayleigh",
            "SplitPolicy",
            "System",
            "Trace",
            "compare_baselines",
            "default_system",
            "expected_costs",
            "load_system",
            "optimality_probabilities",
            "plan_placement",
            "simulate",
            "solve_stopping",
        ),
        "inferplan.errors": (
            "DivergentCost",
            "Infeasible",
            "InferplanError",
            "InvalidArgument",
            "InvalidFile",
            "InvalidNetwork",
            "InvalidProfile",
            "InvalidSystem",
            "NetworkHasCycle",
        ),
        "inferplan.network": (
            "LinearCost",
            "Link",
            "Network",
            "Node",
            "layered_dag",
            "load_network",
            "network_from_dict",
            "save_network",
            "tiered",
        ),
        "inferplan.profiles": (
            "Profile",
            "alexnet",
            "load_profile",
            "mlp",
            "profile_from_dict",
            "resnet50",
            "save_profile",
            "vgg16",
        ),
    },
)
