"""OTel out with the real opentelemetry-sdk: a governed task is a span, each attempt a child span.

Asserts on what the in-memory exporter received AND on the events the governor emitted:
both must name the same trace and spans, so each points at the other.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from retrylens.schemas import RetryEvent
from retrylens.schemas.taxonomy import ErrorType, EventKind
from retrylens.sdk.core.governor import Governor
from retrylens.sdk.core.usage import Usage
from retrylens.sdk.integrations.otel import key_hash, traced
from retrylens.sdk.text.sanitizer import Failure

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def otel() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _governor(provider: TracerProvider, events: list[RetryEvent]) -> Governor:
    return Governor.with_virtual_time(start=START, project="acme",
                                      emit=traced(events.append, tracer_provider=provider))


def _hex(number: int, digits: int) -> str:
    return f"{number:0{digits}x}"


def test_a_retried_task_is_a_span_with_one_child_span_per_attempt_and_events_carry_their_ids(otel):
    provider, exporter = otel
    tracer = provider.get_tracer("agent")
    events: list[RetryEvent] = []
    gov = _governor(provider, events)
    insert = gov.side_effect("db.insert")(lambda row: f"id-{row}")
    calls = {"n": 0}

    def ask(attempt) -> str:  # noqa: ANN001 - takes attempt=, so the full path runs from the start
        calls["n"] += 1
        with tracer.start_as_current_span("chat gpt-4o"):  # an instrumented client inside the attempt
            if calls["n"] <= 2:
                raise Failure(ErrorType.RATE_LIMIT, "429 Too Many Requests", status=429)
            attempt.report(Usage(tokens_in=900, tokens_out=120, cost_usd=0.004))
            insert("order-7")
            return "ok"

    with tracer.start_as_current_span("http request") as request:
        assert gov.call(ask, goal="answer", agent="support", dependency="gpt-4o") == "ok"
    request_ctx = request.get_span_context()

    spans = {s.name: s for s in exporter.get_finished_spans()}
    task = spans["invoke_agent support"]
    attempts = [s for s in exporter.get_finished_spans() if s.name.startswith("attempt ")]
    assert [s.attributes["retrylens.attempt"] for s in attempts] == [1, 2, 3]
    assert task.parent.span_id == request_ctx.span_id and task.context.trace_id == request_ctx.trace_id
    assert all(s.parent.span_id == task.context.span_id for s in attempts)
    assert task.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert task.attributes["gen_ai.agent.name"] == "support"
    assert task.attributes["retrylens.outcome"] == "succeeded" and task.attributes["retrylens.attempts"] == 3
    assert task.status.status_code == StatusCode.OK
    first, _, last = attempts
    assert first.status.status_code == StatusCode.ERROR and first.attributes["error.type"] == "rate_limit"
    assert first.attributes["http.response.status_code"] == 429
    assert first.attributes["retrylens.decision"].startswith("retry")
    assert first.attributes["retrylens.backoff_ms"] > 0 and first.attributes["retrylens.decision.reason"]
    assert first.attributes["gen_ai.request.model"] == "gpt-4o"
    assert first.attributes["retrylens.policy.version"] == events[0].policy_version
    # backoff is the gap between attempt spans, not part of an attempt's duration
    assert first.end_time + first.attributes["retrylens.backoff_ms"] * 1_000_000 <= attempts[1].start_time
    assert (last.attributes["gen_ai.usage.input_tokens"], last.attributes["gen_ai.usage.output_tokens"]) == (900, 120)
    assert "retrylens.decision" not in last.attributes
    # the instrumented client's spans are children of the attempt that ran them
    chats = [s for s in exporter.get_finished_spans() if s.name == "chat gpt-4o"]
    # (the first try runs on the governor's fast path before any event exists, so its client
    # span is the request's child; the attempts the governor starts parent theirs)
    assert [c.parent.span_id for c in chats] == [request_ctx.span_id] + [a.context.span_id for a in attempts[1:]]
    # the side effect: on the attempt as a span event, with the key's hash, never the key
    effect = next(ev for ev in last.events if ev.name == "retrylens.side_effect")
    emitted_key = next(e for e in events if e.kind == EventKind.SIDE_EFFECT).side_effects[0].idempotency_key
    assert effect.attributes["retrylens.idempotency_key_hash"] == key_hash(emitted_key)
    everything = repr([(s.attributes, [ev.attributes for ev in s.events]) for s in exporter.get_finished_spans()])
    assert emitted_key not in everything

    # the emitted events name the same trace and spans
    trace_id = _hex(request_ctx.trace_id, 32)
    assert {e.trace_id for e in events} == {trace_id}
    started = next(e for e in events if e.kind == EventKind.TASK_STARTED)
    assert started.span_id == _hex(task.context.span_id, 16) and started.parent_span_id == _hex(request_ctx.span_id, 16)
    by_attempt = {a.attributes["retrylens.attempt"]: _hex(a.context.span_id, 16) for a in attempts}
    for e in events:
        if e.kind in (EventKind.ATTEMPT_STARTED, EventKind.ATTEMPT_FAILED, EventKind.DECISION,
                      EventKind.ATTEMPT_SUCCEEDED):
            assert (e.span_id, e.parent_span_id) == (by_attempt[e.attempt], started.span_id), e.kind
    finished = next(e for e in events if e.kind == EventKind.TASK_FINISHED)
    assert finished.span_id == started.span_id
    for e in events:  # still valid schema v1 events
        RetryEvent.model_validate_json(e.to_json_bytes())


def test_a_compact_first_try_success_is_a_task_span_and_one_attempt_span(otel):
    provider, exporter = otel
    events: list[RetryEvent] = []
    gov = _governor(provider, events)
    assert gov.call(lambda: 42, goal="sum", agent="calc") == 42
    (event,) = events
    assert event.outcome is not None
    task, attempt = sorted(exporter.get_finished_spans(), key=lambda s: s.name != "invoke_agent calc")
    assert attempt.parent.span_id == task.context.span_id and task.parent is None
    assert event.trace_id == _hex(task.context.trace_id, 32)
    assert (event.span_id, event.parent_span_id) == (_hex(attempt.context.span_id, 16), _hex(task.context.span_id, 16))
    assert task.attributes["retrylens.attempts"] == 1 and attempt.status.status_code == StatusCode.OK


def test_a_task_that_gives_up_ends_its_span_in_error(otel):
    provider, exporter = otel
    events: list[RetryEvent] = []
    gov = _governor(provider, events)

    def broken(attempt) -> None:  # noqa: ANN001
        raise Failure(ErrorType.LOGIC, "the plan contradicts itself", retryable=False)

    with pytest.raises(Exception):  # noqa: B017,PT011 - whatever the governor re-raises
        gov.call(broken, goal="plan", agent="planner")
    task = next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent planner")
    attempt = next(s for s in exporter.get_finished_spans() if s.name.startswith("attempt "))
    assert task.status.status_code == StatusCode.ERROR and task.attributes["retrylens.outcome"] == "failed"
    assert attempt.attributes["error.type"] == "logic" and attempt.attributes["retrylens.decision"] == "give_up"
    assert {e.trace_id for e in events} == {_hex(task.context.trace_id, 32)}


def test_without_a_configured_sdk_events_keep_their_ids_and_nothing_breaks():
    from opentelemetry.trace import NoOpTracerProvider

    events: list[RetryEvent] = []
    gov = Governor.with_virtual_time(start=START, project="acme",
                                     emit=traced(events.append, tracer_provider=NoOpTracerProvider()))
    assert gov.call(lambda: 1, goal="x", agent="a") == 1
    (event,) = events
    assert event.trace_id and event.span_id  # the governor's own ids


def test_a_governor_traces_on_its_own_when_the_application_configured_opentelemetry(tmp_path) -> None:
    """A global SDK tracer provider is enough: no wrapping of ``emit`` by hand (own interpreter,
    since a global provider can be set only once per process)."""
    import json
    import subprocess
    import sys

    code = """
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from retrylens.sdk import Governor
from retrylens.testing import capture_events

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
calls = []

def flaky():
    calls.append(1)
    if len(calls) == 1:
        raise TimeoutError("slow upstream")
    return "ok"

with capture_events() as captured:
    governor = Governor.with_virtual_time(start=__import__("datetime").datetime(2026, 3, 1, tzinfo=__import__("datetime").UTC),
                                          project="acme", emit=captured.emit)
    governor.call(flaky, goal="look up order 7", agent="support")
    events = captured.events
spans = exporter.get_finished_spans()
print(json.dumps({"spans": sorted(s.name for s in spans),
                  "span_traces": sorted({format(s.context.trace_id, "032x") for s in spans}),
                  "event_traces": sorted({e.trace_id for e in events})}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["spans"] == ["attempt 1 support", "attempt 2 support", "invoke_agent support"]
    assert result["event_traces"] == result["span_traces"]  # the task and its trace point at each other
