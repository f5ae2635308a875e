"""Sweep spec files, their one-line errors, and the ``sweep`` / ``reproduce`` / ``--plot`` CLI."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import inferplan
from inferplan.errors import InferplanError
from inferplan.experiments import load_spec
from tests.cli import app, runner

ROOT = Path(__file__).parents[2]


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


GOOD = "study: provisioning\ngrid:\n  dnn: vgg16\n  alpha: [0.5, 0.8]\n"


def test_the_examples_load():
    grid = load_spec(ROOT / "examples" / "sweep.yaml")
    assert len(grid.points) == 6 * 2 * 8
    assert grid.options == {"methods": ["psg", "pfp", "pwf", "pwf-keep"]}
    sample = load_spec(ROOT / "examples" / "sweep-sample.yaml")
    assert len(sample.points) == 40
    assert all(0.1 <= p.params["alpha"] < 0.9 for p in sample.points)


def test_grid_axes_forms(tmp_path):
    sweep = load_spec(_spec(tmp_path, "study: provisioning\ngrid:\n  dnn: vgg16\n"
                                      "  topology: {range: [2, 8, 3]}\n"
                                      "  alpha: {linspace: [0.5, 1.0, 3]}\n"))  # fmt: skip
    assert [(p.params["topology"], p.params["alpha"]) for p in sweep.points] == [
        (2, 0.5), (2, 0.75), (2, 1.0), (5, 0.5), (5, 0.75), (5, 1.0)
    ]  # fmt: skip
    # The study's default: the seed depends on network and topology only.
    assert len({p.seed for p in sweep.points}) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("grid: {x: [1]}\n", "study: missing field"),
        (
            "study: nope\ngrid: {x: [1]}\n",
            "study: unknown study 'nope' (known: provisioning, coinference, services, latency, or "
            "package.module:function)",
        ),
        ("study: provisioning\n", "grid: give exactly one of grid or sample"),
        (
            GOOD + "sample: {size: 2, parameters: {alpha: 0.5}}\n",
            "grid: give exactly one of grid or sample",
        ),
        (GOOD + "colour: red\n", "colour: unknown field"),
        (
            "study: provisioning\ngrid:\n  dnn: vgg16\n  alpha: [0.5, -1]\n",
            "grid.alpha: Input should be greater than 0, got -1",
        ),
        (
            "study: provisioning\ngrid:\n  dnn: vgg16\n  alpha: 0.5\n  beta: 3\n",
            "grid.beta: unknown parameter",
        ),
        (
            "study: provisioning\ngrid:\n  dnn: vgg17\n  alpha: 0.5\n",
            "grid.dnn: unknown built-in profile 'vgg17'",
        ),
        (
            "study: provisioning\ngrid:\n  dnn: vgg16\n",
            "grid: give exactly one of alpha, interval or throughput",
        ),
        (
            "study: provisioning\ngrid:\n  dnn: vgg16\n  topology: {range: [0, 1.5]}\n"
            "  alpha: 0.5\n",
            "grid.topology.range: must be integers with a non-zero step, got [0, 1.5]",
        ),
        (
            "study: provisioning\ngrid:\n  dnn: vgg16\n  alpha: {steps: 3}\n",
            "grid.alpha: must be a value, a list or one of {range, linspace: ...}, "
            "got {'steps': 3}",
        ),
        (GOOD + "options: {methods: [psg, magic]}\n", "options.methods: unknown method 'magic'"),
        (
            "study: provisioning\nsample:\n  size: 3\n  parameters:\n    dnn: vgg16\n"
            "    alpha: {uniform: [0.9, 0.1]}\n",
            "sample.parameters.alpha.uniform: low must be below high, got [0.9, 0.1]",
        ),
        (
            "study: provisioning\nseed: -1\n" + GOOD.split("\n", 1)[1],
            "seed: Input should be greater than or equal to 0, got -1",
        ),
        ("study: os:nothing\ngrid: {x: [1]}\n", "study: module 'os' has no function 'nothing'"),
        ("study: [unclosed\n", "malformed YAML"),
        (GOOD + "seed_from: [topolgy]\n", "seed_from[0]: 'topolgy' is not a parameter"),
        ("- a\n- b\n", "the top level must be a mapping of fields, got a list"),
    ],
)
def test_spec_errors_name_the_file_and_the_field(tmp_path, text, message):
    path = _spec(tmp_path, text)
    with pytest.raises(InferplanError) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{path}: {message}"), str(info.value)
    result = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"error: {path}: ")


def test_sweep_command_writes_results_and_resumes(tmp_path):
    spec = _spec(
        tmp_path,
        "study: provisioning\nseed: 3\noptions: {methods: [psg, pfp]}\n"
        "grid:\n  topology: [0, 1]\n  dnn: resnet50\n  alpha: [0.3, 0.7]\n",
    )
    out = tmp_path / "out"
    first = runner.invoke(app, ["sweep", str(spec), "--out", str(out), "--jobs", "1", "-q"])
    assert first.exit_code == 0, first.output
    assert "4 points (4 run, 0 resumed)" in first.stdout
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["topology"], r["alpha"], r["method"]) for r in rows] == [
        (t, a, m) for t in ("0", "1") for a in ("0.3", "0.7") for m in ("psg", "pfp")
    ]
    second = runner.invoke(app, ["sweep", str(spec), "--out", str(out), "--json"])
    assert second.exit_code == 0
    assert '"ran": 0, "seconds"' in second.stdout and '"resumed": 4' in second.stdout


def test_reproduce_command_writes_every_file(tmp_path):
    out = tmp_path / "repro"
    result = runner.invoke(app, ["reproduce", "codesign", "--out", str(out), "--topologies", "1",
                                 "--jobs", "1", "--quiet"])  # fmt: skip
    assert result.exit_code == 0, result.output
    names = {"results.csv", "summary.csv", "report.md", "figure.png", "figure.pdf"}
    assert names <= {p.name for p in out.iterdir()}


def test_reproduce_rejects_a_bad_cluster_address(tmp_path):
    pytest.importorskip("distributed")
    command = ["reproduce", "codesign", "--out", str(tmp_path), "--topologies", "1"]
    result = runner.invoke(app, [*command, "--cluster", "tcp://127.0.0.1:9"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --cluster: cannot reach a Dask scheduler at")


def test_provision_plot_writes_a_picture(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib import image

    picture = tmp_path / "plan.png"
    result = runner.invoke(app, ["provision", str(ROOT / "examples" / "network.json"), "vgg16",
                                 "--throughput", "40", "--plot", str(picture)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert image.imread(picture).std() > 0


def test_plot_plan_draws_pdf_and_lays_tiers_out_left_to_right(tmp_path):
    pytest.importorskip("matplotlib")
    from inferplan.plots import plot_plan
    from inferplan.plots.plan import layered_positions

    net = inferplan.tiered(seed=3)
    plan = inferplan.provision(net, inferplan.resnet50(), throughput=40.0, method="pwf")
    plot_plan(net, plan, [tmp_path / "plan.pdf", tmp_path / "plan.svg"])
    assert (tmp_path / "plan.pdf").read_bytes()[:5] == b"%PDF-"
    assert b"<svg" in (tmp_path / "plan.svg").read_bytes()[:400]
    pos = layered_positions(net)
    column = {v: x for v, (x, _) in pos.items()}
    assert column["s"] == 0 and column["t"] == max(column.values())
    for link in net.links:  # every link points right
        assert column[link.source] < column[link.target]
