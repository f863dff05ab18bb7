"""OTLP spans typed from ``http.response.status_code`` alone.

Instrumentations differ in what they put on a failed span: many set only the HTTP status
(no ``error.type``, no exception event, no status message). Such a span must still be typed
from the status, as the SDK types an exception carrying that status. The spans come from the
real OpenTelemetry SDK, encoded by its own OTLP protobuf encoder, posted to
``POST /v1/traces``, ingested into the real store, and read back from the task's events.
"""

from __future__ import annotations

import pytest
from apitest_support import ACME
from fastapi.testclient import TestClient
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from retrylens.api.app import create_app
from retrylens.config import Settings
from retrylens.ingest.spool_ingestor import SpoolIngestor
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse

#: every status the OTLP mapping names, and the class the SDK gives the same status
STATUS_TYPES = {
    429: "rate_limit",
    529: "rate_limit",  # Anthropic's "overloaded": back off, as the SDK does (issue 21)
    408: "timeout",
    504: "timeout",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    400: "validation",
    422: "validation",
}


def _traces() -> tuple[bytes, dict[int, str]]:
    """One trace per status: an agent span and a chat span that failed with only that status."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "status-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("status-test")
    traces: dict[int, str] = {}
    for status in STATUS_TYPES:
        with tracer.start_as_current_span(
            "invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}
        ) as root:
            with tracer.start_as_current_span(
                "chat gpt-4o",
                attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"},
                record_exception=False,
                set_status_on_exception=False,
            ) as chat:
                chat.set_attribute("http.response.status_code", status)
                chat.set_status(StatusCode.ERROR)
            root.set_status(StatusCode.ERROR)
            traces[status] = format(root.get_span_context().trace_id, "032x")
    provider.shutdown()
    return encode_spans(exporter.get_finished_spans()).SerializeToString(), traces


def test_a_failed_span_with_only_an_http_status_is_typed_from_it(
    settings: Settings, store: EventStore
) -> None:
    settings = settings.model_copy(update={"api_keys": {"acme": ACME["X-API-Key"]}})
    body, traces = _traces()
    with TestClient(create_app(settings, store)) as client:
        response = client.post(
            "/v1/traces",
            content=body,
            headers={**ACME, "Content-Type": "application/x-protobuf"},
        )
        assert response.status_code == 200, response.text
        SpoolIngestor(settings, store).drain()
        typed = {}
        for status, trace in traces.items():
            events = client.get(
                f"/v1/projects/acme/tasks/otel-{trace}/events", headers=ACME
            ).json()["events"]
            (failed,) = [e for e in events if e["kind"] == "attempt_failed"]
            assert failed["error_status"] == status and failed["error_code"] == ""
            typed[status] = failed["error_type"]
    assert typed == STATUS_TYPES
