"""OTLP in: a real OpenTelemetry SDK exporter → ``retrylens serve`` → store → the task's events.

The agent is instrumented the way GenAI instrumentations do it (an ``invoke_agent`` root,
``chat`` spans with ``gen_ai.*`` attributes) and retries with tenacity; each attempt is
its own span and the first two fail with HTTP 429. The server must infer the attempts,
the errors and the retry decisions (marked inferred), and store a re-sent batch once.
"""

from __future__ import annotations

import gzip
import time
import uuid
from collections.abc import Iterator

import httpx
import orjson
import pytest
import tenacity
from apitest_support import ACME, KEYS
from fastapi.testclient import TestClient
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from retrylens.api.app import create_app
from retrylens.config import load_settings
from retrylens.store import open_store

pytestmark = [pytest.mark.clickhouse]


@pytest.fixture(scope="module")
def client(tmp_path_factory, chdb_path) -> Iterator[TestClient]:
    """One app over an empty store for the whole module (these tests never read it)."""
    settings = load_settings(data_dir=tmp_path_factory.mktemp("otlp"), clickhouse_dsn=f"chdb://{chdb_path}",
                             clickhouse_database=f"otlp_{uuid.uuid4().hex[:8]}", kafka_bootstrap_servers="",
                             api_keys=dict(KEYS))
    store = open_store(settings)
    with TestClient(create_app(settings, store)) as test_client:
        yield test_client
    store.client.command(f"DROP DATABASE IF EXISTS `{settings.clickhouse_database}`")


class RateLimited(Exception):
    """What a provider SDK raises on HTTP 429."""


def _run_agent(tracer) -> str:
    """One agent run: a chat call retried by tenacity (429, 429, ok) and one tool call."""
    calls = {"n": 0}

    @tenacity.retry(stop=tenacity.stop_after_attempt(4), wait=tenacity.wait_fixed(0.03),
                    retry=tenacity.retry_if_exception_type(RateLimited), reraise=True)
    def chat() -> str:
        calls["n"] += 1
        with tracer.start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
        }) as span:
            if calls["n"] <= 2:
                span.set_attribute("http.response.status_code", 429)
                span.set_attribute("error.type", "429")
                raise RateLimited("Error code: 429 - rate limit reached for gpt-4o")
            span.set_attribute("gen_ai.usage.input_tokens", 1200)
            span.set_attribute("gen_ai.usage.output_tokens", 300)
            return "Paris"

    with tracer.start_as_current_span("invoke_agent travel", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel",
    }) as root:
        chat()
        with tracer.start_as_current_span("execute_tool search", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        }):
            pass
        return format(root.get_span_context().trace_id, "032x")


def _wait_events(url: str, task_id: str, count: int) -> list[dict]:
    deadline, events = time.monotonic() + 30, []
    while time.monotonic() < deadline:
        response = httpx.get(f"{url}/v1/projects/acme/tasks/{task_id}/events", headers=ACME, timeout=10)
        if response.status_code == 200:
            events = response.json()["events"]
            if len(events) >= count:
                return events
        time.sleep(0.3)
    raise AssertionError(f"{len(events)} events of {task_id} after 30 s: {[e['kind'] for e in events]}")


@pytest.mark.slow
def test_a_real_otlp_exporter_with_a_tenacity_retry_loop_becomes_attempts_and_inferred_decisions(shared_server):
    url = shared_server  # its price table: gpt-4o at 2.5 / 10 USD per million tokens
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"X-API-Key": KEYS["acme"]}, timeout=10)
    captured = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "travel-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # one export per span: across batches
    provider.add_span_processor(SimpleSpanProcessor(captured))
    trace_id = _run_agent(provider.get_tracer("test-agent"))
    provider.force_flush()

    events = _wait_events(url, f"otel-{trace_id}", 12)
    kinds = [e["kind"] for e in events]
    assert kinds == ["task_started", "attempt_started", "attempt_failed", "decision", "attempt_started",
                     "attempt_failed", "decision", "attempt_started", "attempt_succeeded",
                     "attempt_started", "attempt_succeeded", "task_finished"]
    chat = [e for e in events if e["dependency"] == "openai/gpt-4o"]
    assert [e["attempt"] for e in chat if e["kind"] == "attempt_started"] == [1, 2, 3]
    assert len({e["correlation_id"] for e in chat}) == 1  # one operation, three attempts
    failed = [e for e in events if e["kind"] == "attempt_failed"]
    assert {e["error_type"] for e in failed} == {"rate_limit"} and all(e["retryable"] for e in failed)
    assert all(e["error_status"] == 429 and "RateLimited" in e["error_code"] for e in failed)
    decisions = [e for e in events if e["kind"] == "decision"]
    assert [e["decision"] for e in decisions] == ["retry_backoff", "retry_backoff"]
    assert all(e["decision_reason"].startswith("inferred from OTLP") for e in decisions)
    assert all(20 <= e["backoff_ms"] < 2_000 for e in decisions)  # tenacity waited 30 ms
    success = next(e for e in chat if e["kind"] == "attempt_succeeded")
    assert (success["tokens_in"], success["tokens_out"]) == (1200, 300)
    assert success["cost_usd"] == pytest.approx((1200 * 2.5 + 300 * 10.0) / 1e6)
    tool = [e for e in events if e["kind"] == "attempt_started" and e["dependency"] == ""]
    assert [e["attempt"] for e in tool] == [1]  # a different operation starts at attempt 1
    assert events[-1]["outcome"] == "succeeded" and {e["agent_name"] for e in events} == {"travel-agent"}
    assert {e["trace_id"] for e in events} == {trace_id}

    # the same spans again, in one batch: stored once (event ids derive from the span ids)
    again = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {KEYS['acme']}"})
    assert again.export(captured.get_finished_spans()).name == "SUCCESS"
    time.sleep(1.5)
    assert len(_wait_events(url, f"otel-{trace_id}", 12)) == 12
    found = httpx.get(f"{url}/v1/projects/acme/tasks/search", params={"q": trace_id}, headers=ACME).json()
    assert len(found) == 1, found
    provider.shutdown()


def _otlp_json(trace: str, spans: list[dict]) -> bytes:
    def attrs(values: dict) -> list[dict]:
        def value(v):
            return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}
        return [{"key": k, "value": value(v)} for k, v in values.items()]

    return orjson.dumps({"resourceSpans": [{
        "resource": {"attributes": attrs({"service.name": "ts-agent"})},
        "scopeSpans": [{"scope": {"name": "hand"}, "spans": [
            {"traceId": trace, "spanId": s["id"], "parentSpanId": s.get("parent", ""), "name": s["name"],
             "startTimeUnixNano": str(s["start"]), "endTimeUnixNano": str(s["end"]),
             "attributes": attrs(s.get("attrs", {})), "status": {"code": s.get("code", 0)},
             "events": s.get("events", [])}
            for s in spans]}]}]})


def test_otlp_json_a_failed_last_attempt_is_an_inferred_give_up(client):
    trace, t0 = "0af7651916cd43dd8448eb211c80319c", 1_760_000_000_000_000_000
    body = _otlp_json(trace, [
        {"id": "b7ad6b7169203331", "name": "workflow", "start": t0, "end": t0 + 900_000_000,
         "code": "STATUS_CODE_ERROR"},
        {"id": "00f067aa0ba902b7", "parent": "b7ad6b7169203331", "name": "chat claude", "start": t0 + 1_000_000,
         "end": t0 + 800_000_000, "attrs": {"gen_ai.request.model": "claude", "gen_ai.usage.input_tokens": 50},
         "code": 2, "events": [{"name": "exception", "attributes": [
             {"key": "exception.type", "value": {"stringValue": "APITimeoutError"}},
             {"key": "exception.message", "value": {"stringValue": "Request timed out."}}]}]},
    ])
    response = client.post("/v1/traces", content=gzip.compress(body), headers={
        **ACME, "Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert response.status_code == 200, response.text
    assert response.json()["retrylens"] == {"events": 5, "rejected": []}
    from retrylens.api.otlp import trace_events
    from retrylens.api.otlp_decode import decode

    spans = {s.span_id: s for s in decode(body, "application/json")}
    events = trace_events(trace, spans, "acme", {})
    assert [e["kind"] for e in events] == ["task_started", "attempt_started", "attempt_failed", "decision",
                                           "task_finished"]
    failed, decision = events[2], events[3]
    assert (failed["error_type"], failed["error_detail"]["code"], failed["tokens_in"]) == ("timeout",
                                                                                            "APITimeoutError", 50)
    assert decision["decision"] == "give_up" and decision["decision_reason"].startswith("inferred from OTLP")
    assert events[-1]["outcome"] == "failed"
    # re-sent: nothing new to deliver
    assert client.post("/v1/traces", content=body, headers={**ACME, "Content-Type": "application/json"}
                       ).json()["retrylens"]["events"] == 0


@pytest.mark.parametrize(("headers", "body", "status", "says"), [
    ({**ACME, "Content-Type": "application/x-protobuf"}, b"\xff\xff\xff\xff garbage", 400, "ExportTraceServiceRequest"),
    ({**ACME, "Content-Type": "application/json"}, b"{not json", 400, "not JSON"),
    ({**ACME, "Content-Type": "application/json"}, b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}',
     400, "traceId"),
    ({**ACME, "Content-Type": "application/json"}, b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "'
     + b"1" * 32 + b'", "spanId": "' + b"2" * 16 + b'", "startTimeUnixNano": "18446744073709551615"}]}]}]}', 400, "2200"),
    ({**ACME, "Content-Type": "application/x-protobuf"},  # a span starting at 2**64 - 1 ns
     bytes.fromhex("0a2c122a12280a1001010101010101010101010101010101120802020202020202022a017839ffffffffffffffff"),
     400, "2200"),
    ({**ACME, "Content-Type": "text/plain"}, b"hello", 415, "application/x-protobuf"),
    ({**ACME, "Content-Type": "application/json", "Content-Encoding": "br"}, b"{}", 415, "gzip"),
    ({"Content-Type": "application/x-protobuf"}, b"", 401, "missing API key"),
    ({"X-API-Key": "wrong", "Content-Type": "application/x-protobuf"}, b"", 401, "invalid API key"),
])
def test_bad_otlp_input_gets_a_clear_4xx(client, headers, body, status, says):
    response = client.post("/v1/traces", content=body, headers=headers)
    assert response.status_code == status, response.text
    assert says in response.json()["detail"]
