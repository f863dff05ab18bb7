"""ASGI middleware: request body size limit (413) and Prometheus request metrics."""

from __future__ import annotations

import time
from typing import Any

from fastapi import HTTPException
from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUESTS = Counter("retrylens_api_requests_total", "API requests", ["method", "route", "status"])
LATENCY = Histogram(
    "retrylens_api_request_seconds", "API request duration", ["method", "route"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)


class BodySizeLimit:
    """Refuse bodies over ``max_bytes`` with 413: by ``Content-Length`` up front, or while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _reply(send, 413 if declared.isdigit() else 400,
                         self._too_large() if declared.isdigit() else b'{"detail":"invalid Content-Length"}')
            return
        received = 0
        limit = self.max_bytes

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413, f"request body exceeds {limit} bytes")
            return message

        await self.app(scope, limited, send)

    def _too_large(self) -> bytes:
        return f'{{"detail":"request body exceeds {self.max_bytes} bytes"}}'.encode()


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
