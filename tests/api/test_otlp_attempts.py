"""OTLP traces → true attempts and true task figures.

A GenAI span covers its operation "including retries" (the GenAI conventions), so the
physical requests are the HTTP client spans under it — an HTTP instrumentation's, or the
ones ``retrylens.sdk.observe()`` adds. ``/v1/traces`` reads them as the attempts; the
task built from a trace carries its attempt count, its outcome (the last attempt's
result when the root span has no status), and its events in causal order.
"""

from __future__ import annotations

import orjson
import pytest

from retrylens.api.otlp import trace_events
from retrylens.api.otlp_decode import decode

TRACE, T0 = "0af7651916cd43dd8448eb211c80319c", 1_760_000_000_000_000_000
MS = 1_000_000
ROOT, CHAT = "b7ad6b7169203331", "00f067aa0ba902b7"


def _otlp_json(spans: list[dict]) -> bytes:
    def attrs(values: dict) -> list[dict]:
        def value(v):
            return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}

        return [{"key": k, "value": value(v)} for k, v in values.items()]

    return orjson.dumps({"resourceSpans": [{
        "resource": {"attributes": attrs({"service.name": "ts-agent"})},
        "scopeSpans": [{"scope": {"name": "hand"}, "spans": [
            {"traceId": TRACE, "spanId": s["id"], "parentSpanId": s.get("parent", ""), "name": s["name"],
             "startTimeUnixNano": str(s["start"]), "endTimeUnixNano": str(s["end"]),
             "attributes": attrs(s.get("attrs", {})), "status": {"code": s.get("code", 0)}}
            for s in spans]}]}]})


def events_of(spans: list[dict]) -> list[dict]:
    decoded = {s.span_id: s for s in decode(_otlp_json(spans), "application/json")}
    return trace_events(TRACE, decoded, "acme", {})


def root(code: int = 0, end: int = 900) -> dict:
    return {"id": ROOT, "name": "invoke_agent travel", "start": T0, "end": T0 + end * MS, "code": code,
            "attrs": {"gen_ai.operation.name": "invoke_agent"}}


def chat(start: int, end: int, code: int = 0, span_id: str = CHAT, **attrs) -> dict:
    return {"id": span_id, "parent": ROOT, "name": "chat gpt-4o", "start": T0 + start * MS, "end": T0 + end * MS,
            "code": code, "attrs": {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                                    "gen_ai.request.model": "gpt-4o", **attrs}}


def http(span_id: str, start: int, end: int, status: int, resend: int = 0) -> dict:
    attrs = {"http.request.method": "POST", "server.address": "api.openai.com",
             "http.response.status_code": status}
    if resend:
        attrs["http.request.resend_count"] = resend
    if status >= 400:
        attrs["error.type"] = str(status)
    return {"id": span_id, "parent": CHAT, "name": "POST", "start": T0 + start * MS, "end": T0 + end * MS,
            "code": 2 if status >= 400 else 0, "attrs": attrs}


def test_http_request_spans_under_one_genai_span_are_its_attempts() -> None:
    events = events_of([
        root(code=1),
        chat(10, 800, **{"gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30}),
        http("1000000000000001", 20, 100, 429),
        http("1000000000000002", 300, 380, 429, resend=1),
        http("1000000000000003", 600, 790, 200, resend=2),
    ])
    started = [e for e in events if e["kind"] == "attempt_started"]
    assert [e["attempt"] for e in started] == [1, 2, 3]
    assert {e["dependency"] for e in started} == {"openai/gpt-4o"}
    failed = [e for e in events if e["kind"] == "attempt_failed"]
    assert [(e["error_type"], e["error_detail"]["status"]) for e in failed] == [("rate_limit", 429)] * 2
    decisions = [e for e in events if e["kind"] == "decision"]
    assert [(e["decision"], e["backoff_ms"]) for e in decisions] == [("retry_backoff", 200), ("retry_backoff", 220)]
    (success,) = [e for e in events if e["kind"] == "attempt_succeeded"]
    assert (success["tokens_in"], success["tokens_out"]) == (120, 30)
    assert len({e["correlation_id"] for e in started}) == 1


def test_the_task_finished_event_carries_the_attempt_count() -> None:
    events = events_of([
        root(),
        chat(10, 100, code=2, span_id="2000000000000001", **{"http.response.status_code": 429}),
        chat(200, 300, code=2, span_id="2000000000000002", **{"http.response.status_code": 429}),
        chat(400, 500, span_id="2000000000000003"),
    ])
    finished = events[-1]
    assert finished["kind"] == "task_finished"
    assert finished["attempt"] == 3  # so the task counts as successful *with* retry
    assert finished["outcome"] == "succeeded"


def test_a_root_without_status_takes_the_last_attempts_result() -> None:
    failed = events_of([root(code=0), chat(10, 100, code=2, **{"http.response.status_code": 503})])
    assert failed[-1]["kind"] == "task_finished" and failed[-1]["outcome"] == "failed"
    ok = events_of([root(code=0), chat(10, 100)])
    assert ok[-1]["outcome"] == "succeeded"
    explicit = events_of([root(code=1), chat(10, 100, code=2)])  # the agent recovered on its own
    assert explicit[-1]["outcome"] == "succeeded"


def test_events_are_in_causal_order_even_when_the_root_ends_first() -> None:
    # the root's clock says it ended before its last attempt did (skew between processes)
    events = events_of([root(end=90), chat(10, 100)])
    kinds = [e["kind"] for e in events]
    assert kinds == ["task_started", "attempt_started", "attempt_succeeded", "task_finished"]


@pytest.mark.parametrize("status", ["not-a-number", -5, 10**12])
def test_a_broken_status_attribute_is_read_as_absent(status) -> None:
    spans = [root(), chat(10, 800), http("1000000000000001", 20, 100, 429)]
    spans[2]["attrs"]["http.response.status_code"] = status
    del spans[2]["attrs"]["error.type"]
    events = events_of(spans)
    failed = [e for e in events if e["kind"] == "attempt_failed"]
    assert len(failed) == 1 and failed[0]["error_detail"]["status"] is None


@pytest.mark.clickhouse
@pytest.mark.slow
def test_a_traced_openai_app_with_observe_shows_every_request_as_an_attempt_in_retrylens(shared_server) -> None:
    """The real openai-v2 instrumentation, observe(), the real OTLP exporter, a running ``retrylens serve``."""
    import openai
    from apitest_support import KEYS
    from fake_provider import RATE_LIMITED, FakeProvider, Reply, openai_completion
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from test_otlp import _wait_events

    from retrylens.sdk import observe
    from retrylens.sdk.integrations.providers.observing import stop_observing

    url = shared_server
    provider = TracerProvider(resource=Resource.create({"service.name": "observed-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=f"{url}/v1/traces", headers={"X-API-Key": KEYS["acme"]}, timeout=10)))
    instrumentation = OpenAIInstrumentor()
    instrumentation.instrument(tracer_provider=provider)
    observe(emit=lambda event: None, tracer_provider=provider)  # spans only: events come back via OTLP
    tracer = provider.get_tracer("agent")
    try:
        script = [RATE_LIMITED, RATE_LIMITED, Reply(body=openai_completion("hi"))]
        with FakeProvider(script) as fake, tracer.start_as_current_span(
                "invoke_agent travel", attributes={"gen_ai.operation.name": "invoke_agent"}) as agent:
            client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="sk-test")
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
            trace_id = format(agent.get_span_context().trace_id, "032x")
            assert fake.count == 3
    finally:
        instrumentation.uninstrument()
        stop_observing()
    provider.force_flush()
    events = _wait_events(url, f"otel-{trace_id}", 10)
    kinds = [e["kind"] for e in events]
    assert kinds == ["task_started", "attempt_started", "attempt_failed", "decision", "attempt_started",
                     "attempt_failed", "decision", "attempt_started", "attempt_succeeded", "task_finished"]
    assert [e["attempt"] for e in events if e["kind"] == "attempt_started"] == [1, 2, 3]
    assert [e["error_status"] for e in events if e["kind"] == "attempt_failed"] == [429, 429]
    assert events[-1]["outcome"] == "succeeded" and events[-1]["attempt"] == 3
    provider.shutdown()
