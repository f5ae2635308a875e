"""The device against a hostile or broken edge: answers of the wrong kind, weights of another
dtype, service times it could not have taken, SNRs of no rate, runs too large to hold, and an
edge that dies before, during the download or during the stream. Each ends in one ``error:``
line or in the usual summary with ``failed`` listing what did not complete."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("starlette")

from inferplan.errors import InvalidArgument  # noqa: E402
from inferplan.runtime.device import run_device  # noqa: E402
from inferplan.runtime.edge import BackgroundEdge, EdgeService, create_app  # noqa: E402
from inferplan.runtime.layered import build_layers, load_model_system  # noqa: E402
from inferplan.runtime.wire import SERVICE_HEADER, decode_state, encode_state  # noqa: E402
from tests.cli import app as cli_app  # noqa: E402
from tests.cli import runner  # noqa: E402

from .edge_support import MLP, running_edge, spec, write_system  # noqa: E402

Rewrite = Callable[[int, dict[bytes, bytes], bytes], tuple[int, dict[bytes, bytes], bytes]]


def _hostile(app: Any, prefix: str, rewrite: Rewrite) -> Any:
    """``app`` with the answers to paths under ``prefix`` rewritten (status, headers, body)."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(prefix):
            await app(scope, receive, send)
            return
        messages: list[Any] = []

        async def keep(message: Any) -> None:
            messages.append(message)

        await app(scope, receive, keep)
        status, headers, body = rewrite(
            messages[0]["status"], dict(messages[0]["headers"]),
            b"".join(m.get("body", b"") for m in messages[1:]),
        )  # fmt: skip
        headers[b"content-length"] = str(len(body)).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": list(headers.items())})  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    return wrapped


def _edge(tmp_path: Any, prefix: str, rewrite: Rewrite) -> tuple[BackgroundEdge, Any]:
    layered = build_layers(spec(), weights=True)
    path = write_system(tmp_path / "system.json")
    service = EdgeService(layered, load_model_system(path, layered.profile))
    app = _hostile(create_app(service), prefix, rewrite)
    return BackgroundEdge(app, timeout_s=20.0).start(), path


def _device(path: Any) -> Any:
    layered = build_layers(spec(), weights=False)
    return load_model_system(path, layered.profile), layered


def _body(body: bytes) -> Rewrite:
    return lambda status, headers, _: (status, headers, body)


@pytest.mark.parametrize("answer", [b"[1, 2]", b'"mlp"', b"3"])
def test_a_model_answer_that_is_not_an_object_is_one_error(tmp_path, answer):
    edge, path = _edge(tmp_path, "/model", _body(answer))
    try:
        system, layered = _device(path)
        with pytest.raises(InvalidArgument, match=r"/model did not answer a JSON object"):
            run_device(system, layered, edge.url, inferences=1, emulate=False)
    finally:
        edge.stop()


def test_weights_of_another_dtype_are_refused_at_download(tmp_path):
    def as_double(status: int, headers: dict[bytes, bytes], body: bytes) -> Any:
        state = {k: v.double() for k, v in decode_state(body).items()}
        return status, headers, encode_state(state)

    edge, path = _edge(tmp_path, "/layers", as_double)
    try:
        system, layered = _device(path)
        run = run_device(system, layered, edge.url, method="fixed:2", inferences=3,
                         emulate=False, verify=False)  # fmt: skip
    finally:
        edge.stop()
    assert run.failed == (0, 1, 2) and not run.records
    assert "weights of layer 1 do not fit: " in run.errors[0]
    assert "weight is float64 32x16, the model's float32 32x16" in run.errors[0]


def test_a_service_time_longer_than_the_wait_is_not_slept(tmp_path):
    def slow(status: int, headers: dict[bytes, bytes], body: bytes) -> Any:
        return status, {**headers, SERVICE_HEADER.lower().encode(): b"1e9"}, body

    edge, path = _edge(tmp_path, "/infer", slow)
    system, layered = _device(path)
    runs: list[Any] = []
    device = threading.Thread(target=lambda: runs.append(run_device(
        system, layered, edge.url, method="edge-only", inferences=2, emulate=True,
        verify=False)), daemon=True)  # fmt: skip
    device.start()
    device.join(30)  # a device that sleeps what the edge says would still be sleeping
    edge.stop()
    assert runs, "the device slept the edge's service time"
    (run,) = runs
    assert run.failed == (0, 1)
    assert f"{SERVICE_HEADER} is 1000000000.0 s, but the answer came after" in run.errors[0]


def test_snrs_whose_rate_is_zero_are_refused_naming_the_value(tmp_path):
    system, layered = _device(write_system(tmp_path / "system.json"))
    snr = np.full((2, 5), 1.0)
    snr[1, 3] = 1e-300  # 1 + 1e-300 == 1: a rate of 0 bit/s
    with pytest.raises(InvalidArgument, match=r"SNR 1e-300 \(row 2, column 4\) gives an uplink "
                                              r"rate of 0 bit/s"):  # fmt: skip
        run_device(system, layered, "http://127.0.0.1:1", inferences=2, snr=snr)


def test_a_run_larger_than_memory_is_refused_before_anything_is_allocated(tmp_path):
    with running_edge(tmp_path) as (edge, _):
        path = write_system(tmp_path / "device.json")
        result = runner.invoke(cli_app, ["device", "run", str(path), MLP, "--input-shape",
                                         "1,16", "--edge", edge.url, "--inferences",
                                         str(10**12)])  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: --inferences: {10**12:,} inferences would keep ")
    assert "more than this machine's" in result.stderr and result.stderr.count("\n") == 1


def test_a_snr_trace_of_other_bytes_than_utf8_is_one_error(tmp_path):
    (tmp_path / "snr.csv").write_bytes(b"1,1,1,1,1\n\xff\xfe\n")
    with running_edge(tmp_path) as (edge, _):
        path = write_system(tmp_path / "device.json")
        result = runner.invoke(cli_app, ["device", "run", str(path), MLP, "--input-shape",
                                         "1,16", "--edge", edge.url, "--snr-trace",
                                         str(tmp_path / "snr.csv")])  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'snr.csv'}: line 2: not UTF-8 text (byte 0xff)\n"


def _dies_after(requests: int) -> Rewrite:
    """An edge that answers ``requests`` requests, then 503 to every one (killed)."""
    seen = [0]

    def rewrite(status: int, headers: dict[bytes, bytes], body: bytes) -> Any:
        seen[0] += 1
        if seen[0] > requests:
            return 503, {b"content-type": b"application/json"}, b'{"detail": "gone"}'
        return status, headers, body

    return rewrite


@pytest.mark.parametrize(("prefix", "alive", "completed"),
                         [("/layers", 0, 0), ("/infer", 2, 2), ("/model", 1, 0)])  # fmt: skip
def test_an_edge_dying_mid_run_leaves_the_summary_and_the_completed_outputs(
    tmp_path, prefix, alive, completed
):
    # fixed:1: one layer downloaded, then one upload per inference (the edge finishes it);
    # /model after 1: the command's check before torch passes, the run's own check fails
    edge, path = _edge(tmp_path, prefix, _dies_after(alive))
    try:
        result = runner.invoke(cli_app, [
            "device", "run", str(path), MLP, "--input-shape", "1,16", "--edge", edge.url,
            "--method", "fixed:1", "--inferences", "4", "--retries", "0", "--no-emulate",
            "--outputs", str(tmp_path / "out.pt"), "--json"])  # fmt: skip
    finally:
        edge.stop()
    assert result.exit_code == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["completed"] == completed
    assert data["failed"] == list(range(completed, 4))
    saved = tmp_path / "out.pt"
    assert saved.exists() == (completed > 0)
    if completed:
        assert torch.load(saved, weights_only=True).shape[0] == completed
    assert result.stderr.splitlines()[-1].startswith(f"error: {4 - completed} inference(s) failed")
