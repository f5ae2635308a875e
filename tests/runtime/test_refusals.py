"""The torch commands refuse what needs no torch before they import it: a fresh process that
is refused has not loaded torch (``sys.modules``), so the answer comes at once. Nor has a system
file's check loaded scipy where its channel needs no integral."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("starlette")

from inferplan.runtime.layered import ModelSpec, build_layers

from .edge_support import MLP, running_edge, spec, write_system

ROOT = Path(__file__).parents[2]
NETWORK = ROOT / "examples" / "runtime-network.json"
SMALL = ROOT / "examples" / "system-small.yaml"

# Each command line in turn in this process: its exit code, which of the modules of argv[2]
# are imported by then, and its error line.
PROGRAM = textwrap.dedent("""
    import contextlib, io, json, sys
    from inferplan.cli.main import main
    commands, modules = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    for args in commands:
        sys.argv, err = ["inferplan", *args], io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                code = exc.code
        loaded = [m for m in modules if m in sys.modules]
        print(json.dumps([code, loaded, err.getvalue()]))
""")


def _refused(*commands: list[str], without: tuple[str, ...] = ("torch",)) -> list[str]:
    """Run each ``inferplan ARGS`` in one fresh process; require exit code 2 without the
    modules ``without`` loaded and one error line from each; return those lines."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps(commands),
                           json.dumps(without)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    errors = []
    for args, line in zip(commands, done.stdout.splitlines(), strict=True):
        code, loaded, stderr = json.loads(line)
        assert (code, loaded) == (2, []), (args, loaded, stderr)
        assert stderr.startswith("error: ") and stderr.count("\n") == 1, (args, stderr)
        errors.append(stderr.strip())
    return errors


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*extra: str) -> list[str]:
    return ["run", str(NETWORK), MLP, "--input-shape", "1,16", *extra]


def test_run_refuses_before_torch(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"path": ["s", "x", "t"], "partition": [1, 2, 4],
                                "interval": 0.1}))  # fmt: skip
    cases = [
        (_run("--plan", str(plan)), "node 'x' is not in the network"),
        (_run("--interval", "0.1", "--inputs", "missing.pt"), "missing.pt: file not found"),
        (_run("--interval", "0.1", "--outputs", "no/such/out.pt"), "its folder does not exist"),
        (_run("--interval", "0.1", "--inferences", "3"), "leave fewer than 2 after 5"),
        (_run("--interval", "0.1", "--timeout", "0"), "--timeout: must be positive"),
        (["run", str(NETWORK), "nowhere.py:make", "--input-shape", "1,16", "--interval", "1"],
         "file not found: nowhere.py"),
    ]  # fmt: skip
    errors = _refused(*(args for args, _ in cases))
    for (args, message), error in zip(cases, errors, strict=True):
        assert message in error, (args, error)


def test_device_run_refuses_an_edge_a_token_and_a_system_before_torch(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}"
    system = write_system(tmp_path / "system.json")
    device = ["device", "run", str(system), MLP, "--input-shape", "1,16"]
    (tmp_path / "token.txt").write_text("s3cret\n")
    token = ["--token-file", str(tmp_path / "token.txt")]
    with running_edge(tmp_path, token="s3cret") as (edge, _):
        small = ["device", "run", str(SMALL), MLP, "--input-shape", "1,16", "--edge", edge.url]
        errors = _refused(
            [*device, "--edge", url, "--retries", "0"],
            [*device, "--edge", url, "--token-file", "missing-token.txt"],
            [*small, "--retries", "0"],  # no token: the edge refuses
            [*small, *token],  # the system file has 3 layers, the model 4
            [*device, "--edge", edge.url, *token, "--method", "fastest"],
            [*device, "--edge", edge.url, *token, "--method", "fixed:5"],  # 4 layers
            ["device", "run", str(system), "mlp-16", "--edge", url],  # not a built-in
            without=("torch", "scipy"),  # discrete channels: no integral to check
        )
    assert f"edge {url} unreachable" in errors[0]
    assert "cannot read token file" in errors[1]
    assert "edge answered 401" in errors[2]
    blocks = ", ".join(build_layers(spec(), weights=False).profile.blocks)
    assert errors[3] == (
        f"error: {SMALL}: layers: has 3 layers but model mlp has 4 blocks ({blocks}); "
        "give one layer per block, or leave 'layers' out to take them from the model's profile"
    )
    assert errors[4].startswith("error: --method: unknown strategy 'fastest' (known: optimal,")
    assert errors[5] == "error: --method: 'fixed:5': the device holds 0..4 layers (N), not 5"
    assert "unknown model 'mlp-16'" in errors[6]


def test_edge_serve_refuses_a_port_in_use_and_a_bad_system_before_torch(tmp_path):
    system = write_system(tmp_path / "system.json")
    bad = write_system(tmp_path / "bad.json", downlink_bps=-1.0)
    serve = ["edge", "serve", "{}", MLP, "--input-shape", "1,16"]
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port, free = str(busy.getsockname()[1]), str(_closed_port())
        errors = _refused([*serve[:2], str(system), *serve[3:], "--port", port],
                          [*serve[:2], str(bad), *serve[3:]],
                          ["edge", "serve", str(SMALL), "mlp-16x4", "--port", free],
                          ["edge", "serve", str(SMALL), "alexnet", "--port", free],
                          ["edge", "serve", str(system), "vgg", "--port", free],
                          without=("torch", "scipy"))  # fmt: skip
    assert f"cannot listen on 127.0.0.1:{port}" in errors[0]
    assert "downlink_bps" in errors[1]
    # a built-in model's blocks are known without torch: the system file's 3 layers are not
    # one per block
    assert errors[2] == (
        f"error: {SMALL}: layers: has 3 layers but model mlp-16x4 has 4 blocks (fc1, fc2, fc3, "
        "fc4); give one layer per block, or leave 'layers' out to take them from the model's "
        "profile"
    )
    blocks = build_layers(ModelSpec("alexnet"), weights=False).profile.blocks
    assert f"model alexnet has 8 blocks ({', '.join(blocks)})" in errors[3]
    assert "unknown model 'vgg'" in errors[4]


def test_a_system_with_one_layer_per_block_of_a_builtin_model_is_served(tmp_path):
    """The check before torch takes what the model's profile takes: a file whose layers are
    one per block of the built-in model passes it (and the model is then built)."""
    from inferplan.cli.edge import _builtin_blocks, _check_layers

    layered = build_layers(ModelSpec("mlp-16x3"), weights=False)
    assert _builtin_blocks("mlp-16x3", None) == ("mlp-16x3", layered.profile.blocks)
    assert _builtin_blocks("mlp-16x3", "depth=1") is None  # regrouped: only the model knows
    _check_layers(SMALL, _builtin_blocks("mlp-16x3", None))  # 3 layers, 3 blocks


def test_profile_planning_and_split_refuse_a_model_before_torch(tmp_path):
    """A PyTorch model that cannot be there, inputs not given, an output folder or a target
    that are wrong: refused before torch, by every command that profiles a model."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"path": ["s", "a", "t"], "partition": [1, 2, 4],
                                "interval": 0.1}))  # fmt: skip
    shape = ["--input-shape", "1,16"]
    cases = [
        (["profile", "nowhere.py:make", *shape], "error: file not found: nowhere.py"),
        (["profile", MLP], "error: --input-shape: give the shape of each input"),
        (["profile", "tests.nomodule:mlp", *shape],
         "error: cannot import 'tests.nomodule': ModuleNotFoundError: No module named "
         "'tests.nomodule'"),
        (["profile", MLP, *shape, "-o", "no/such/p.json"],
         "error: no/such/p.json: No such file or directory"),
        (["provision", str(NETWORK), MLP, *shape, "--throughput", "-1"],
         "error: --throughput: must be a positive finite number, got -1.0"),
        (["throughput", str(NETWORK), "nowhere.py:make", *shape],
         "error: file not found: nowhere.py"),
        (["frontier", str(NETWORK), MLP], "error: --input-shape: give the shape of each input"),
        (["split", "nowhere.py:make", "--plan", str(plan), "-o", str(tmp_path / "out"), *shape],
         "error: file not found: nowhere.py"),
        (["split", MLP, "--plan", str(plan), "-o", str(tmp_path / "out"), *shape, "--weights",
          "missing.pt"], "error: missing.pt: file not found"),
        (["run", str(NETWORK), "tests.nomodule:mlp", *shape, "--interval", "1"],
         "No module named 'tests.nomodule'"),
    ]  # fmt: skip
    errors = _refused(*(args for args, _ in cases))
    for (args, message), error in zip(cases, errors, strict=True):
        assert message in error, (args, error)
