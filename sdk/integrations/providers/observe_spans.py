"""One OpenTelemetry child span per physical provider request, under the active GenAI span.

The GenAI conventions say a model-call span covers the operation "including retries"
and name no attempt attribute, so a trace shows one ``chat`` span however many requests
the client sent. :func:`retrylens.sdk.observe` adds what is missing: for each request a
CLIENT span under the span active at the call (the instrumentation's GenAI span), with
the HTTP conventions' ``http.request.method``, ``server.address``,
``http.request.resend_count`` (on resends only, as the conventions say),
``http.response.status_code`` and ``error.type``, plus ``retrylens.attempt`` and
``retrylens.error_type``. ``/v1/traces`` reads them back as attempts.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .http_attempts import Physical

_tracers: dict[int, tuple[Any, Any]] = {}  # id(provider) → (provider, its tracer), kept alive


def attempt_span(client: str, request: Physical, index: int, provider: Any = None) -> None:
    """Record ``request`` (the ``index``-th of its call, from 0) as an ended child span.

    ``provider``: the tracer provider to use (``None``: the global one).
    """
    from opentelemetry import trace

    known = _tracers.get(id(provider))
    if known is None:
        tracer = trace.get_tracer("retrylens.sdk.observe", tracer_provider=provider)
        _tracers[id(provider)] = (provider, tracer)
    else:
        tracer = known[1]
    end = time.time_ns()
    attributes: dict[str, Any] = {
        "http.request.method": request.method or "POST",
        "server.address": request.host,
        "retrylens.attempt": index + 1,
        "retrylens.client": client,
    }
    if index:
        attributes["http.request.resend_count"] = index
    if request.status is not None:
        attributes["http.response.status_code"] = request.status
    if request.error_type is not None:
        attributes["error.type"] = str(request.status) if request.status else request.code
        attributes["retrylens.error_type"] = request.error_type.value
    if request.retry_after_ms is not None:
        attributes["retrylens.retry_after_ms"] = request.retry_after_ms
    span = tracer.start_span(
        request.method or "POST",
        kind=trace.SpanKind.CLIENT,
        start_time=end - request.latency_ms * 1_000_000,
        attributes=attributes,
    )
    if request.error_type is not None:
        span.set_status(trace.Status(trace.StatusCode.ERROR, request.message))
    span.end(end_time=end)
