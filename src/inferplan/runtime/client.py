"""Talking to the edge server without torch: the device's HTTP client, the bearer token, what
the edge serves (``GET /model``), and the edge's listening socket.

Nothing here imports torch, so ``device run`` and ``edge serve`` read the token and reach the
edge, and refuse what is wrong, before torch is imported.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferplan.documents import read_text
from inferplan.errors import InferplanError, InvalidArgument, InvalidFile

__all__ = [
    "DEFAULT_HOST",
    "EdgeClient",
    "EdgeUnavailable",
    "Refused",
    "listen",
    "read_token",
    "served_model",
]


DEFAULT_HOST = "127.0.0.1"


def read_token(path: str | Path) -> str:
    """The bearer token in the file at ``path`` (surrounding whitespace removed)."""
    try:
        token = read_text(path).strip()
    except InvalidFile as exc:
        raise InvalidArgument(f"cannot read token file ({exc.message})", source=str(path)) from None
    if not token or any(c.isspace() for c in token):
        raise InvalidArgument("token file must hold one token without spaces", source=str(path))
    return token


def listen(host: str = DEFAULT_HOST, port: int = 8000) -> socket.socket:
    """A socket bound to ``host:port`` for :func:`serve`: bound first, so that an address in
    use or not of this machine is an error before anything is announced or served.

    Raises
    ------
    InvalidArgument
        Naming ``host`` (it does not resolve) or ``port`` (it cannot be bound), and why.
    """
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError) as exc:
        raise InvalidArgument(f"cannot resolve {host!r} ({exc})", field="host") from None
    sock = socket.socket(family, kind)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise InvalidArgument(f"cannot listen on {host}:{port} ({exc.strerror or exc})",
                              field="port") from None  # fmt: skip
    return sock


class EdgeUnavailable(InferplanError):
    """The edge did not answer (or answered 5xx) after every retry."""


class Refused(InferplanError):
    """The edge answered 4xx: the request is wrong and retrying will not help."""


@dataclass(frozen=True)
class _Answer:
    """An HTTP answer of the edge: status, reason, headers (lower-case names), body."""

    status: int
    reason: str
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


class EdgeClient:
    """HTTP/1.1 to the edge over one keep-alive connection (``http.client``), with a bounded
    exponential back-off on an unreachable edge or a 5xx.

    The standard library's client, not a richer one: a device makes one request at a time, and
    its per-request cost is what the emulation must hide inside the modelled upload
    (``docs/device-edge.md``, Measured). A connection the edge closed while idle is reopened
    at once; only a failure on a fresh connection counts as an attempt. ``source``: the local
    address to connect from (the device's address on the testbed).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None,
        timeout_s: float,
        retries: int,
        backoff_s: float,
        max_backoff_s: float = 2.0,
        source: str | None = None,
    ) -> None:
        try:
            parts = urllib.parse.urlsplit(url)
            hostname = parts.hostname
        except ValueError:  # an unclosed [IPv6 address, say
            raise InvalidArgument(f"must be http://HOST:PORT, got {url!r}", field="edge") from None
        if parts.scheme not in ("http", "https") or not hostname:
            raise InvalidArgument(f"must be http://HOST:PORT, got {url!r}", field="edge")
        try:
            port = parts.port
        except ValueError:
            raise InvalidArgument(f"bad port in {url!r}", field="edge") from None
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host, self._port = hostname, port
        self._prefix = parts.path.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = timeout_s
        self._connection: http.client.HTTPConnection | None = None
        self._retries = retries
        self._backoff = backoff_s
        self._max_backoff = max_backoff_s
        self._down = False  # after a failed round of retries: one attempt until it answers
        self._source = None if source is None else (source, 0)  # the address to send from

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _connect(self) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        connection = kind(self._host, self._port, timeout=self._timeout,
                          source_address=self._source)  # fmt: skip
        connection.connect()
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def _exchange(self, method: str, target: str, content: bytes | None) -> _Answer:
        """One request and its answer; on a reused connection the edge closed, reconnect once."""
        reused = self._connection is not None
        while True:
            if self._connection is None:
                self._connection = self._connect()
            try:
                self._connection.request(method, target, body=content, headers=self._headers)
                response = self._connection.getresponse()
                answer = _Answer(
                    response.status,
                    response.reason,
                    {k.lower(): v for k, v in response.getheaders()},
                    response.read(),
                )
            except (OSError, http.client.HTTPException):
                self.close()
                if not reused:
                    raise
                reused = False  # a stale keep-alive connection: try once on a fresh one
                continue
            if answer.headers.get("connection", "").lower() == "close":
                self.close()
            return answer

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, int] | None = None,
        content: bytes | None = None,
    ) -> _Answer:
        target = self._prefix + path
        if params:
            target += "?" + urllib.parse.urlencode(params)
        attempts = 1 if self._down else 1 + self._retries
        reason = ""
        for attempt in range(attempts):
            try:
                answer = self._exchange(method, target, content)
            except (OSError, http.client.HTTPException) as exc:
                reason = f"edge {self.url} unreachable ({type(exc).__name__})"
            else:
                if answer.status < 500:
                    self._down = False
                    if answer.status >= 400:
                        raise Refused(f"edge answered {answer.status}: {_detail(answer)}")
                    return answer
                reason = f"edge answered {answer.status}: {_detail(answer)}"
            if attempt + 1 < attempts:
                time.sleep(min(self._backoff * 2**attempt, self._max_backoff))
        self._down = True
        raise EdgeUnavailable(reason)


def _detail(answer: _Answer) -> str:
    try:
        detail = answer.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail else answer.reason


def served_model(edge: EdgeClient) -> dict[str, Any]:
    """What the edge serves (``GET /model``): the model's name, its layers and the tensors
    crossing every cut.

    Raises
    ------
    EdgeUnavailable
        The edge did not answer after every retry.
    InvalidArgument
        The edge refused the request (a wrong token) or did not answer JSON.
    """
    try:
        served = edge.request("GET", "/model").json()
    except Refused as exc:
        raise InvalidArgument(str(exc), source=edge.url) from None
    except ValueError:
        raise InvalidArgument("/model did not answer JSON", source=edge.url) from None
    if not isinstance(served, dict):
        raise InvalidArgument("/model did not answer a JSON object", source=edge.url)
    return served
