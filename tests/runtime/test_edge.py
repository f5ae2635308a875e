"""The edge server: weights served exactly, remaining layers computed exactly, bad requests
refused with one line while it keeps serving, the bearer token, and the CLI."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

from inferplan.errors import InvalidArgument, InvalidProfile  # noqa: E402
from inferplan.runtime.client import read_token  # noqa: E402
from inferplan.runtime.wire import decode_state, decode_tensors, encode_tensors  # noqa: E402
from tests.cli import app as cli_app  # noqa: E402
from tests.cli import runner  # noqa: E402

from .edge_support import (  # noqa: E402
    MLP,
    reference_model,
    run_stages,
    running_edge,
    spec,
    write_system,
)

ROOT = Path(__file__).parents[2]


def test_layers_are_the_weights_of_each_stage(tmp_path):
    oracle = reference_model(spec())
    with running_edge(tmp_path) as (edge, _):
        assert httpx.get(f"{edge.url}/health").json() == {
            "status": "ok",
            "model": "mlp",
            "layers": 4,
        }
        for layer in range(1, 5):
            response = httpx.get(f"{edge.url}/layers/{layer}")
            assert response.status_code == 200
            got = decode_state(response.content)
            want = oracle.stages[layer - 1].state_dict()
            assert sorted(got) == sorted(want)
            for key, value in want.items():
                assert torch.equal(got[key], value)


def test_infer_from_every_stage_equals_the_unsplit_model(tmp_path):
    oracle = reference_model(spec())
    x = torch.randn(1, 16, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = oracle.module(x)
    with running_edge(tmp_path) as (edge, _):
        for stage in range(1, 6):  # n = 1..N+1: the device ran layers 1..n-1
            activation = run_stages(oracle, (x,), 1, stage - 1)
            response = httpx.post(
                f"{edge.url}/infer", params={"stage": stage}, content=encode_tensors(activation)
            )
            assert response.status_code == 200, response.text
            (out,) = decode_tensors(response.content, [((1, 4), "float32")])
            assert torch.allclose(out, want, rtol=1e-5, atol=1e-6)
            assert float(response.headers["X-Service-Seconds"]) >= 0
        stats = httpx.get(f"{edge.url}/stats").json()
        assert stats["requests"] == 5
        assert stats["service_s"]["p50"] <= stats["service_s"]["p99"]


def test_the_edge_reports_the_cpu_of_its_layers_on_the_thread_that_ran_them(tmp_path):
    """``compute_cpu_s`` is the CPU of the layers alone, on whichever thread ``compute`` ran
    them (the testbed holds that thread by the edge's quota): the compute thread's own CPU,
    not the calling thread's, and never more than the whole process took."""
    from concurrent.futures import ThreadPoolExecutor

    from inferplan.coinference import default_system, mlp_layers
    from inferplan.runtime.edge import EdgeService
    from inferplan.runtime.layered import ModelSpec, build_layers

    layered = build_layers(ModelSpec("mlp-1024x4", input_shapes=((16, 1024),)), weights=True)
    with ThreadPoolExecutor(1) as pool:
        service = EdgeService(layered, default_system(layers=mlp_layers(1024, 4)),
                              compute=lambda work: pool.submit(work).result())  # fmt: skip
        body = encode_tensors((torch.randn(16, 1024),))
        pool_before, process_before = pool.submit(time.thread_time).result(), time.process_time()
        for _ in range(5):
            service.infer(1, body, emulate=False)
        pool_cpu = pool.submit(time.thread_time).result() - pool_before
        process_cpu = time.process_time() - process_before
    cpu = service.stats()["compute_cpu_s"]
    assert 0.8 * pool_cpu <= cpu <= pool_cpu <= process_cpu, (cpu, pool_cpu, process_cpu)
    # over HTTP, without a compute thread: the layers' CPU, less than the process took
    with running_edge(tmp_path) as (edge, _):
        process_before = time.process_time()
        for _ in range(3):
            answer = httpx.post(f"{edge.url}/infer", params={"stage": 1},
                                content=encode_tensors([torch.zeros(1, 16)]))  # fmt: skip
            assert answer.status_code == 200
        reported = httpx.get(f"{edge.url}/stats").json()["compute_cpu_s"]
        assert 0 < reported < time.process_time() - process_before


def _bad_requests(url: str) -> list[tuple[httpx.Response, int, str]]:
    good = encode_tensors([torch.zeros(1, 32)])  # the activation before layer 2
    post = httpx.post
    return [
        (post(f"{url}/infer", params={"stage": 2}, content=b"not tensors"), 400, "safetensors"),
        (post(f"{url}/infer", params={"stage": 2}, content=b""), 400, "empty"),
        (post(f"{url}/infer", params={"stage": 2},
              content=encode_tensors([torch.zeros(1, 16)])), 400, "shape 1x16, expected 1x32"),
        (post(f"{url}/infer", params={"stage": 2},
              content=encode_tensors([torch.zeros(1, 32, dtype=torch.float64)])), 400,
         "dtype float64, expected float32"),
        (post(f"{url}/infer", params={"stage": 2},
              content=encode_tensors([torch.zeros(1, 32)] * 2)), 400, "expected 1 tensor"),
        (post(f"{url}/infer", params={"stage": 0}, content=good), 422, "stage must be in 1..5"),
        (post(f"{url}/infer", params={"stage": 6}, content=good), 422, "stage must be in 1..5"),
        (post(f"{url}/infer", params={"stage": "two"}, content=good), 422, "stage"),
        (post(f"{url}/infer", content=good), 422, "stage"),
        (httpx.get(f"{url}/layers/0"), 404, "layer must be in 1..4"),
        (httpx.get(f"{url}/layers/5"), 404, "layer must be in 1..4"),
        (post(f"{url}/infer", params={"stage": 2}, content=b"x" * 5000), 413, "over the limit"),
        (post(f"{url}/reference", content=good), 400, "shape 1x32, expected 1x16"),
        (post(f"{url}/infer", params={"stage": 2, "emulate": "maybe"}, content=good), 422,
         "emulate: must be 0 or 1"),
        (httpx.get(f"{url}/layers/two"), 404, "layer must be in 1..4, got 'two'"),
        (httpx.get(f"{url}/nothing"), 404, "GET /nothing: Not Found"),
        (httpx.get(f"{url}/infer"), 405, "GET /infer: Method Not Allowed"),
    ]  # fmt: skip


def test_bad_requests_get_a_4xx_with_one_line_and_the_server_keeps_serving(tmp_path):
    with running_edge(tmp_path, max_body_bytes=4096) as (edge, service):
        bad = _bad_requests(edge.url)
        for response, status, reason in bad:
            assert response.status_code == status, (reason, response.text)
            detail = response.json()["detail"]
            assert isinstance(detail, str) and "\n" not in detail
            assert reason in detail, detail
        assert httpx.get(f"{edge.url}/health").status_code == 200
        ok = httpx.post(
            f"{edge.url}/infer", params={"stage": 2}, content=encode_tensors([torch.zeros(1, 32)])
        )
        assert ok.status_code == 200
        assert service.stats()["errors"] == len(bad)


def test_a_model_that_raises_is_a_500_with_one_line_and_the_server_keeps_serving(tmp_path):
    broken = spec("tests.runtime.models:broken")
    with running_edge(tmp_path, broken) as (edge, _):
        body = encode_tensors([torch.zeros(1, 16)])
        response = httpx.post(f"{edge.url}/infer", params={"stage": 1}, content=body)
        assert response.status_code == 500
        assert response.json() == {"detail": "RuntimeError: boom in fc2"}
        assert httpx.get(f"{edge.url}/health").status_code == 200
        # Layer 3 alone does not raise: the server still computes.
        response = httpx.post(f"{edge.url}/infer", params={"stage": 3}, content=body)
        assert response.status_code == 200


def test_every_request_needs_the_token(tmp_path):
    body = encode_tensors([torch.zeros(1, 16)])
    with running_edge(tmp_path, token="s3cret") as (edge, _):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            for response in (
                httpx.get(f"{edge.url}/health", headers=headers),
                httpx.get(f"{edge.url}/layers/1", headers=headers),
                httpx.post(f"{edge.url}/infer", params={"stage": 1}, content=body,
                           headers=headers),
            ):  # fmt: skip
                assert response.status_code == 401
                assert response.json() == {"detail": "missing or wrong bearer token"}
                assert response.headers["WWW-Authenticate"] == "Bearer"
        good = {"Authorization": "Bearer s3cret"}
        assert httpx.get(f"{edge.url}/health", headers=good).status_code == 200
        response = httpx.post(f"{edge.url}/infer", params={"stage": 1}, content=body, headers=good)
        assert response.status_code == 200


def test_token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text("abc123\n")
    assert read_token(path) == "abc123"
    for text in ("", "two words"):
        path.write_text(text)
        with pytest.raises(InvalidArgument, match="one token"):
            read_token(path)
    with pytest.raises(InvalidArgument, match="cannot read"):
        read_token(tmp_path / "missing")


def test_serve_rejects_a_system_whose_layers_are_not_the_models_blocks(tmp_path):
    layers = {"cycles": [1.0, 2.0], "input_bits": [8.0, 8.0, 8.0], "param_bits": [1.0, 1.0]}
    path = write_system(tmp_path / "system.json", layers=layers)
    result = runner.invoke(
        cli_app, ["edge", "serve", str(path), MLP, "--input-shape", "1,16", "--port", "1"]
    )
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "\n" not in line
    assert line.startswith(f"error: {path}: layers: has 2 layers but model mlp has 4 blocks")


def test_serve_refuses_an_unknown_dtype_of_a_builtin_model_in_one_line(tmp_path):
    path = write_system(tmp_path / "system.json")
    result = runner.invoke(cli_app, ["edge", "serve", str(path), "mlp-16x4", "--dtype",
                                     "float99", "--port", str(_free_port())])  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --dtype: unknown dtype 'float99'")
    assert result.stderr.count("\n") == 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_edge_serve_command_runs_a_real_server_on_loopback(tmp_path):
    path = write_system(tmp_path / "system.json")
    (tmp_path / "token").write_text("tok\n")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    command = [sys.executable, "-m", "inferplan", "edge", "serve", str(path), MLP,
               "--input-shape", "1,16", "--port", str(port), "--token-file",
               str(tmp_path / "token")]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        url = f"http://127.0.0.1:{port}/health"
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                response = httpx.get(url, headers={"Authorization": "Bearer tok"}, timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the edge did not start"
                time.sleep(0.2)
        assert response.json()["layers"] == 4
        assert httpx.get(url, timeout=2).status_code == 401
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)
    log = process.stderr.read() if process.stderr else ""
    assert "serving mlp (4 layers) on http://127.0.0.1:" in log
    assert "edge: stopped after 0 inference requests" in log  # a clean stop on SIGTERM


def test_edge_serve_on_a_port_in_use_is_a_one_line_error_before_announcing(tmp_path):
    path = write_system(tmp_path / "system.json")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(cli_app, ["edge", "serve", str(path), MLP, "--input-shape", "1,16",
                                         "--port", str(port)])  # fmt: skip
    assert result.exit_code == 2  # bad input, not an infeasible request (3)
    assert result.stderr == (
        f"error: --port: cannot listen on 127.0.0.1:{port} (Address already in use)\n"
    )
    bad_host = runner.invoke(cli_app, ["edge", "serve", str(path), MLP, "--input-shape", "1,16",
                                       "--host", "no such host.invalid"])  # fmt: skip
    assert bad_host.exit_code == 2
    assert bad_host.stderr.startswith("error: --host: cannot resolve 'no such host.invalid' (")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            "mlp-1000000x2",
            "mlp-1000000x2 has 2,000,002,000,000 parameters, 7,450.6 GiB of "
            "float32 weights: more than this machine's memory",
        ),
        ("mlp-8x20000", "mlp depth 20000 exceeds the limit of 10000 layers"),
    ],
)
def test_models_too_large_to_build_are_refused_before_building(tmp_path, model, message):
    path = write_system(tmp_path / "system.json")
    with running_edge(tmp_path) as (edge, _):
        for command in (["edge", "serve"], ["device", "run"]):
            extra = ["--edge", edge.url] if command[0] == "device" else []
            result = runner.invoke(cli_app, [*command, str(path), model, *extra])
            assert result.exit_code == 2
            assert result.stderr.startswith(f"error: {message}"), result.stderr


def test_a_factory_too_large_is_sized_on_meta_and_never_built(monkeypatch):
    from inferplan.runtime import examples, measure

    built: list[str] = []
    real = measure.load_module_factory

    def spy(spec: str, *, device: str = "meta") -> object:
        built.append(device)
        return real(spec, device=device)

    monkeypatch.setattr(measure, "load_module_factory", spy)
    monkeypatch.setattr(examples, "memory_bytes", lambda: 1000)  # bytes: less than the MLP
    with pytest.raises(InvalidProfile, match=r"^mlp has [\d,]+ parameters, .* more than this "):
        measure.build_model(MLP)
    assert built == ["meta"]
