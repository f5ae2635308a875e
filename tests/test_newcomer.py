"""What a newcomer trips on: messages that name the cause, files `validate` knows, units."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferplan.units import si
from tests.cli import app, runner

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _network(tmp_path: Path, edit: object) -> Path:
    data = json.loads((EXAMPLES / "network.json").read_text())
    edit(data)  # type: ignore[operator]
    path = tmp_path / "net.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("method", ["psg", "milp"])
def test_a_latency_below_the_propagation_delays_blames_them_not_caps(
    tmp_path: Path, method: str
) -> None:
    def delays(data: dict) -> None:  # type: ignore[type-arg]
        for k, link in enumerate(data["links"]):
            link["delay_s"] = 0.1 + 0.05 * k

    path = _network(tmp_path, delays)
    data = json.loads(path.read_text())
    graph = nx.DiGraph()
    graph.add_weighted_edges_from((e["source"], e["target"], e["delay_s"]) for e in data["links"])
    floor = nx.shortest_path_length(graph, "s", "t", weight="weight")
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "30",
                                 "--latency", str(floor / 2), "--method", method])  # fmt: skip
    assert result.exit_code == 3, result.stderr
    assert "capacity caps" not in result.stderr
    assert "propagation delays" in result.stderr and f"{floor:.6g} s" in result.stderr
    # with the bound above the floor, a plan exists: the floor is the cause, not a cap
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "30",
                                 "--latency", str(floor * 1.5), "--method", method])  # fmt: skip
    assert result.exit_code == 0, result.stderr


def test_a_latency_a_cap_forbids_still_blames_the_caps(tmp_path: Path) -> None:
    def capped(data: dict) -> None:  # type: ignore[type-arg]
        for element in data["nodes"] + data["links"]:
            element["cost"] = {"kind": "linear", "price": element.pop("price"), "max": 1.0}

    path = _network(tmp_path, capped)
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "0.5",
                                 "--latency", "1e-6"])  # fmt: skip
    assert result.exit_code == 3, result.stderr
    assert "capacity caps" in result.stderr and "propagation" not in result.stderr


@pytest.mark.parametrize(
    ("where", "typo", "meant"),
    [(("nodes", 1), "capcity", "capacity"), ((), "sorce", "source"),
     (("links", 0), "pirce", "price")],
)  # fmt: skip
def test_a_typo_is_named_with_the_nearest_field(
    tmp_path: Path, where: tuple[object, ...], typo: str, meant: str
) -> None:
    def misspell(data: dict) -> None:  # type: ignore[type-arg]
        here = data
        for part in where:
            here = here[part]
        here[typo] = here.pop(meant)

    path = _network(tmp_path, misspell)
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "30"])
    assert result.exit_code == 2
    assert f"{typo}: unknown field (did you mean '{meant}'?)" in result.stderr
    assert "missing field" not in result.stderr


def test_a_typo_in_a_services_file_is_named(tmp_path: Path) -> None:
    text = (EXAMPLES / "services.yaml").read_text().replace("throughput: 10", "throughpt: 10")
    (tmp_path / "s.yaml").write_text(text)
    result = runner.invoke(app, ["provision", str(EXAMPLES / "network.json"), "--services",
                                 str(tmp_path / "s.yaml")])  # fmt: skip
    assert result.exit_code == 2
    assert "throughpt: unknown field (did you mean 'throughput'?)" in result.stderr


def test_a_far_off_unknown_field_gets_no_suggestion(tmp_path: Path) -> None:
    path = _network(tmp_path, lambda d: d["nodes"][0].update(zzzz=1))
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "30"])
    assert result.exit_code == 2
    assert "zzzz: unknown field" in result.stderr and "did you mean" not in result.stderr


def test_validate_knows_the_channel_coinfer_fit_writes(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(str(1.0 + (k * 7919) % 13) for k in range(200)))
    out = tmp_path / "channel.yaml"
    fit = runner.invoke(app, ["coinfer-fit", str(trace), "--states", "3", "--out", str(out)])
    assert fit.exit_code == 0, fit.stderr
    result = runner.invoke(app, ["validate", str(out)])
    assert result.exit_code == 0, result.stderr
    assert "channel" in result.stdout and "markov" in result.stdout
    out.write_text(out.read_text().replace("markov", "markow"))
    result = runner.invoke(app, ["validate", str(out)])
    assert result.exit_code == 2 and "unknown channel kind 'markow'" in result.stderr


def test_validate_knows_python_model_files_without_running_them(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(EXAMPLES / "mymodels.py")])
    assert result.exit_code == 0, result.stderr
    assert "make_net, UNet" in result.stdout and "not imported" in result.stdout
    bad = tmp_path / "bad.py"
    bad.write_text("raise SystemExit(9)\nx = (\n")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2 and "not Python (line 2)" in result.stderr


def test_validate_profiles_an_onnx_model() -> None:
    pytest.importorskip("onnx")
    result = runner.invoke(app, ["validate", str(EXAMPLES / "model.onnx")])
    assert result.exit_code == 0, result.stderr
    assert "ONNX model" in result.stdout and "blocks" in result.stdout
    assert "UTF-8" not in result.stderr


@given(st.floats(1e-12, 1e15), st.sampled_from(["bit/s", "FLOP/s", "B", "bit"]))
def test_counted_units_never_get_a_prefix_below_one(value: float, unit: str) -> None:
    shown = si(value, unit)
    number, prefixed = shown.split(" ")
    assert prefixed[0] not in "mµn"
    scale = {"T": 1e12, "G": 1e9, "M": 1e6, "k": 1e3}.get(prefixed[0], 1.0)
    assert float(number) * scale == pytest.approx(value, rel=1e-3)


def test_seconds_keep_their_prefixes_below_one() -> None:
    assert si(0.0206, "s") == "20.6 ms"


def test_costs_are_printed_with_their_unit() -> None:
    result = runner.invoke(app, ["provision", str(EXAMPLES / "network.json"), "vgg16",
                                 "--throughput", "30"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.endswith("price units"), first


ROOT = EXAMPLES.parent


def test_the_readme_runs_no_model_of_the_test_suite() -> None:
    # `tests.runtime.models` imports only from the clone's root: a user's shell is elsewhere
    commands = [line for line in (ROOT / "README.md").read_text().splitlines()
                if line.startswith("$ inferplan")]  # fmt: skip
    assert commands
    assert not [line for line in commands if "tests." in line]


def test_docs_say_what_docs_figures_holds() -> None:
    figures = sorted((ROOT / "docs" / "figures").glob("*.png"))
    text = (ROOT / "docs" / "services.md").read_text()
    if figures:
        assert "the docs hold no figures" not in text


def test_no_stray_option_line_in_the_codesign_docs() -> None:
    lines = (ROOT / "docs" / "codesign.md").read_text().splitlines()
    assert not [line for line in lines if line.strip().startswith("--seed")]
