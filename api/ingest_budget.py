"""Each tenant's ingest budget in bytes a second: past it, ``429`` with ``Retry-After``.

One tenant flooding ``/v1/events`` or ``/v1/traces`` makes the server decode, spool and insert
on its behalf; the other tenants' reads then share the machine with that work. A token bucket
per key bounds it: a key may send ``api_ingest_burst_bytes`` at once and
``api_ingest_rate_bytes`` a second after that. A request is let in while its key's bucket is
not in debt, and its body's bytes are taken as they arrive (a body's size is not always
declared, and an OTLP body's cost is not known before it is read), so one request may take
the bucket below zero; the next ones answer 429 with ``Retry-After`` (whole seconds until the
debt is repaid) before their body is read. Other keys are not affected.

A refusal is answered after :data:`REFUSAL_HOLD_S` (or the debt's time, if shorter), the
connection held meanwhile at the cost of a sleeping coroutine: answered at once, a client that
ignores ``Retry-After`` re-sent at once, and the refusals became the flood (an OTLP flooder on
two connections had ~5,000 bodies of 1 MB refused in 40 s, each a connection the event loop
accepted, parsed and closed; ``/healthz`` went to 10x idle). Held, such a client sends one
request a second per connection.

The local token (every project: the CLI and dashboard of this machine's own user) is not
limited; a request with no known key passes on to the route, which answers 401.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .auth import KeyRing
from .cost_budget import PROJECT_HEADER, CostBudget, payers
from .token_buckets import TokenBuckets

__all__ = ["INGEST_PATHS", "REFUSAL_HOLD_S", "IngestBudget", "TokenBuckets"]

#: How long a refusal waits before it is answered, at most (see the module docstring).
REFUSAL_HOLD_S = 1.0

#: The routes whose bodies become stored events (POST only).
INGEST_PATHS = frozenset({"/v1/events", "/v1/traces"})


class IngestBudget:
    """ASGI middleware: the per-key byte budget of the ingest routes (see the module docstring),
    and the per-project CPU budget (:mod:`.cost_budget`) checked with it.

    ``clock`` (the byte buckets') and ``sleep`` (the refusal's hold) are injected so that a test
    turns time by hand and reads each hold and ``Retry-After`` exactly, without sleeping."""

    def __init__(self, app: ASGIApp, keyring: KeyRing, *, rate_bytes: int, burst_bytes: int,
                 cost: CostBudget | None = None, hold_s: float = REFUSAL_HOLD_S,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.app = app
        self.keyring = keyring
        self.buckets = TokenBuckets(float(rate_bytes), float(burst_bytes), clock) if rate_bytes > 0 else None
        self.cost = cost
        self.hold_s = hold_s
        self.sleep = sleep

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tenant = self._tenant(scope) if self.buckets is not None or self.cost is not None else None
        if tenant is None:
            await self.app(scope, receive, send)
            return
        buckets, cost = self.buckets, self.cost
        if cost is not None:
            paying = payers(tenant, _header(scope, PROJECT_HEADER.encode()))
            in_debt = cost.wait_s(paying)
            if in_debt > 0:
                await self.sleep(min(in_debt, self.hold_s))
                await _too_many(send, cost.wait_s(paying), _over_cost(cost.rate))
                return
        if buckets is None:
            await self.app(scope, receive, send)
            return
        wait = buckets.wait_s(tenant)
        if wait > 0:
            await self.sleep(min(wait, self.hold_s))
            await _too_many(send, buckets.wait_s(tenant), _over_bytes(buckets.rate))
            return

        async def counted() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                buckets.take(tenant, len(message.get("body", b"")))
            return message

        await self.app(scope, counted, send)

    def _tenant(self, scope: Scope) -> frozenset[str] | None:
        """The projects of the request's key, for a POST to an ingest route with a project key."""
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") not in INGEST_PATHS:
            return None
        headers = dict(scope["headers"])
        key = headers.get(b"x-api-key")
        if key is None:
            scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
            key = token.strip() if scheme.lower() == b"bearer" else None
        if not key:
            return None
        who = self.keyring.resolve(key.decode("latin-1"))
        return who.projects if who is not None else None  # None: unknown key (401 later) or the local token


def _header(scope: Scope, name: bytes) -> str | None:
    value = dict(scope["headers"]).get(name)
    return value.decode("latin-1") if value else None


def _over_bytes(rate: float) -> bytes:
    return b"this key is over its ingest budget of %d bytes a second (api_ingest_rate_bytes)" % int(rate)


def _over_cost(rate: float) -> bytes:
    return (b"this project is over its ingest budget of %.3g CPU seconds a second (api_ingest_cpu_share)"
            % rate)


async def _too_many(send: Send, wait_s: float, reason: bytes) -> None:
    retry_after = max(1, math.ceil(wait_s))
    body = b'{"detail":"%s; retry after %d s"}' % (reason, retry_after)
    await send({"type": "http.response.start", "status": 429,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"retry-after", str(retry_after).encode())]})
    await send({"type": "http.response.body", "body": body})
