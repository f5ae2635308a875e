"""The services study: a tiny version of examples/sweep-services.yaml through the CLI, its
rows checked against the planners' definitions, and its table and figure."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

import inferplan
from inferplan.codesign.services.joint import JointProblem, Service
from inferplan.experiments import load_spec
from inferplan.experiments.services import services_report
from tests.cli import app, runner

ROOT = Path(__file__).parents[2]


def test_the_example_spec_loads():
    sweep = load_spec(ROOT / "examples" / "sweep-services.yaml")
    assert len(sweep.points) == 8 * 3 * 2
    assert {p.params["services"] for p in sweep.points} == {2, 3, 4}


def test_a_tiny_study_end_to_end(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("study: services\nseed: 3\nseed_from: [network, topology, services]\n"
                    "grid:\n  topology: {range: [0, 2]}\n  services: [2]\n"
                    "  alpha: [0.5]\n")  # fmt: skip
    out = tmp_path / "out"
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(out), "--jobs", "1",
                                 "--quiet"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2
    for row in rows:
        assert row["joint_status"] == "optimal"
        joint, alone = float(row["joint_cost"]), float(row["alone_cost"])
        assert joint <= alone * (1 + 1e-6)
        assert float(row["saving"]) == pytest.approx(1 - joint / alone if alone > 0 else 0.0)
        assert (
            float(row["fast_bound"]) <= joint * (1 + 1e-6) <= float(row["fast_cost"]) * (1 + 2e-6)
        )
        # the row is recomputable alone: the network from the seed, the profiles by name
        net = inferplan.tiered(seed=int(row["seed"]))
        names = row["dnns"].split("+")
        services = []
        for k, name in enumerate(names):
            profile = inferplan.load_profile(name)
            t_star = inferplan.throughput(net, profile).interval
            services.append(Service(f"{name}-{k}", profile, "s", "t", 0.5 * t_star))
        alone_plans = [inferplan.provision(net, s.profile, interval=s.interval) for s in services]
        assert float(row["alone_sum"]) == pytest.approx(sum(p.cost for p in alone_plans))
        problem = JointProblem(net, services, require_acyclic=True)
        index = [{v: k for k, v in enumerate(inst.node_ids)} for inst in problem.instances]
        choices = [(tuple(index[s][v] for v in p.path), p.partition)
                   for s, p in enumerate(alone_plans)]  # fmt: skip
        assert float(row["alone_cost"]) == pytest.approx(problem.cost(choices))
    table = services_report(out)
    assert [(t["services"], t["alpha"], t["points"]) for t in table] == [(2, 0.5, 2)]
    assert not math.isnan(table[0]["saving_median"])
    assert (out / "services.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "services-table.md").read_text().startswith("| services |")
