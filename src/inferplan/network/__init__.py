"""Compute networks: the :class:`Network` value, network files and generators."""

from inferplan.network.generators import layered_dag, tiered
from inferplan.network.io import load_network, network_from_dict, save_network
from inferplan.network.network import Link, Network, Node

__all__ = [
    "Link",
    "Network",
    "Node",
    "layered_dag",
    "load_network",
    "network_from_dict",
    "save_network",
    "tiered",
]
