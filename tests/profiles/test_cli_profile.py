"""``inferplan profile``: built-ins, ONNX files and PyTorch factories feed the planners."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferplan.profiles import vgg16
from tests.cli import app, runner

ROOT = Path(__file__).parents[2]

MODELS = """
import torch
from torch import nn


class Merge(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 8, 1)

    def forward(self, p, q):
        return self.conv(torch.cat([p, q], dim=1))


class Skip(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)
        self.merge = Merge()
        self.head = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        y = self.a(x)
        return self.head(torch.flatten(self.merge(self.b(y), y), 1))


def broken():
    raise ValueError("no weights here")
"""


def _run(args):
    return runner.invoke(app, args)


def test_builtin_json_is_the_profile_file_format():
    result = _run(["profile", "vgg16", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == vgg16().to_dict()


@pytest.fixture
def models(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "mymodels.py").write_text(MODELS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_torch_factory_profile_feeds_provision_and_coinfer(models):
    out = models / "skip.json"
    result = _run(["profile", "mymodels:Skip", "--input-shape", "1,3,8,8", "-o", str(out),
                   "--json"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    profile = json.loads(result.stdout)
    assert json.loads(out.read_text()) == profile
    assert profile["blocks"] == ["a", "b", "merge", "head"]
    # After b, the skip from a crosses too: 2 tensors of 8x8x8 float32.
    assert profile["activation_bits"] == [32.0 * n for n in (3 * 64, 8 * 64, 2 * 8 * 64, 8 * 64,
                                                             10)]  # fmt: skip
    plan = _run(["provision", str(ROOT / "examples" / "network.json"), str(out),
                 "--throughput", "10", "--json"])  # fmt: skip
    assert plan.exit_code == 0, plan.stderr
    system = models / "system.yaml"
    text = (ROOT / "examples" / "system.yaml").read_text().replace("profile: alexnet",
                                                                   f"profile: {out}")  # fmt: skip
    system.write_text(text)
    coinfer = _run(["coinfer", str(system), "--json"])
    assert coinfer.exit_code == 0, coinfer.stderr


def test_cut_report(models):
    result = _run(["profile", "mymodels:Skip", "--input-shape", "1x3x8x8", "--blocks",
                   "depth=1", "--cuts", "--json"])  # fmt: skip
    report = json.loads(result.stdout)
    assert [sorted(t["name"] for t in c["tensors"]) for c in report["cuts"]] == [
        ["x"],
        ["conv2d"],  # the exported graph's names: a's output
        ["conv2d", "conv2d_1"],  # after b, a's output crosses too
        ["flatten"],
        ["linear"],
    ]
    table = _run(["profile", "mymodels:Skip", "--input-shape", "1,3,8,8", "--cuts"])
    assert "candidate cuts" in table.stdout and "kept" in table.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mymodels:Skip"], "give the shape of each input"),
        (["mymodels:Skip", "--input-shape", "1,3,a"], "input shape must be positive integers"),
        (["mymodels:Skip", "--input-shape", "1,3,²,8"], "input shape must be positive integers"),
        (
            ["mymodels:Skip", "--input-shape", "99999999999999999999,3,8,8"],
            "--input-shape: input shape 99999999999999999999x3x8x8 has more elements than a tensor",
        ),
        (
            ["mymodels:Skip", "--input-shape", "4294967296,4294967296,3,8"],
            "has more elements than a tensor can hold",
        ),
        (["mymodels:Skip", "--input-shape", "1,4,8,8"], "does not run on input shape 1x4x8x8"),
        (
            ["mymodels:Skip", "--input-shape", "1,3,8,8", "--blocks", "a,zz"],
            "no operation belongs to module(s) 'zz'",
        ),
        (["mymodels:nothing", "--input-shape", "1,3,8,8"], "has no attribute 'nothing'"),
        (["mymodels:broken", "--input-shape", "1"], "ValueError: no weights here"),
        (["missing_module_q:make", "--input-shape", "1"], "cannot import 'missing_module_q'"),
        (
            ["vgg16", "--blocks", "depth=2"],
            "--blocks: applies to ONNX, PyTorch and transformers models only",
        ),
        (["nope.onnx"], "nope.onnx: file not found"),
        (["nope.onnx", "--dtype", "float16"], "--dtype: ONNX models carry their own dtypes"),
    ],
)
def test_bad_input_is_one_line_exit_2(request, args, message):
    if ":" in args[0]:
        request.getfixturevalue("models")
    if args[0].endswith(".onnx"):
        pytest.importorskip("onnx")
    result = _run(["profile", *args])
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_onnx_file_with_warning(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    nodes = [helper.make_node("MatMul", ["x", "x"], ["h"], name="mm"),
             helper.make_node("Det", ["h"], ["y"], name="det")]  # fmt: skip
    path = tmp_path / "det.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y])), path)
    result = _run(["profile", str(path), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["flops"] == [54.0]
    assert result.stderr == "warning: no FLOP formula for Det (1 node): their work is not counted\n"
    full = _run(["profile", str(path), "--flops", "all", "--json"])
    assert json.loads(full.stdout)["flops"] == [54.0]


MARKER = """
import pathlib
pathlib.Path("imported.txt").write_text("ran")


def make():
    raise ValueError("factory ran")
"""


@pytest.mark.parametrize("name", ["marker :make", "./marker:make", "marker:make()", "marker:"])
def test_names_not_of_the_factory_form_are_never_imported(tmp_path, monkeypatch, name):
    (tmp_path / "marker.py").write_text(MARKER)
    monkeypatch.chdir(tmp_path)
    result = _run(["profile", name])
    assert result.exit_code == 2 and "unknown built-in profile" in result.stderr
    assert not (tmp_path / "imported.txt").exists()


def test_a_factory_name_imports_from_the_current_directory(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "marker.py").write_text(MARKER)
    monkeypatch.chdir(tmp_path)
    result = _run(["profile", "marker:make", "--input-shape", "1"])
    assert result.exit_code == 2
    assert "factory 'marker:make' failed: ValueError: factory ran" in result.stderr
    assert (tmp_path / "imported.txt").read_text() == "ran"


def test_exit_in_user_code_is_an_error_not_an_exit():
    pytest.importorskip("torch")
    result = _run(["profile", "builtins:exit", "--input-shape", "1"])
    assert result.exit_code == 2
    assert result.stderr == "error: factory 'builtins:exit' failed: SystemExit: None\n"


def test_help_states_the_trust_boundary():
    result = _run(["profile", "--help"])
    text = " ".join(result.stdout.replace("│", " ").split())
    assert (
        "IMPORTS AND RUNS that Python code, with the current directory first on the import" in text
    )


TINY_GPT2 = ["--config", "n_layer=2", "--config", "n_embd=64", "--config", "n_head=4",
             "--config", "vocab_size=100"]  # fmt: skip


def test_transformers_config_prefill_and_decode():
    pytest.importorskip("transformers")
    from inferplan.profiles.from_transformers import profile_transformers

    config = {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100}
    for extra, kw in (([], {}), (["--decode", "--cache-len", "20", "--batch", "2"],
                                 {"phase": "decode", "cache_len": 20, "batch": 2})):  # fmt: skip
        result = _run(["profile", "transformers:GPT2Config", *TINY_GPT2, "--seq-len", "8",
                       *extra, "--json"])  # fmt: skip
        assert result.exit_code == 0, result.stderr
        want = profile_transformers("GPT2Config", config, seq_len=8, **kw).profile
        assert json.loads(result.stdout) == want.to_dict()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["transformers:GPT2Config", *TINY_GPT2], "--seq-len: give the tokens per sequence"),
        (["transformers:NoConfig", "--seq-len", "4"], "no configuration class 'NoConfig'"),
        (["transformers:GPT2Config", "--config", "n_layers=2", "--seq-len", "4"],
         "--config: GPT2Config has no field(s) 'n_layers'"),
        (["transformers:GPT2Config", "--seq-len", "4", "--cache-len", "3"],
         "--cache-len: applies to --decode only"),
        (["transformers:GPT2Config", "--seq-len", "4", "--input-shape", "1,4"],
         "--input-shape: does not apply to transformers models"),
        (["transformers:GPT2Config", *TINY_GPT2, "--seq-len", "4", "--measure"],
         "--measure applies to PyTorch models"),
        (["vgg16", "--seq-len", "4"],
         "--seq-len: applies to transformers:CONFIG_CLASS models only"),
        (["transformers:GPT2Config", *TINY_GPT2, "--seq-len", "99999999999999999999"],
         "--seq-len: a batch of sequences 1x99999999999999999999 has more elements"),
        (["transformers:GPT2Config", *TINY_GPT2, "--seq-len", "4", "--batch", str(2**62)],
         "--seq-len: a batch of sequences"),
        (["transformers:GPT2Config", "--config", "n_layer=0", "--seq-len", "4"],
         "--config: GPT2Config.n_layer must be a positive integer, got 0"),
    ],
)  # fmt: skip
def test_transformers_bad_input_is_one_line_exit_2(args, message):
    pytest.importorskip("transformers")
    result = _run(["profile", *args])
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_keyword_inputs_on_the_command_line(models):
    by_name = _run(["profile", "mymodels:Skip", "--input-shape", "x=1,3,8,8", "--json"])
    assert by_name.exit_code == 0, by_name.stderr
    plain = _run(["profile", "mymodels:Skip", "--input-shape", "1,3,8,8", "--json"])
    assert json.loads(by_name.stdout) == json.loads(plain.stdout)
    mixed = _run(["profile", "mymodels:Merge", "--input-shape", "p=1,8,4,4", "--input-shape",
                  "1,8,4,4"])  # fmt: skip
    assert mixed.exit_code == 2 and "name every input (name=shape) or none" in mixed.stderr
