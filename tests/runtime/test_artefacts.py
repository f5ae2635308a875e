"""``inferplan split``: a plan's stages as torch.export programs that, loaded in a fresh
process without the model's code, chain to the unsplit model's outputs."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from inferplan.runtime.measure import build_model  # noqa: E402
from tests.cli import app, runner  # noqa: E402

UNET = "tests.runtime.models:unet"
MLP = "tests.runtime.models:mlp"

# Loads the artefacts with torch alone: python -I ignores PYTHONPATH and the current folder,
# so the model's code (inferplan's tests) cannot be imported.
CHAIN = textwrap.dedent("""
    import importlib.util, json, sys, torch
    folder = sys.argv[1]
    assert importlib.util.find_spec("tests") is None, "the model's code is importable"
    manifest = json.load(open(folder + "/manifest.json"))
    values = tuple(torch.load(folder + "/inputs.pt", weights_only=True))
    for k, stage in enumerate(manifest["stages"]):
        took = [(list(v.shape), str(v.dtype).removeprefix("torch.")) for v in values]
        assert took == [(t["shape"], t["dtype"]) for t in stage["inputs"]], (k, took)
        values = torch.export.load(folder + "/" + stage["file"]).module()(*values)
        assert isinstance(values, tuple), type(values)
        gave = [(list(v.shape), str(v.dtype).removeprefix("torch.")) for v in values]
        assert gave == [(t["shape"], t["dtype"]) for t in stage["outputs"]], (k, gave)
    torch.save(list(values), folder + "/outputs.pt")
""")


def _split(tmp_path, model, shape, plan, *extra):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"interval": 1.0, **plan}))
    out = tmp_path / "stages"
    result = runner.invoke(app, ["split", model, "--plan", str(plan_file), "-o", str(out),
                                 "--input-shape", shape, *extra, "--json"])  # fmt: skip
    return result, out


def _chain(folder, inputs):
    torch.save(list(inputs), folder / "inputs.pt")
    done = subprocess.run([sys.executable, "-I", "-c", CHAIN, str(folder)], cwd=folder,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return torch.load(folder / "outputs.pt", weights_only=True)


def test_the_stages_chain_to_the_unsplit_model_in_a_fresh_process(tmp_path):
    # A forwarding node in the middle, and a cut carrying two tensors (the U-Net's skip).
    plan = {"path": ["s", "relay", "t"], "partition": [2, 2, 4]}
    result, folder = _split(tmp_path, UNET, "1,3,16,16", plan, "--seed", "3")
    assert result.exit_code == 0, result.stderr
    manifest = json.loads(result.stdout)
    assert manifest == json.loads((folder / "manifest.json").read_text())
    stages = manifest["stages"]
    assert [s["node"] for s in stages] == plan["path"]
    assert [s["blocks"] for s in stages] == [[0, 2], [2, 2], [2, 4]]
    assert [s["next"] for s in stages] == [{"node": "relay", "link": "s->relay"},
                                           {"node": "t", "link": "relay->t"}, None]  # fmt: skip
    assert [t["shape"] for t in stages[0]["inputs"]] == [[1, 3, 16, 16]]
    assert len(stages[0]["outputs"]) == 2  # both sides of the skip connection travel
    for a, b in itertools.pairwise(stages):
        assert a["outputs"] == b["inputs"]
    inputs = (torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(5)),)
    (got,) = _chain(folder, inputs)
    with torch.no_grad():
        want = build_model(UNET, seed=3)(*inputs)
        other = build_model(UNET, seed=4)(*inputs)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(got, other)  # the weights are the seeded ones, not any


def test_a_state_dict_replaces_the_seeded_weights(tmp_path):
    trained = build_model(MLP, seed=11)
    weights = tmp_path / "weights.pt"
    torch.save(trained.state_dict(), weights)
    plan = {"path": ["s", "t"], "partition": [1, 4]}
    result, folder = _split(tmp_path, MLP, "1,16", plan, "--weights", str(weights))
    assert result.exit_code == 0, result.stderr
    inputs = (torch.randn(1, 16, generator=torch.Generator().manual_seed(2)),)
    (got,) = _chain(folder, inputs)
    with torch.no_grad():
        torch.testing.assert_close(got, trained(*inputs), rtol=1e-5, atol=1e-6)
        assert not torch.allclose(got, build_model(MLP, seed=0)(*inputs))


@pytest.mark.parametrize(
    ("plan", "weights", "message"),
    [
        ({"path": ["s", "t"], "partition": [1, 3]}, None, "the plan covers 3 blocks, the model "),
        ({"path": ["s", "t"], "partition": [1, 4]}, "unet", "not this model's weights"),
    ],
)
def test_a_plan_or_weights_of_another_model_is_one_error_line(tmp_path, plan, weights, message):
    extra = []
    if weights is not None:
        torch.save(build_model(f"tests.runtime.models:{weights}").state_dict(), tmp_path / "w.pt")
        extra = ["--weights", str(tmp_path / "w.pt")]
    result, folder = _split(tmp_path, MLP, "1,16", plan, *extra)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr
    assert not (folder / "manifest.json").exists()
