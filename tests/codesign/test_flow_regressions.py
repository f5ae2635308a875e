"""A flow plan below the one path on the same network: HiGHS at 1e-9 (or 1e-8) tolerances
without presolve stopped at a layout of the two weak ends (1.31 inferences/s) and called it
optimal, where the one path ``s, a, b0, c, t`` carries 6.14 and a flow 6.87. Found by
benchmarks/flow_runs.py; the flow MILP now runs HiGHS at 1e-7 (``flow.TOLERANCE``)."""

from __future__ import annotations

import pytest

import inferplan
from inferplan import Link, Network, Node, Profile
from inferplan.codesign import compile_instance
from inferplan.codesign.pipelines.flow import flow_throughput

NODES = (
    Node('s', 35779.99698865534, 1.0),
    Node('t', 50303.28319348866, 1.0),
    Node('a', 4430329.752844896, 1.0, memory=50385.651480573586),
    Node('c', 6847611.840354406, 1.0, memory=50385.651480573586),
    Node('b0', 3457273.821466082, 1.0, memory=58404.97143041367),
    Node('b1', 5050265.020506202, 1.0, memory=48418.79907649515),
    Node('b2', 6459216.575454617, 1.0, memory=40869.54919803854),
)
LINKS = (
    Link('s', 'a', 325694.62616285536, 1.0),
    Link('c', 't', 275257.3678135437, 1.0),
    Link('a', 'b0', 142646.13481156202, 1.0),
    Link('a', 'b1', 193048.55687911183, 1.0),
    Link('a', 'b2', 122798.47524591578, 1.0),
    Link('b0', 'c', 162865.6586290935, 1.0),
    Link('b1', 'c', 103875.23363513067, 1.0),
    Link('b2', 'c', 142872.26075152672, 1.0),
)
# an MLP of 8 blocks of Linear(64, 64) and a ReLU
PROFILE = Profile("mlp", flops=(8192.0,) * 8, activation_bits=(2048.0,) * 9, params=(4160,) * 8)


def test_the_flow_is_at_least_the_one_path():
    net = Network(nodes=NODES, links=LINKS, source="s", target="t")
    one = inferplan.throughput(net, PROFILE).throughput
    flow = flow_throughput(compile_instance(net, PROFILE, require_acyclic=False, cuts="chain"))
    assert one == pytest.approx(6.1405, rel=1e-3)
    assert flow.throughput >= one * (1 - 1e-9)
