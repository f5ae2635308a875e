"""The layer graph at every granularity (``--granularity``): its layers and ideals on models
built here, counted by hand; the same graph from torch.export and torch.fx; finer layers never
a worse interval; the option on the command line."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
nn = torch.nn

import inferplan  # noqa: E402
from inferplan.errors import InvalidProfile  # noqa: E402
from inferplan.profiles.cuts import parse_granularity  # noqa: E402
from inferplan.profiles.from_torch import profile_module  # noqa: E402
from inferplan.profiles.ideals import count_ideals  # noqa: E402
from tests.cli import app, runner  # noqa: E402

B, M = 3, 2  # branches, Linear layers per branch


class Branches(nn.Module):
    """A stem, ``B`` parallel branches of ``M`` Linear layers each (a ReLU function after
    each), their concatenation, a head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.branches = nn.ModuleList(
            nn.Sequential(*[nn.Linear(4, 4) for _ in range(M)]) for _ in range(B)
        )
        self.head = nn.Linear(4 * B, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        return self.head(torch.cat([torch.relu(b(h)) for b in self.branches], dim=1))


def _graph(granularity, blocks=None, tracer="export"):
    with torch.device("meta"):
        model = Branches()
    traced = profile_module(model, [(1, 4)], blocks=blocks, granularity=granularity,
                            tracer=tracer)  # fmt: skip
    return traced.profile


# The ideals of stem -> B branches of L layers -> join -> head: the empty set, then the stem
# with any prefix of each branch, then the join, then the head: (L + 1)**B + 3.
CASES = [
    # stem, all branches (one top-level module, the concatenation of its outputs with it), head
    ("blocks", None, 4),
    (2, None, 2**B + 3),  # a layer per branch
    ("modules", None, (M + 1) ** B + 3),  # a layer per Linear; each ReLU with its Linear
    ("ops", None, (M + 2) ** B + 3),  # the ReLUs too
    ("blocks", 2, 2**B + 3),  # blocks a level down: one per branch
    (1, 2, 4),  # layers coarser than the blocks: the branches as one
]


@pytest.mark.parametrize(("granularity", "blocks", "ideals"), CASES)
def test_ideals_at_each_granularity_count_as_by_hand(granularity, blocks, ideals):
    profile = _graph(granularity, blocks)
    assert count_ideals(profile.graph) == ideals
    assert sum(profile.graph.flops) == pytest.approx(profile.total_flops)


@pytest.mark.parametrize("granularity", ["blocks", "modules", "ops", 1, 2])
def test_torch_export_and_fx_give_the_same_layer_graph(granularity):
    from tests.runtime import models

    with torch.device("meta"):
        built = [(models.resnet(), (1, 3, 16, 16)), (models.inception(), (1, 3, 8, 8))]
    for model, shape in built:  # the ResNet's shortcuts are nn.Identity calls
        graphs = [profile_module(model, [shape], tracer=tracer,
                                 granularity=granularity).profile.graph
                  for tracer in ("export", "fx")]  # fmt: skip
        assert graphs[0] == graphs[1]


FINEST_FIRST = ["ops", "modules", 2, 1]


@settings(max_examples=12, deadline=None)
@given(capacities=st.lists(st.floats(1e2, 1e4), min_size=3, max_size=3),
       bandwidths=st.lists(st.floats(1e2, 1e5), min_size=2, max_size=2))  # fmt: skip
def test_finer_layers_never_give_a_worse_interval(capacities, bandwidths):
    nodes = [inferplan.Node(v, c, 1e-6) for v, c in zip("sat", capacities, strict=True)]
    links = [inferplan.Link(u, v, b, 1e-5) for (u, v), b in zip(["sa", "at"], bandwidths,
                                                                 strict=True)]  # fmt: skip
    net = inferplan.Network(nodes, links, source="s", target="t")
    intervals = [inferplan.throughput(net, PROFILES[g], cuts="graph").interval
                 for g in FINEST_FIRST]  # fmt: skip
    for fine, coarse in itertools.pairwise(intervals):
        assert fine <= coarse * (1 + 1e-12)


PROFILES = {g: _graph(g) for g in FINEST_FIRST}


def test_granularity_values_are_checked():
    assert [parse_granularity(v) for v in (None, "modules", "depth=2", "3")] == [
        "blocks", "modules", 2, 3]  # fmt: skip
    for bad in ("depth=0", "layers", "-1"):
        with pytest.raises(InvalidProfile, match="granularity"):
            parse_granularity(bad)


def test_the_command_line_takes_the_granularity_where_it_profiles(tmp_path):
    model = ["tests.runtime.models:inception", "--input-shape", "1,3,8,8"]
    result = runner.invoke(app, ["profile", *model, "--granularity", "modules", "--graph"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("inception: 16 layers, 22 edges, 75 ideals")
    coarse = runner.invoke(app, ["profile", *model, "--json"])
    fine = runner.invoke(app, ["profile", *model, "--granularity", "modules", "--json"])
    assert len(json.loads(coarse.stdout)["graph"]["layers"]) == 4  # stem, m1, m2, head
    assert len(json.loads(fine.stdout)["graph"]["layers"]) == 16
    net = str(tmp_path / "net.json")
    (tmp_path / "net.json").write_text(json.dumps({
        "source": "s", "target": "t",
        "nodes": [{"id": v, "capacity": 2e7, "price": 1e-6} for v in "sat"],
        "links": [{"source": u, "target": v, "capacity": 8e6, "price": 1e-5}
                  for u, v in ("sa", "at")]}))  # fmt: skip
    plan = runner.invoke(app, ["provision", net, *model, "--granularity", "modules",
                               "--interval", "0.04", "--json"])  # fmt: skip
    assert plan.exit_code == 0, plan.stderr
    layers = json.loads(plan.stdout)["layers"]
    assert sorted(v for names in layers for v in names) == sorted(
        json.loads(fine.stdout)["graph"]["layers"][k]["id"] for k in range(16)
    )
    bad = runner.invoke(app, ["profile", *model, "--granularity", "fine"])
    assert bad.exit_code == 2
    assert bad.stderr.strip() == ("error: --granularity: must be blocks, modules, ops or "
                                  "depth=K (K >= 1), got 'fine'")  # fmt: skip
    refused = runner.invoke(app, ["profile", "vgg16", "--granularity", "ops"])
    assert refused.exit_code == 2 and "--granularity" in refused.stderr


def test_the_graph_table_shows_a_layer_that_is_read_and_returned():
    # the two-branch model returns its stem's output beside the head's: an edge to the output
    result = runner.invoke(app, ["profile", "tests.runtime.models:two_branch", "--input-shape",
                                 "2,8", "--graph"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    rows = {line.split("│")[1].strip(): line.split("│")[5].strip()
            for line in result.stdout.splitlines() if line.count("│") > 5}  # fmt: skip
    assert rows["stem (output)"] == "input" and rows["cat"] == "a2, b1"
