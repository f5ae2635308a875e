"""Models everywhere a profile goes: provision, throughput, frontier and services files take a
model (ONNX, file.py:FACTORY with --input-shape, ...) and profile it as ``inferplan profile``
does; errors about a profile's name say how to make one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli import app, invoke_json, runner

ROOT = Path(__file__).parents[2]
NETWORK = str(ROOT / "examples" / "network.json")
ONNX = str(ROOT / "examples" / "model.onnx")
MODELS = str(ROOT / "examples" / "mymodels.py")


@pytest.fixture(scope="module")
def onnx_profile(tmp_path_factory):
    pytest.importorskip("onnx")
    path = tmp_path_factory.mktemp("p") / "model.json"
    result = runner.invoke(app, ["profile", ONNX, "-o", str(path)])
    assert result.exit_code == 0, result.stderr
    return str(path)


@pytest.mark.parametrize("command", [
    ["provision", NETWORK, "{}", "--throughput", "2000"],
    ["provision", NETWORK, "{}", "--throughput", "2000", "--method", "pwf"],
    ["throughput", NETWORK, "{}"],
    ["frontier", NETWORK, "{}", "--points", "5"],
])  # fmt: skip
def test_a_model_plans_as_its_profile_file_does(command, onnx_profile):
    def run(profile: str) -> object:
        return invoke_json([a.format(profile) for a in command] + ["--json"])

    assert run(ONNX) == run(onnx_profile)


def test_a_pytorch_factory_with_input_shapes_plans_as_its_profile(tmp_path):
    pytest.importorskip("torch")
    profile = tmp_path / "make_net.json"
    made = runner.invoke(app, ["profile", f"{MODELS}:make_net", "--input-shape", "1,3,32,32",
                               "-o", str(profile)])  # fmt: skip
    assert made.exit_code == 0, made.stderr
    direct = invoke_json(["provision", NETWORK, f"{MODELS}:make_net", "--input-shape", "1,3,32,32",
                          "--throughput", "3000", "--json"])  # fmt: skip
    assert direct == invoke_json(["provision", NETWORK, str(profile), "--throughput", "3000",
                                  "--json"])  # fmt: skip
    # the shape counts: a larger input is a larger profile, a costlier plan
    larger = invoke_json(["provision", NETWORK, f"{MODELS}:make_net", "--input-shape",
                          "1,3,64,64", "--throughput", "3000", "--json"])  # fmt: skip
    assert larger["cost"] > direct["cost"]


def test_a_services_file_takes_models_relative_to_it(tmp_path, onnx_profile):
    shutil.copy(ONNX, tmp_path / "model.onnx")
    shutil.copy(onnx_profile, tmp_path / "model.json")
    entry = {"source": "s", "target": "t", "throughput": 500}
    for name, profile in (("by-model", "model.onnx"), ("by-file", "model.json")):
        services = [{"name": "a", "profile": profile, **entry},
                    {"name": "b", "profile": "alexnet", **entry, "throughput": 2}]  # fmt: skip
        (tmp_path / f"{name}.yaml").write_text(json.dumps({"services": services}))
    plans = [invoke_json(["provision", NETWORK, "--services", str(tmp_path / f"{n}.yaml"),
                          "--json"]) for n in ("by-model", "by-file")]  # fmt: skip
    assert plans[0] == plans[1]
    # options a model does not take are refused, naming the service's field
    (tmp_path / "bad.yaml").write_text(
        json.dumps({"services": [{"name": "a", "profile": "vgg16", "input_shape": "1,3", **entry}]})
    )
    bad = runner.invoke(app, ["provision", NETWORK, "--services", str(tmp_path / "bad.yaml")])
    assert bad.exit_code == 2
    assert (
        f"{tmp_path / 'bad.yaml'}: services[0] ('a').input_shape: profile 'vgg16': applies to ONNX"
        in bad.stderr
    )


def test_errors_about_a_profile_say_how_to_make_one(tmp_path):
    unknown = runner.invoke(app, ["provision", NETWORK, "vgg17", "--throughput", "30"])
    assert unknown.exit_code == 2 and unknown.stderr.count("\n") == 1
    assert "unknown built-in profile 'vgg17'" in unknown.stderr
    assert "inferplan profile MODEL -o FILE.json" in unknown.stderr
    assert "file.py:FACTORY with --input-shape" in unknown.stderr
    missing = runner.invoke(app, ["throughput", NETWORK, str(tmp_path / "mine.json")])
    assert missing.exit_code == 2
    assert "mine.json: file not found (inferplan profile MODEL -o FILE.json" in missing.stderr
    shaped = runner.invoke(app, ["frontier", NETWORK, "vgg16", "--input-shape", "1,3"])
    assert shaped.exit_code == 2
    assert shaped.stderr.startswith("error: --input-shape: applies to ONNX, PyTorch")
    listed = str(ROOT / "examples" / "services.yaml")
    services = runner.invoke(app, ["provision", NETWORK, "--services", listed,
                                   "--blocks", "depth=2"])  # fmt: skip
    assert services.exit_code == 2 and "--blocks is for one profile" in services.stderr
