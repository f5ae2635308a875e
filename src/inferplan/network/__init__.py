"""Compute networks: the :class:`Network` value, network files and generators."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inferplan.lazy import export_lazily

if TYPE_CHECKING:
    from inferplan.network.costs import (
        CapacityCost,
        FunctionCost,
        LinearCost,
        ModuleCost,
        TieredCost,
    )
    from inferplan.network.generators import layered_dag, tiered
    from inferplan.network.io import cost_from_dict, load_network, network_from_dict, save_network
    from inferplan.network.network import Link, Network, Node

__all__ = [
    "CapacityCost",
    "FunctionCost",
    "LinearCost",
    "Link",
    "ModuleCost",
    "Network",
    "Node",
    "TieredCost",
    "cost_from_dict",
    "layered_dag",
    "load_network",
    "network_from_dict",
    "save_network",
    "tiered",
]

export_lazily(
    __name__,
    {
        "inferplan.network.costs": (
            "CapacityCost",
            "FunctionCost",
            "LinearCost",
            "ModuleCost",
            "TieredCost",
        ),
        "inferplan.network.generators": ("layered_dag", "tiered"),
        "inferplan.network.io": (
            "cost_from_dict",
            "load_network",
            "network_from_dict",
            "save_network",
        ),
        "inferplan.network.network": ("Link", "Network", "Node"),
    },
)
