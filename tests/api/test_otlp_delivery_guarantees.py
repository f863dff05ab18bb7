"""OTLP intake held to what it stores: a task's outcome from protobuf status codes, and a
batch refused with a 503 stored when the exporter sends it again (issue 38 items 3 and 4).

Spans from the real OpenTelemetry SDK, encoded by its own OTLP protobuf encoder (the
exporter's default), posted to ``POST /v1/traces``, ingested into the real store and read
back through the API.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from apitest_support import ACME
from fastapi.testclient import TestClient
from full_disk import fill, free, small_filesystem
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
PROTOBUF = {**ACME, "Content-Type": "application/x-protobuf"}


def _agent_run(root_status: StatusCode | None, last_call_fails: bool) -> tuple[bytes, str]:
    """An agent span (its status ``root_status``; None leaves it UNSET, as most agent
    frameworks do) over a failed model call and a last call that fails or answers."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "otlp-guarantees"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("otlp-guarantees")
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    with tracer.start_as_current_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        for fails in (True, last_call_fails):
            with tracer.start_as_current_span("chat gpt-4o", attributes=chat) as call:
                if fails:
                    call.set_attribute("http.response.status_code", 429)
                    call.set_status(StatusCode.ERROR)
        if root_status is not None:
            root.set_status(root_status)
    provider.shutdown()
    trace = format(root.get_span_context().trace_id, "032x")
    return encode_spans(exporter.get_finished_spans()).SerializeToString(), trace


def _events(client: TestClient, trace: str) -> list[dict]:
    """The stored events of the trace's task ([] when none was stored: the API's 404)."""
    response = client.get(f"/v1/projects/acme/tasks/otel-{trace}/events", headers=ACME)
    return [] if response.status_code == 404 else response.json()["events"]


def _outcome(client: TestClient, trace: str) -> str | None:
    return next((e["outcome"] for e in _events(client, trace) if e["kind"] == "task_finished"), None)


def test_an_unset_agent_span_is_judged_by_its_last_model_call_and_only_ok_overrides_it(
    api_settings: Settings, store: EventStore
) -> None:
    cases = {
        (None, True): "failed",  # UNSET over a failed last call: the task failed
        (None, False): "succeeded",
        (StatusCode.OK, True): "succeeded",  # the agent said it recovered
        (StatusCode.ERROR, False): "failed",
    }
    with TestClient(create_app(api_settings, store)) as client:
        traces = {}
        for (status, fails), _ in cases.items():
            body, traces[(status, fails)] = _agent_run(status, fails)
            assert client.post("/v1/traces", content=body, headers=PROTOBUF).status_code == 200
        SpoolIngestor(api_settings, store).drain()
        outcomes = {case: _outcome(client, trace) for case, trace in traces.items()}
    assert outcomes == cases


@pytest.fixture
def disk() -> Iterator[Path]:
    with small_filesystem(512) as directory:
        yield directory


def test_traces_refused_with_a_503_are_stored_when_the_exporter_sends_them_again(
    api_settings: Settings, store: EventStore, disk: Path
) -> None:
    settings = api_settings.model_copy(update={"spool_dir": disk / "spool"})
    body, trace = _agent_run(None, True)
    with TestClient(create_app(settings, store)) as client:
        client.post("/v1/events", json={"events": []}, headers=ACME)  # the spool folder exists
        fill(disk)
        refused = client.post("/v1/traces", content=body, headers=PROTOBUF)
        assert refused.status_code == 503, refused.text
        free(disk)
        assert client.post("/v1/traces", content=body, headers=PROTOBUF).status_code == 200  # the re-send
        SpoolIngestor(settings, store).drain()
        assert _outcome(client, trace) == "failed"
        events = _events(client, trace)
    assert [e["kind"] for e in events].count("attempt_failed") == 2
