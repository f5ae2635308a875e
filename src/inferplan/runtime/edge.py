"""The edge server of device-edge co-inference: an HTTP service (Starlette on uvicorn).

It holds the whole model with real weights, split into one stage per layer, and serves

========================  ==================================================================
``GET /health``           ``{"status": "ok", "model": ..., "layers": N}`` while it runs
``GET /model``            the layers and the tensors crossing every cut (devices check them)
``GET /layers/{i}``       the weights of layer ``i`` (``1..N``) as safetensors
``POST /infer?stage=n``   body: the activation before layer ``n`` (``1..N+1``) as safetensors;
                          answer: the model's output, layers ``n..N`` computed on the edge
``POST /reference``       body: the model's inputs; answer: the unsplit model's output
``GET /stats``            requests served, the p50/p99 service time of ``/infer`` and the
                          CPU seconds its layers took
========================  ==================================================================

With ``?emulate=1`` (what devices send by default) the edge paces itself as the physical
system: layers ``n..N`` take at least ``sum L_i / f_c`` and the download of layer ``i`` at
least ``m_i / R_d``, sleeping (never busy-waiting) for the rest. ``/infer`` answers carry the
edge's service time in the ``X-Service-Seconds`` header.

Nothing received is unpickled: bodies are parsed as safetensors and checked against the
expected shapes and dtypes. A bad request gets a 4xx with ``{"detail": "one-line reason"}``
(400 a body that is not the expected tensors, 401 a missing or wrong bearer token, 404 a layer
that does not exist, 413 a body over the size limit, 422 a bad query parameter) and the server
keeps serving. :class:`BackgroundEdge` runs the server in a thread (tests, benchmarks).
"""

from __future__ import annotations

import hmac
import math
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

import anyio
import numpy as np
import torch
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from inferplan.coinference import System
from inferplan.errors import InvalidArgument
from inferplan.runtime.client import DEFAULT_HOST, listen
from inferplan.runtime.emulate import pace
from inferplan.runtime.layered import LayeredModel
from inferplan.runtime.split import Tensors, run_layer
from inferplan.runtime.wire import (
    CONTENT_TYPE,
    SERVICE_HEADER,
    WireError,
    decode_tensors,
    encode_state,
    encode_tensors,
)

__all__ = [
    "DEFAULT_HOST",
    "BackgroundEdge",
    "EdgeService",
    "create_app",
    "listen",
    "serve",
]


class _HttpError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class EdgeService:
    """What the edge computes, without HTTP: layer weights, the remaining layers, statistics.

    Parameters
    ----------
    layered
        The model with real weights (:func:`~inferplan.runtime.layered.build_layers` with
        ``weights=True``).
    system
        The co-inference system: the edge's ``cpu_hz`` (``f_c``), the downlink ``R_d``, and
        the layers' cycles ``L_i`` and parameter bits ``m_i`` used for pacing.
    max_body_bytes
        Largest body accepted; by default four times the largest activation plus 1 MiB.
    repeats
        How many times ``/infer`` runs each layer (the output is the same each time): on the
        testbed (:mod:`inferplan.runtime.testbed.pair`) a CPU quota that many times larger
        then holds the edge in periods well above the kernel's minimum.
    compute
        Runs the layers of an ``/infer`` (``compute(work)`` returns ``work()``): on the
        testbed on a thread of their own that the edge's CPU quota holds, while decoding the
        request and encoding the answer stay outside it; by default in the calling thread.

    Examples
    --------
    The CPU seconds the layers took, on whichever thread ``compute`` ran them:

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> from inferplan.coinference import default_system, mlp_layers
    >>> from inferplan.runtime.layered import ModelSpec, build_layers
    >>> from inferplan.runtime.wire import encode_tensors
    >>> layered = build_layers(ModelSpec("mlp-8x3"), weights=True)
    >>> pool = ThreadPoolExecutor(1)
    >>> service = EdgeService(layered, default_system(layers=mlp_layers(8, 3)),
    ...                       compute=lambda work: pool.submit(work).result())
    >>> _ = service.infer(1, encode_tensors((torch.zeros(1, 8),)), emulate=False)
    >>> service.stats()["compute_cpu_s"] > 0
    True
    >>> pool.shutdown()
    """

    def __init__(
        self,
        layered: LayeredModel,
        system: System,
        *,
        max_body_bytes: int | None = None,
        repeats: int = 1,
        compute: Callable[[Callable[[], Tensors]], Tensors] | None = None,
    ) -> None:
        if system.n_layers != layered.n_layers:
            raise InvalidArgument(
                f"the system has {system.n_layers} layers but the model {layered.n_layers}"
            )
        if repeats < 1:
            raise InvalidArgument(f"must be at least 1, got {repeats}", field="repeats")
        self.layered = layered
        self.system = system
        self.repeats = repeats
        self._compute = compute
        # The weights are served as they are: encode each layer once, on first request.
        self._weights: dict[int, bytes] = {}
        self._weights_lock = threading.Lock()
        largest = max(
            sum(math.prod(shape) * 8 for shape, _ in specs) for specs in layered.crossings
        )
        self.max_body_bytes = max_body_bytes or 4 * largest + (1 << 20)
        self._service: list[float] = []
        self._stats_lock = threading.Lock()
        self._compute_cpu_s = 0.0
        self.errors = 0

    @property
    def n_layers(self) -> int:
        """``N``."""
        return self.layered.n_layers

    def layer_weights(self, layer: int) -> bytes:
        """Layer ``layer``'s ``state_dict`` as safetensors (``1 <= layer <= N``)."""
        if not 1 <= layer <= self.n_layers:
            raise _HttpError(404, f"layer must be in 1..{self.n_layers}, got {layer}")
        with self._weights_lock:
            if layer not in self._weights:
                self._weights[layer] = encode_state(self.layered.stages[layer - 1].state_dict())
            return self._weights[layer]

    def download_seconds(self, layer: int) -> float:
        """``m_i / R_d``: the emulated download time of layer ``layer``."""
        return self.system.layers.param_bits[layer - 1] / self.system.downlink_bps

    def edge_seconds(self, stage: int) -> float:
        """``sum_{i >= n} L_i / f_c``: the emulated edge time of layers ``stage..N``."""
        return float(sum(self.system.layers.cycles[stage - 1 :])) / self.system.edge.cpu_hz

    def infer(
        self, stage: int, body: bytes, *, emulate: bool, started: float | None = None
    ) -> tuple[bytes, float]:
        """Layers ``stage..N`` on the activation in ``body``: the encoded output and the
        service time (s) since ``started`` (``time.monotonic()``, by default now), paced to
        at least :meth:`edge_seconds` when ``emulate``."""
        started = time.monotonic() if started is None else started
        if not 1 <= stage <= self.n_layers + 1:
            raise _HttpError(422, f"stage must be in 1..{self.n_layers + 1}, got {stage}")
        try:
            values = decode_tensors(body, self.layered.crossings[stage - 1])
        except WireError as exc:
            raise _HttpError(400, f"activation before layer {stage}: {exc}") from None
        layers = self.layered.stages[stage - 1 :]

        def work() -> Tensors:
            out, cpu_started = values, time.thread_time()  # the thread the layers run on
            with torch.no_grad():
                for layer in layers:
                    out = run_layer(layer, out, self.repeats)
            spent = time.thread_time() - cpu_started
            with self._stats_lock:
                self._compute_cpu_s += spent
            return out

        out = encode_tensors(work() if self._compute is None else self._compute(work))
        if emulate:
            pace(started, self.edge_seconds(stage))
        seconds = time.monotonic() - started
        with self._stats_lock:
            self._service.append(seconds)
        return out, seconds

    def reference(self, body: bytes) -> bytes:
        """The unsplit model's output(s) on the inputs in ``body`` (never paced)."""
        try:
            inputs = decode_tensors(body, self.layered.crossings[0])
        except WireError as exc:
            raise _HttpError(400, f"model inputs: {exc}") from None
        with torch.no_grad():
            out = self.layered.module(*inputs)
        return encode_tensors(out if isinstance(out, tuple | list) else (out,))

    def stats(self) -> dict[str, Any]:
        """Requests served by ``/infer``, their mean, p50 and p99 service time, the CPU
        seconds their layers took (``compute_cpu_s``: on the thread that ran them, so neither
        the HTTP handling nor the (de)serialisation), and errors."""
        with self._stats_lock:
            times, cpu_s = np.asarray(self._service), self._compute_cpu_s
        summary: dict[str, Any] = {"requests": int(times.size), "errors": self.errors,
                                   "compute_cpu_s": cpu_s}  # fmt: skip
        if times.size:
            summary["service_s"] = {
                "mean": float(times.mean()),
                "p50": float(np.quantile(times, 0.5)),
                "p99": float(np.quantile(times, 0.99)),
            }
        return summary


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _query_int(request: Request, name: str) -> int:
    text = request.query_params.get(name)
    if text is None:
        raise _HttpError(422, f"{name}: missing query parameter")
    try:
        return int(text)
    except ValueError:
        raise _HttpError(422, f"{name}: must be an integer, got {text!r}") from None


def _query_flag(request: Request, name: str) -> bool:
    text = request.query_params.get(name, "0").lower()
    if text not in _TRUE + _FALSE:
        raise _HttpError(422, f"{name}: must be 0 or 1, got {text!r}")
    return text in _TRUE


Endpoint = Callable[[Request], Awaitable[Response]]


def create_app(service: EdgeService, *, token: str | None = None) -> Starlette:
    """The HTTP application around ``service``; with ``token`` every request needs
    ``Authorization: Bearer <token>``.

    Examples
    --------
    >>> from inferplan.coinference import default_system, mlp_layers
    >>> from inferplan.runtime.layered import ModelSpec, build_layers
    >>> layered = build_layers(ModelSpec("mlp-8x3"), weights=True)
    >>> system = default_system(layers=mlp_layers(8, 3))
    >>> app = create_app(EdgeService(layered, system))
    >>> sorted(r.path for r in app.routes if r.path.startswith(("/l", "/i")))
    ['/infer', '/layers/{layer}']
    """
    expected = f"Bearer {token}".encode() if token is not None else None

    def error(status: int, detail: str) -> JSONResponse:
        if status != 401:
            service.errors += 1
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse({"detail": detail}, status_code=status, headers=headers)

    def route(path: str, endpoint: Endpoint, method: str = "GET") -> Route:
        """``endpoint`` behind the token check, its errors answered with one line."""

        async def guarded(request: Request) -> Response:
            if expected is not None:
                given = request.headers.get("authorization", "").encode()
                if not hmac.compare_digest(given, expected):
                    return error(401, "missing or wrong bearer token")
            try:
                return await endpoint(request)
            except _HttpError as exc:
                return error(exc.status, exc.detail)
            except Exception as exc:  # the model itself failed: a 500, and keep serving
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                return error(500, f"{type(exc).__name__}: {reason}".rstrip(": "))

        return Route(path, guarded, methods=[method])

    async def body_of(request: Request) -> bytes:
        limit = service.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _HttpError(413, f"body of {declared} bytes is over the limit of {limit}")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _HttpError(413, f"body is over the limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def health(request: Request) -> Response:
        layers = service.n_layers
        return JSONResponse({"status": "ok", "model": service.layered.name, "layers": layers})

    async def model(request: Request) -> Response:
        return JSONResponse(service.layered.describe())

    async def stats(request: Request) -> Response:
        return JSONResponse(service.stats())

    async def layers(request: Request) -> Response:
        started = time.monotonic()
        text = request.path_params["layer"]
        try:
            layer = int(text)
        except ValueError:
            raise _HttpError(404, f"layer must be in 1..{service.n_layers}, got {text!r}") from None
        emulate = _query_flag(request, "emulate")
        data = await anyio.to_thread.run_sync(service.layer_weights, layer)
        if emulate:
            await anyio.sleep(
                max(0.0, started + service.download_seconds(layer) - time.monotonic())
            )
        return Response(data, media_type=CONTENT_TYPE)

    async def infer(request: Request) -> Response:
        stage, emulate = _query_int(request, "stage"), _query_flag(request, "emulate")
        body = await body_of(request)
        received = time.monotonic()  # the edge's time runs from here (the thread hop included)

        def work() -> tuple[bytes, float]:
            return service.infer(stage, body, emulate=emulate, started=received)

        data, seconds = await anyio.to_thread.run_sync(work)
        return Response(data, media_type=CONTENT_TYPE, headers={SERVICE_HEADER: f"{seconds:.9f}"})

    async def reference(request: Request) -> Response:
        body = await body_of(request)
        data = await anyio.to_thread.run_sync(service.reference, body)
        return Response(data, media_type=CONTENT_TYPE)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        detail = exc.detail if isinstance(exc, HTTPException) else "not found"
        return error(status, f"{request.method} {request.url.path}: {detail}")

    return Starlette(
        routes=[
            route("/health", health),
            route("/model", model),
            route("/stats", stats),
            route("/layers/{layer}", layers),
            route("/infer", infer, "POST"),
            route("/reference", reference, "POST"),
        ],
        exception_handlers={HTTPException: not_found},
    )


KEEP_ALIVE_S = 120
"""How long an idle device connection stays open (uvicorn's default, 5 s, would make a device
that pauses between inferences reconnect)."""


def _config(app: Starlette, **options: Any) -> uvicorn.Config:
    return uvicorn.Config(
        app, log_level="warning", access_log=False, timeout_keep_alive=KEEP_ALIVE_S, **options
    )


def serve(app: Starlette, sock: socket.socket) -> None:
    """Run ``app`` on ``sock`` (of :func:`listen`; uvicorn, one process) until SIGINT or
    SIGTERM, then return after a graceful shutdown. Call it from the main thread."""
    config = _config(app)
    # uvicorn re-raises the signal that stopped it once it has shut down; return instead.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()


class BackgroundEdge:
    """An edge server in a background thread on ``127.0.0.1`` and a free port.

    Examples
    --------
    >>> from inferplan.coinference import default_system, mlp_layers
    >>> from inferplan.runtime.layered import ModelSpec, build_layers
    >>> service = EdgeService(build_layers(ModelSpec("mlp-8x3"), weights=True),
    ...                       default_system(layers=mlp_layers(8, 3)))
    >>> import json, urllib.request
    >>> with BackgroundEdge(create_app(service)) as edge:
    ...     json.load(urllib.request.urlopen(edge.url + "/health"))["layers"]
    3
    """

    def __init__(self, app: Starlette, *, host: str = DEFAULT_HOST, timeout_s: float = 30.0):
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, 0))
        self.port = int(self._socket.getsockname()[1])
        self.url = f"http://{host}:{self.port}"
        config = _config(app, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._timeout_s = timeout_s

    def start(self) -> BackgroundEdge:
        """Start serving; returns once the server accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + self._timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the edge server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving (in-flight requests finish) and release the port."""
        self._server.should_exit = True
        self._thread.join(self._timeout_s)
        self._socket.close()

    def __enter__(self) -> BackgroundEdge:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
