"""A plan cut at ideals of a layer graph names them ``ideals``; ``partition`` is a block count
wherever it appears (``None`` for such a plan), in the API, the JSON, plan files and tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import inferplan
from inferplan.codesign.planfile import check_plan, load_plan, plan_from_dict
from inferplan.errors import InvalidArgument
from inferplan.profiles.ideals import graph_cuts

from ..cli import app, invoke_json, runner

EXAMPLES = Path(__file__).parents[2] / "examples"
NETWORK, TWO = EXAMPLES / "network.json", EXAMPLES / "two-branch.yaml"


def _graph_plan() -> inferplan.Plan:
    return inferplan.provision(inferplan.load_network(NETWORK), inferplan.load_profile(TWO),
                               throughput=20, cuts="graph")  # fmt: skip


def test_a_graph_plan_has_ideals_and_no_partition_and_a_chain_plan_the_other_way() -> None:
    plan = _graph_plan()
    assert plan.cuts == "graph" and plan.partition is None
    assert plan.ideals is not None and plan.cut_indices == plan.ideals
    cuts = graph_cuts(inferplan.load_profile(TWO).graph)
    # each ideal number names the layers done up to that node, as the stages' layers say
    done: set[str] = set()
    for k, names in zip(plan.ideals, plan.layers, strict=True):
        done |= set(names)
        assert set(cuts.units_between(0, k)) == done
    assert plan.ideals[-1] == cuts.last
    out = plan.to_dict()
    assert out["partition"] is None and out["ideals"] == list(plan.ideals)
    chain = inferplan.provision(inferplan.load_network(NETWORK), inferplan.load_profile(TWO),
                                throughput=20, cuts="chain")  # fmt: skip
    assert chain.ideals is None and chain.partition is not None
    assert chain.partition[-1] == inferplan.load_profile(TWO).n_blocks
    assert chain.to_dict()["ideals"] is None


def test_throughput_and_the_frontier_of_a_graph_say_ideals() -> None:
    out = invoke_json(["throughput", str(NETWORK), str(TWO), "--json"])
    assert out["cuts"] == "graph" and out["partition"] is None and out["ideals"][0] == 0
    front = invoke_json(["frontier", str(NETWORK), str(TWO), "--from", "10", "--to", "20",
                         "--points", "3", "--json"])  # fmt: skip
    for point in front["points"]:
        assert point["partition"] is None and point["ideals"][-1] == 10


def test_plan_files_of_graph_plans_round_trip_and_old_files_are_read(tmp_path: Path) -> None:
    net, two = inferplan.load_network(NETWORK), inferplan.load_profile(TWO)
    plan = _graph_plan()
    again = plan_from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan
    check_plan(net, two, again)
    old = plan.to_dict()  # written before plans had ideals: ideal numbers in partition
    old["partition"] = old.pop("ideals")
    read = plan_from_dict(old)
    assert read.ideals == plan.ideals and read.partition is None
    check_plan(net, two, read)
    new = tmp_path / "plan.json"
    new.write_text(json.dumps(plan.to_dict()))
    assert load_plan(new) == plan
    result = runner.invoke(app, ["validate", str(new)])
    assert result.exit_code == 0 and f"ideals {','.join(map(str, plan.ideals))}" in result.stdout


@pytest.mark.parametrize(
    ("change", "field", "said"),
    [
        ({"partition": [0, 0, 1, 10]}, "partition", "an ideal is no block count"),
        ({"cuts": "chain"}, "ideals", "a plan cut between blocks"),
        ({"ideals": None}, "ideals", "missing"),
    ],
)
def test_a_plan_file_that_mixes_the_fields_is_refused_in_one_line(
    tmp_path: Path, change: dict[str, object], field: str, said: str
) -> None:
    doc = {**_graph_plan().to_dict(), **change}
    with pytest.raises(InvalidArgument, match=rf"{field}: .*{said}"):
        plan_from_dict(doc)
    bad = tmp_path / "plan.json"
    bad.write_text(json.dumps(doc))
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and f"{field}: " in result.stderr


def test_a_graph_plan_drives_dot_and_the_report(tmp_path: Path) -> None:
    dot, page = tmp_path / "plan.dot", tmp_path / "plan.html"
    made = runner.invoke(app, ["provision", str(NETWORK), str(TWO), "--throughput", "20",
                               "--dot", str(dot), "--report", str(page)])  # fmt: skip
    assert made.exit_code == 0, made.stderr
    assert "stem" in dot.read_text() and "stem" in page.read_text()


def test_a_joint_plan_of_graph_services_says_ideals(tmp_path: Path) -> None:
    services = tmp_path / "services.yaml"
    services.write_text(
        f"services:\n  - {{name: two, profile: {TWO}, source: s, target: t, throughput: 5}}\n"
    )
    out = invoke_json(["provision", str(NETWORK), "--services", str(services), "--json"])
    (one,) = out["services"]
    assert one["cuts"] == "graph" and one["partition"] is None and one["ideals"][-1] == 10
    table = runner.invoke(app, ["provision", str(NETWORK), "--services", str(services)])
    assert table.exit_code == 0 and "ideals " in table.stdout


def test_what_the_caps_allow_a_graph_says_in_ideals() -> None:
    caps = inferplan.load_network(EXAMPLES / "network-caps.json")
    with pytest.raises(inferplan.Infeasible) as err:
        inferplan.provision(caps, inferplan.load_profile(TWO), throughput=1000)
    best = err.value.details["at_caps"]
    assert best["cuts"] == "graph" and best["partition"] is None and best["ideals"][-1] == 10
    result = runner.invoke(app, ["provision", str(EXAMPLES / "network-caps.json"), str(TWO),
                                 "--throughput", "1000"])  # fmt: skip
    assert result.exit_code == 3
    shown = result.stdout + result.stderr
    assert "ideal (layers done)" in shown
    assert f"ideal {best['ideals'][-2]}" in shown
