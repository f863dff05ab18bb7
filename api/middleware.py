"""ASGI middleware: request body size limit (413), JSON content type (415), Prometheus request metrics."""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse
from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUESTS = Counter("retrylens_api_requests_total", "API requests", ["method", "route", "status"])
LATENCY = Histogram(
    "retrylens_api_request_seconds", "API request duration", ["method", "route"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)


#: How much of an oversized body is read to say how many events would fit (the rest is not read).
MEASURE_FACTOR = 16
#: Every retry event carries this key once, so its count in a body is the number of events.
_EVENT_MARK = b'"schema_version"'
#: What a batch costs besides its events: ``{"events": [`` and ``]}``.
_ENVELOPE = len(b'{"events": []}')
#: The share of the measured average room left for events larger than the batch's average.
_FIT_MARGIN = 0.9


class BodyTooLarge(HTTPException):
    """413 with the figures a client needs to split its batch (see :func:`too_large_body`)."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(413, body["detail"])
        self.body = body


class _Measure:
    """Counts the bytes and the events of a body as it streams by, across chunk boundaries."""

    def __init__(self) -> None:
        self.size = 0
        self.events = 0
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        window = self._tail + chunk
        self.events += window.count(_EVENT_MARK)
        keep = len(_EVENT_MARK) - 1
        self._tail = window[-keep:] if len(window) >= keep else window
        if _EVENT_MARK in self._tail:
            self._tail = b""


def too_large_body(limit: int, measured: _Measure, declared: int | None) -> dict[str, Any]:
    """The 413 answer: the limit, the body's size and, for a batch of events, how many fit."""
    size = declared if declared is not None else measured.size
    body: dict[str, Any] = {"limit_bytes": limit, "body_bytes": size}
    text = f"request body of {size} bytes exceeds the limit of {limit} bytes (api_max_body_bytes)"
    if measured.events:
        average = max(1.0, (measured.size - _ENVELOPE) / measured.events)
        fit = max(0, int(_FIT_MARGIN * (limit - _ENVELOPE) / average))
        body["events_fit"] = fit
        text += (f"; at this batch's average of {average:.0f} bytes per event, about {fit} events fit in one "
                 "request: split the batch")
    body["detail"] = text
    return body


class BodySizeLimit:
    """Refuse bodies over ``max_bytes`` with 413: by ``Content-Length`` up front, or while streaming.

    Either way the answer names the limit and, for a batch of events, about how many of this
    batch's events fit in one request; to say so, up to ``MEASURE_FACTOR`` times the limit of
    the body is read (and dropped)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and not declared.isdigit():
            await _reply(send, 400, b'{"detail":"invalid Content-Length"}')
            return
        if declared is not None and int(declared) > self.max_bytes:
            measured = _Measure()
            await self._drain(receive, measured)
            await _reply(send, 413, json.dumps(too_large_body(self.max_bytes, measured, int(declared))).encode())
            return
        measured = _Measure()
        limit = self.max_bytes

        async def limited() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                measured.feed(message.get("body", b""))
                if measured.size > limit:
                    if message.get("more_body", False):
                        await self._drain(receive, measured)
                    raise BodyTooLarge(too_large_body(limit, measured, None))
            return message

        await self.app(scope, limited, send)

    async def _drain(self, receive: Receive, measured: _Measure) -> None:
        """Read the rest of the body into ``measured``, up to ``MEASURE_FACTOR`` times the limit."""
        while measured.size <= MEASURE_FACTOR * self.max_bytes:
            message = await receive()
            if message["type"] != "http.request":
                return
            measured.feed(message.get("body", b""))
            if not message.get("more_body", False):
                return


async def too_large_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, BodyTooLarge)
    return JSONResponse(status_code=413, content=exc.body)


async def require_json_body(request: Request) -> None:
    """415 for a request to a route with a JSON body model whose ``Content-Type`` is not JSON.

    Without it, a body sent as text or with no type reaches validation as a string and
    answers "Input should be a valid dictionary", which says nothing about the cause. Routes
    that read their body themselves (OTLP's protobuf) declare no body model and are left
    alone. An app-wide dependency: it runs before the body is validated. Async, though it
    awaits nothing: FastAPI sends a sync dependency to a worker thread on every request."""
    route = request.scope.get("route")
    if getattr(route, "body_field", None) is None or request.method not in ("POST", "PUT", "PATCH"):
        return
    given = request.headers.get("content-type", "")
    media = given.split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return
    shown = f"got {given!r}" if given else "no Content-Type was sent"
    raise HTTPException(415, f"this endpoint takes a JSON body: send it with Content-Type: application/json ({shown})")


async def _reply(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class RequestMetrics:
    """Count and time requests by method, route template (not raw path) and status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def record(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            route: Any = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            LATENCY.labels(method, template).observe(time.perf_counter() - started)
            REQUESTS.labels(method, template, str(status["code"])).inc()
