"""Library solves write nothing to standard output: HiGHS prints some debugging lines from C++
straight to descriptor 1 whatever its options say (``HighsMipSolverData::...``), so each
solver's call of HiGHS is made to do that here, and the process's descriptor 1 (``capfd``)
must stay empty while what Python prints around the solve still arrives."""

from __future__ import annotations

import os
import threading
from typing import Any

import inferplan
from inferplan.codesign.milp import cost
from inferplan.codesign.pipelines import layout_milp
from inferplan.codesign.pipelines.helix import LayoutInstance, LayoutNode, solve_layout
from inferplan.codesign.pipelines.helix_baselines import helix_milp
from inferplan.native import native_stdout_muted

LINE = b"HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();\n"


def _printing(solver: Any) -> Any:
    def solve(*args: Any, **kwargs: Any) -> Any:
        os.write(1, LINE)  # as HiGHS's C++ printf does: beneath sys.stdout
        return solver(*args, **kwargs)

    return solve


def test_a_milp_provision_prints_nothing(monkeypatch, capfd) -> None:
    monkeypatch.setattr(cost, "linprog", _printing(cost.linprog))
    net = inferplan.load_network("examples/network.json")
    print("before")
    plan = inferplan.provision(net, inferplan.alexnet(), throughput=1, method="milp")
    print("after")
    out = capfd.readouterr().out
    assert out == "before\nafter\n"
    assert plan.status == "optimal"


def test_a_joint_services_milp_prints_nothing(monkeypatch, capfd) -> None:
    from inferplan.codesign.services.joint import Service, provision_services

    monkeypatch.setattr(cost, "linprog", _printing(cost.linprog))
    net = inferplan.load_network("examples/network.json")
    services = [Service("a", inferplan.alexnet(), net.source, net.target, interval=1.0),
                Service("b", inferplan.vgg16(), net.source, net.target, interval=2.0)]  # fmt: skip
    plan = provision_services(net, services, method="milp")
    assert capfd.readouterr().out == ""
    assert plan.status == "optimal"


def test_the_layout_milps_print_nothing(monkeypatch, capfd) -> None:
    # the exact solver's interval models and Helix's per-node MILP share one HiGHS call
    calls: list[int] = []
    printing = _printing(layout_milp.milp)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return printing(*args, **kwargs)

    monkeypatch.setattr(layout_milp, "milp", counted)
    edges = {("source", "a"): 100.0, ("a", "sink"): 100.0}
    one = LayoutInstance(2, (LayoutNode("a", {1: 1.0, 2: 0.5}),), edges)
    solve_layout(one, time_limit_s=10)
    solved = len(calls)
    helix_milp(one, time_limit_s=10)
    assert solved >= 1 and len(calls) > solved  # both reached HiGHS, and printed there
    assert capfd.readouterr().out == ""


def test_nested_and_concurrent_mutes_restore_the_descriptor(capfd) -> None:
    ready, done = threading.Event(), threading.Event()

    def other() -> None:
        with native_stdout_muted():
            ready.set()
            done.wait(10)
            os.write(1, b"muted too\n")

    thread = threading.Thread(target=other)
    with native_stdout_muted():
        thread.start()
        ready.wait(10)
        with native_stdout_muted():
            os.write(1, b"muted\n")
    os.write(1, b"muted: the other still runs\n")
    done.set()
    thread.join(10)
    os.write(1, b"shown\n")
    assert capfd.readouterr().out == "shown\n"
