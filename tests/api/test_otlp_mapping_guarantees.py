"""The OTLP mapping at its edges: which spans are attempts, how they are numbered, typed and
decided, and what the task's end says, read on the mapped events (each one a valid event).

Spans are built as the decoder gives them (:class:`Span`) and mapped by
:func:`trace_events`, the function ``POST /v1/traces`` feeds every batch through; the events
are checked against the event schema, so an event the store would refuse fails here too.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from retrylens.api.otlp import INFERRED, NAMESPACE, trace_events
from retrylens.api.otlp_decode import Span
from retrylens.schemas import RetryEvent
from retrylens.schemas.limits import MAX_NAME_CHARS

TRACE = "0af7651916cd43dd8448eb211c80319c"
T0 = 1_760_000_000_000_000_000
MS = 1_000_000
ROOT = "b7ad6b7169203331"
CHAT_ATTRS = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}


def root(*, end: int = 900, error: bool = False, ok: bool = False, **attrs: Any) -> Span:
    return Span(
        TRACE,
        ROOT,
        None,
        "invoke_agent travel",
        T0,
        T0 + end * MS if end else 0,
        attrs={"gen_ai.operation.name": "invoke_agent", **attrs},
        resource={"service.name": "ts-agent"},
        error=error,
        ok=ok,
    )


def span(
    span_id: str,
    start: int,
    end: int,
    *,
    parent: str | None = ROOT,
    name: str = "chat gpt-4o",
    error: bool = False,
    attrs: dict[str, Any] | None = None,
    **text: str,
) -> Span:
    return Span(
        TRACE,
        span_id,
        parent,
        name,
        T0 + start * MS,
        T0 + end * MS,
        attrs=CHAT_ATTRS if attrs is None else attrs,
        error=error,
        **text,
    )


def http(span_id: str, parent: str, start: int, end: int, status: int | None, **attrs: Any) -> Span:
    values: dict[str, Any] = {"http.request.method": "POST", **attrs}
    if status is not None:
        values["http.response.status_code"] = status
    return span(span_id, start, end, parent=parent, name="POST", attrs=values)


def mapped(*spans: Span, prices: dict[str, tuple[float, float]] | None = None) -> list[dict]:
    events = trace_events(TRACE, {s.span_id: s for s in spans}, "acme", prices or {})
    for event in events:  # every mapped event is one the store accepts
        RetryEvent.model_validate(event)
    return events


def of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["kind"] == kind]


def attempts(events: list[dict]) -> list[tuple[str, int, str]]:
    """(span id, attempt number, correlation id) of every attempt, in order."""
    return [
        (e["span_id"], e["attempt"], e["correlation_id"]) for e in of(events, "attempt_started")
    ]


# -- which spans are attempts --------------------------------------------------------------------
OPERATIONS = {
    "gen_ai operation": {"gen_ai.operation.name": "chat"},
    "request model only": {"gen_ai.request.model": "gpt-4o"},
    "provider only": {"gen_ai.provider.name": "openai"},
    "system only": {"gen_ai.system": "openai"},
    "openinference LLM": {"openinference.span.kind": "LLM"},
    "openinference TOOL": {"openinference.span.kind": "TOOL"},
    "openllmetry tool": {"traceloop.span.kind": "TOOL"},
}
NOT_OPERATIONS = {
    "plain span": {"http.route": "/x"},
    "openinference agent": {"openinference.span.kind": "AGENT", "gen_ai.request.model": "gpt-4o"},
    "openinference chain": {"openinference.span.kind": "CHAIN"},
    "openllmetry workflow": {"traceloop.span.kind": "workflow", "gen_ai.system": "openai"},
    "gen_ai agent": {"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "gpt-4o"},
    "gen_ai workflow": {"gen_ai.operation.name": "invoke_workflow"},
}


@pytest.mark.parametrize("case", OPERATIONS, ids=list(OPERATIONS))
def test_a_genai_or_openinference_operation_is_an_attempt(case: str) -> None:
    events = mapped(root(), span("1000000000000001", 10, 100, attrs=OPERATIONS[case]))
    assert attempts(events) == [("1000000000000001", 1, "1000000000000001")]


@pytest.mark.parametrize("case", NOT_OPERATIONS, ids=list(NOT_OPERATIONS))
def test_an_agent_workflow_or_plain_span_is_no_attempt(case: str) -> None:
    events = mapped(root(), span("1000000000000001", 10, 100, attrs=NOT_OPERATIONS[case]))
    assert [e["kind"] for e in events] == ["task_started", "task_finished"]
    assert events[-1]["attempt"] == 0


def test_spans_our_sdk_exported_are_skipped() -> None:
    own = {"retrylens.task_id": "t-1"}
    assert mapped(root(**own), span("1000000000000001", 10, 100, attrs={**CHAT_ATTRS, **own})) == []
    events = mapped(root(), span("1000000000000001", 10, 100, attrs={**CHAT_ATTRS, **own}))
    assert [e["kind"] for e in events] == ["task_started", "task_finished"]


# -- how attempts are numbered -------------------------------------------------------------------
def test_operations_of_one_parent_are_attempts_while_their_predecessor_failed() -> None:
    events = mapped(
        root(),
        span("1000000000000001", 10, 100, error=True),
        span("1000000000000002", 200, 300, error=True),
        span("1000000000000003", 400, 500),  # succeeds: the operation is done
        span("1000000000000004", 600, 700, error=True),  # a new operation
        span("1000000000000005", 750, 800),
    )
    first, again = "1000000000000001", "1000000000000004"
    assert attempts(events) == [
        ("1000000000000001", 1, first),
        ("1000000000000002", 2, first),
        ("1000000000000003", 3, first),
        ("1000000000000004", 1, again),
        ("1000000000000005", 2, again),
    ]
    assert events[-1]["attempt"] == 3  # the task's most attempts of one operation
    backoffs = [(e["span_id"], e["backoff_ms"]) for e in of(events, "decision")]
    assert backoffs == [("1000000000000001", 100), ("1000000000000002", 100), (again, 50)]


def test_a_fallback_model_is_the_same_operation_retried_but_another_operation_is_not() -> None:
    mini = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
    events = mapped(
        root(),
        span("1000000000000001", 10, 100, error=True),
        span("1000000000000002", 150, 180, attrs=tool, name="execute_tool lookup"),
        span("1000000000000003", 200, 300, attrs=mini, name="chat gpt-4o-mini"),
    )
    assert {(s, n) for s, n, _ in attempts(events)} == {
        ("1000000000000001", 1),
        ("1000000000000002", 1),
        ("1000000000000003", 2),
    }
    (tool_event,) = [e for e in of(events, "attempt_started") if e["span_id"].endswith("2")]
    assert tool_event["correlation_id"] == "1000000000000002"


def test_operations_without_a_gen_ai_name_are_grouped_by_their_span_name() -> None:
    llm = {"openinference.span.kind": "LLM"}
    events = mapped(
        root(),
        span(
            "1000000000000001", 10, 100, attrs={"gen_ai.request.model": "m"}, name="a", error=True
        ),
        span("1000000000000002", 200, 300, attrs={"gen_ai.request.model": "m"}, name="b"),
        span("1000000000000003", 400, 500, attrs=llm, name="x", error=True),
        span("1000000000000004", 600, 700, attrs=llm, name="y"),
    )
    assert [n for _, n, _ in attempts(events)] == [1, 1, 1, 2]


def test_operations_under_different_parents_are_numbered_apart() -> None:
    step = span("2000000000000000", 5, 890, attrs={"openinference.span.kind": "CHAIN"}, name="step")
    events = mapped(
        root(),
        step,
        span("1000000000000001", 10, 100, error=True),
        span("1000000000000002", 200, 300, parent=step.span_id),
    )
    assert [n for _, n, _ in attempts(events)] == [1, 1]


def test_attempts_that_start_together_are_ordered_by_span_id() -> None:
    events = mapped(
        root(),
        span("1000000000000009", 10, 100),
        span("1000000000000001", 10, 100, error=True),
    )
    assert attempts(events) == [
        ("1000000000000001", 1, "1000000000000001"),
        ("1000000000000009", 2, "1000000000000001"),
    ]


def test_http_requests_are_the_attempts_of_their_genai_span_in_resend_order() -> None:
    chat = span("3000000000000000", 10, 800, attrs={**CHAT_ATTRS, "gen_ai.usage.input_tokens": 120})
    events = mapped(
        root(),
        chat,
        http("1000000000000003", chat.span_id, 20, 100, 200, **{"http.request.resend_count": 2}),
        http("1000000000000001", chat.span_id, 20, 100, 429, **{"http.request.resend_count": 0}),
        http("1000000000000002", chat.span_id, 20, 100, 500, **{"http.request.resend_count": 1}),
    )
    assert [(s, n) for s, n, _ in attempts(events)] == [
        ("1000000000000001", 1),
        ("1000000000000002", 2),
        ("1000000000000003", 3),
    ]
    assert all(e["span_id"] != chat.span_id for e in events if e["kind"] != "task_started")
    (ok,) = of(events, "attempt_succeeded")
    assert ok["tokens_in"] == 120  # the operation's usage, on its last request only
    assert [e["tokens_in"] for e in of(events, "attempt_failed")] == [0, 0]
    assert {e["parent_span_id"] for e in of(events, "attempt_started")} == {chat.span_id}


def test_http_spans_outside_an_operation_or_with_a_gen_ai_name_are_not_its_requests() -> None:
    chat = span("3000000000000000", 10, 800)
    events = mapped(
        root(),
        chat,
        http("1000000000000001", ROOT, 20, 100, 500),  # under the agent: plumbing
        span(
            "1000000000000002",
            20,
            100,
            parent=chat.span_id,
            attrs={**CHAT_ATTRS, "http.request.method": "POST"},
        ),
    )
    assert sorted(s for s, _, _ in attempts(events)) == ["1000000000000002", chat.span_id]


def test_an_old_http_method_attribute_also_marks_a_request() -> None:
    chat = span("3000000000000000", 10, 800)
    request = span(
        "1000000000000001",
        20,
        100,
        parent=chat.span_id,
        attrs={"http.method": "POST", "http.status_code": 503},
    )
    events = mapped(root(), chat, request)
    assert attempts(events) == [("1000000000000001", 1, "1000000000000001")]
    (failed,) = of(events, "attempt_failed")
    assert (failed["error_type"], failed["error_detail"]["status"]) == ("server_error", 503)


# -- failed or not -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "failed"), [(399, False), (400, True), (200, False), (None, False)]
)
def test_a_request_fails_from_status_400_up(status: int | None, failed: bool) -> None:
    chat = span("3000000000000000", 10, 800)
    events = mapped(root(), chat, http("1000000000000001", chat.span_id, 20, 100, status))
    assert len(of(events, "attempt_failed")) == int(failed)
    assert len(of(events, "attempt_succeeded")) == int(not failed)


def test_a_status_attribute_on_an_operation_span_without_error_is_no_failure() -> None:
    events = mapped(
        root(),
        span("1000000000000001", 10, 100, attrs={**CHAT_ATTRS, "http.response.status_code": 500}),
    )
    assert of(events, "attempt_failed") == [] and len(of(events, "attempt_succeeded")) == 1


@pytest.mark.parametrize(
    ("value", "status"),
    [(0, 0), (999, 999), (1000, None), (-1, None), ("503", 503), ("abc", None), ("", None)],
)
def test_a_status_is_a_number_from_0_to_999(value: object, status: int | None) -> None:
    events = mapped(
        root(),
        span(
            "1000000000000001",
            10,
            100,
            error=True,
            attrs={**CHAT_ATTRS, "http.response.status_code": value},
        ),
    )
    (failed,) = of(events, "attempt_failed")
    assert failed["error_detail"]["status"] == status


# -- error types ---------------------------------------------------------------------------------
TYPED = {
    "status 429": ({"http.response.status_code": 429}, {}, "rate_limit", 429),
    "old status attribute": ({"http.status_code": 429}, {}, "rate_limit", 429),
    "status 529": ({"http.response.status_code": 529}, {}, "rate_limit", 529),  # overloaded
    "old status attribute 529": ({"http.status_code": 529}, {}, "rate_limit", 529),
    "error.type 529": ({"error.type": "529"}, {}, "rate_limit", 529),
    "error.type RateLimitError": ({"error.type": "RateLimitError"}, {}, "rate_limit", None),
    "message rate limit": ({}, {"status_message": "Rate limit reached"}, "rate_limit", None),
    "message rate_limit_exceeded": (
        {},
        {"exception_message": "rate_limit_exceeded"},
        "rate_limit",
        None,
    ),
    "429 in the text": ({}, {"exception_message": "HTTP 429"}, "rate_limit", None),
    "error.type 429": ({"error.type": "429"}, {}, "rate_limit", 429),
    "status 408": ({"http.response.status_code": 408}, {}, "timeout", 408),
    "status 504": ({"http.response.status_code": 504}, {}, "timeout", 504),
    "timeout in the type": ({}, {"exception_type": "ReadTimeout"}, "timeout", None),
    "timed out": ({}, {"exception_message": "the read timed out"}, "timeout", None),
    "status 500": ({"http.response.status_code": 500}, {}, "server_error", 500),
    "status 599": ({"http.response.status_code": 599}, {}, "server_error", 599),
    "error.type 503": ({"error.type": "503"}, {}, "server_error", 503),
    "connect": ({}, {"exception_type": "ConnectError"}, "network", None),
    "network": ({}, {"status_message": "network unreachable"}, "network", None),
    "context_length": (
        {},
        {"exception_message": "context_length_exceeded"},
        "context_overflow",
        None,
    ),
    "context length": (
        {},
        {"exception_message": "maximum context length"},
        "context_overflow",
        None,
    ),
    "status 400": ({"http.response.status_code": 400}, {}, "validation", 400),
    "status 422": ({"http.response.status_code": 422}, {}, "validation", 422),
    "validation": ({}, {"exception_type": "ValidationError"}, "validation", None),
    "parse": ({}, {"exception_message": "could not parse the answer"}, "validation", None),
    "json": ({}, {"exception_type": "JSONDecodeError"}, "validation", None),
    "status 401": ({"http.response.status_code": 401}, {}, "unknown", 401),
    "status 499": ({"http.response.status_code": 499}, {}, "unknown", 499),
    "nothing said": ({}, {}, "unknown", None),
    "error.type 999": ({"error.type": "999"}, {}, "server_error", 999),
    "error.type beyond 999": ({"error.type": "1000"}, {}, "unknown", None),
}


@pytest.mark.parametrize("case", TYPED, ids=list(TYPED))
def test_a_failed_operation_is_typed_from_its_status_and_text(case: str) -> None:
    attrs, text, error_type, status = TYPED[case]
    events = mapped(
        root(), span("1000000000000001", 10, 100, error=True, attrs={**CHAT_ATTRS, **attrs}, **text)
    )
    (failed,) = of(events, "attempt_failed")
    assert (failed["error_type"], failed["error_detail"]["status"]) == (error_type, status)
    transient = {"rate_limit", "timeout", "server_error", "network"}
    assert failed["retryable"] is (error_type in transient)


@pytest.mark.parametrize(
    ("key", "value"),
    [("gen_ai.operation.name", "execute_tool"), ("openinference.span.kind", "TOOL")],
)
def test_a_failed_tool_that_says_nothing_more_is_a_tool_error(key: str, value: str) -> None:
    decoded = "".join(list(value))  # a decoder's string: equal, never the same object
    attrs = {key: decoded}
    events = mapped(root(), span("1000000000000001", 10, 100, error=True, attrs=attrs))
    (failed,) = of(events, "attempt_failed")
    assert failed["error_type"] == "tool_error"


def test_the_error_detail_says_what_the_span_said() -> None:
    events = mapped(
        root(),
        span(
            "1000000000000001",
            10,
            100,
            error=True,
            attrs={**CHAT_ATTRS, "error.type": "E42"},
            status_message="bad gateway",
        ),
        span(
            "1000000000000002",
            200,
            300,
            error=True,
            exception_type="openai.APIError",
            exception_message="boom",
            status_message="ignored",
        ),
    )
    first, second = of(events, "attempt_failed")
    assert first["error_detail"] == {"message": "bad gateway", "code": "E42", "status": None}
    assert second["error_detail"] == {"message": "boom", "code": "openai.APIError", "status": None}


# -- decisions and the task's end ----------------------------------------------------------------
def test_a_failure_followed_by_another_attempt_is_an_inferred_retry_with_the_gap() -> None:
    events = mapped(
        root(),
        span("1000000000000001", 10, 100, error=True),
        span("1000000000000002", 350, 400),
    )
    (decision,) = of(events, "decision")
    assert (decision["decision"], decision["backoff_ms"]) == ("retry_backoff", 250)
    assert decision["decision_reason"] == f"{INFERRED}: invoked again 250 ms later"
    assert decision["span_id"] == "1000000000000001"


def test_the_last_failure_of_an_ended_trace_is_an_inferred_give_up() -> None:
    events = mapped(root(), span("1000000000000001", 10, 100, error=True))
    (decision,) = of(events, "decision")
    assert decision["decision"] == "give_up"
    assert decision["decision_reason"] == f"{INFERRED}: no further attempt before the trace ended"
    assert events[-1]["outcome"] == "failed"


def test_a_trace_whose_root_has_not_ended_decides_nothing_yet() -> None:
    events = mapped(root(end=0), span("1000000000000001", 10, 100, error=True))
    assert of(events, "decision") == [] and of(events, "task_finished") == []
    assert [e["kind"] for e in events] == ["task_started", "attempt_started", "attempt_failed"]


def test_a_trace_without_its_root_yet_maps_its_attempts_only() -> None:
    events = mapped(span("1000000000000001", 10, 100, error=True))
    assert [e["kind"] for e in events] == ["attempt_started", "attempt_failed"]
    assert events[0]["agent"] == {"name": "unknown_service"}


@pytest.mark.parametrize(
    ("root_error", "root_ok", "last_failed", "outcome"),
    [
        (True, False, False, "failed"),  # the root's own status wins
        (False, True, True, "succeeded"),  # the agent recovered on its own
        (False, False, True, "failed"),  # no status: the last attempt's result
        (False, False, False, "succeeded"),
    ],
)
def test_the_task_outcome_is_the_roots_status_else_the_last_attempts_result(
    root_error: bool, root_ok: bool, last_failed: bool, outcome: str
) -> None:
    events = mapped(
        root(error=root_error, ok=root_ok),
        span("1000000000000001", 10, 100, error=not last_failed),
        span(
            "1000000000000002",
            300,
            400,
            error=last_failed,
            attrs={"gen_ai.operation.name": "embeddings"},
        ),
    )
    assert events[-1]["outcome"] == outcome


def test_the_last_attempt_is_the_one_that_ended_last_not_the_last_listed() -> None:
    late_ok = span("1000000000000001", 10, 600, attrs={"gen_ai.operation.name": "embeddings"})
    events = mapped(root(), late_ok, span("1000000000000002", 20, 500, error=True))
    assert events[-1]["outcome"] == "succeeded"
    events = mapped(
        root(),
        span("1000000000000001", 10, 500),
        span("1000000000000002", 20, 500, error=True, attrs={"gen_ai.operation.name": "x"}),
    )
    assert events[-1]["outcome"] == "failed"  # ended together: the later-listed result counts


def test_the_task_ends_at_its_last_attempt_when_the_root_ends_first() -> None:
    events = mapped(
        root(end=90),
        span("1000000000000001", 10, 100, error=True),
        span("1000000000000002", 150, 250),
    )
    finished = events[-1]
    assert [e["kind"] for e in events][0] == "task_started" and finished["kind"] == "task_finished"
    assert finished["latency_ms"] == 250 and finished["ts"] == "2025-10-09T08:53:20.250000Z"
    on_time = mapped(root(end=900), span("1000000000000001", 10, 100))
    assert on_time[-1]["latency_ms"] == 900


def test_events_are_in_causal_order_with_decisions_after_their_failure() -> None:
    events = mapped(
        root(),
        span("1000000000000001", 10, 100, error=True),
        span("1000000000000002", 100, 200),  # starts the instant the first one failed
    )
    assert [e["kind"] for e in events] == [
        "task_started",
        "attempt_started",
        "attempt_failed",
        "decision",
        "attempt_started",
        "attempt_succeeded",
        "task_finished",
    ]
    assert all("_ns" not in e for e in events)


# -- figures and ids -----------------------------------------------------------------------------
def test_latency_usage_cost_and_dependency_of_an_attempt() -> None:
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.provider.name": "openai",
        "gen_ai.usage.input_tokens": 1000,
        "gen_ai.usage.output_tokens": 500,
    }
    prices = {"gpt-4o-2024-08-06": (2.5, 10.0)}
    (ok,) = of(
        mapped(root(), span("1000000000000001", 10, 130, attrs=attrs), prices=prices),
        "attempt_succeeded",
    )
    assert (ok["latency_ms"], ok["tokens_in"], ok["tokens_out"]) == (120, 1000, 500)
    assert ok["cost_usd"] == 0.0075  # (1000 × 2.5 + 500 × 10.0) / 1e6, exactly
    assert ok["dependency"] == "openai/gpt-4o-2024-08-06"


@pytest.mark.parametrize(
    ("attrs", "dependency", "tokens"),
    [
        (
            {
                "gen_ai.system": "anthropic",
                "gen_ai.usage.prompt_tokens": 7,
                "gen_ai.usage.completion_tokens": 3,
            },
            "anthropic",
            (7, 3),
        ),
        (
            {
                "openinference.span.kind": "LLM",
                "llm.token_count.prompt": 9,
                "llm.token_count.completion": 4,
                "server.address": "api.example.com",
            },
            "api.example.com",
            (9, 4),
        ),
        (
            {
                "gen_ai.request.model": "m",
                "gen_ai.usage.input_tokens": "x",
                "gen_ai.usage.output_tokens": -5,
            },
            "m",
            (0, 0),
        ),
    ],
)
def test_usage_and_dependency_from_any_convention(
    attrs: dict[str, Any], dependency: str, tokens: tuple[int, int]
) -> None:
    (ok,) = of(mapped(root(), span("1000000000000001", 10, 100, attrs=attrs)), "attempt_succeeded")
    assert ok["dependency"] == dependency and (ok["tokens_in"], ok["tokens_out"]) == tokens
    assert ok["cost_usd"] == 0


def test_an_attempt_that_ends_before_it_starts_has_no_negative_latency() -> None:
    (ok,) = of(mapped(root(), span("1000000000000001", 100, 50)), "attempt_succeeded")
    assert ok["latency_ms"] == 0


def test_event_ids_are_stable_per_span_and_kind_and_times_are_milliseconds() -> None:
    spans = (
        root(),
        span("1000000000000001", 10, 100, error=True),
        span("1000000000000002", 200, 300),
    )
    first, again = mapped(*spans), mapped(*reversed(spans))
    assert [e["event_id"] for e in first] == [e["event_id"] for e in again]
    assert len({e["event_id"] for e in first}) == len(first)
    started = first[0]
    assert started["event_id"] == str(uuid.uuid5(NAMESPACE, f"{TRACE}/{ROOT}/task_started"))
    assert started["ts"] == "2025-10-09T08:53:20Z"
    (failed,) = of(first, "attempt_failed")
    assert failed["ts"] == "2025-10-09T08:53:20.100000Z"
    assert (started["task_id"], started["trace_id"], started["project"]) == (
        f"otel-{TRACE}",
        TRACE,
        "acme",
    )
    assert started["agent"] == {"name": "ts-agent"} and started["schema_version"] == 1


def test_long_names_are_cut_to_the_schemas_limits_so_no_event_is_refused() -> None:
    """A long service name, provider or exception type must not make the trace's events
    invalid (the intake would refuse them, and the trace would be lost)."""
    service, provider, kind = "s" * 300, "p" * 300, "E" * 300
    events = trace_events(
        TRACE,
        {
            ROOT: Span(
                TRACE, ROOT, None, "agent", T0, T0 + 900 * MS, resource={"service.name": service}
            ),
            "1000000000000001": span(
                "1000000000000001",
                10,
                100,
                error=True,
                attrs={"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider},
                exception_type=kind,
                exception_message="m" * 5000,
            ),
        },
        "acme",
        {},
    )
    for event in events:
        RetryEvent.model_validate(event)
    assert {e["agent"]["name"] for e in events} == {service[:MAX_NAME_CHARS]}
    (failed,) = of(events, "attempt_failed")
    assert failed["dependency"] == provider[:MAX_NAME_CHARS]
    assert failed["error_detail"]["code"] == kind[:MAX_NAME_CHARS]
    assert failed["error_detail"]["message"] == "m" * 2000


def test_an_attempt_starting_with_its_root_comes_after_the_tasks_start() -> None:
    events = mapped(root(), span("1000000000000001", 0, 100))
    assert [e["kind"] for e in events] == [
        "task_started",
        "attempt_started",
        "attempt_succeeded",
        "task_finished",
    ]


def test_a_request_without_a_resend_count_is_a_first_send() -> None:
    chat = span("3000000000000000", 10, 800)
    events = mapped(
        root(),
        chat,
        http("1000000000000003", chat.span_id, 20, 100, 500),
        http("1000000000000001", chat.span_id, 20, 100, 500, **{"http.request.resend_count": 1}),
        http("1000000000000002", chat.span_id, 20, 100, 200, **{"http.request.resend_count": 0}),
    )
    assert [s for s, _, _ in attempts(events)] == [
        "1000000000000002",
        "1000000000000003",
        "1000000000000001",
    ]


def test_the_provider_is_named_before_the_system_and_the_system_before_the_server() -> None:
    both = {"gen_ai.system": "anthropic", "server.address": "api.example.com"}
    all_three = {**both, "gen_ai.provider.name": "aws.bedrock"}
    (ok,) = of(mapped(root(), span("1000000000000001", 10, 100, attrs=both)), "attempt_succeeded")
    assert ok["dependency"] == "anthropic"
    (ok,) = of(
        mapped(root(), span("1000000000000001", 10, 100, attrs=all_three)), "attempt_succeeded"
    )
    assert ok["dependency"] == "aws.bedrock"


def test_the_cost_is_rounded_to_nine_decimals() -> None:
    attrs = {"gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 7}
    events = mapped(
        root(), span("1000000000000001", 10, 100, attrs=attrs), prices={"m": (0.1234567, 0)}
    )
    (ok,) = of(events, "attempt_succeeded")
    assert ok["cost_usd"] == 8.64e-07  # 7 × 0.1234567 / 1e6 = 8.641969e-07
    assert (ok["tokens_in"], ok["tokens_out"]) == (7, 0)  # no output count said: none


def test_an_attempt_clocked_before_its_root_still_comes_after_the_tasks_start() -> None:
    events = mapped(root(), span("1000000000000001", -5, 100))  # skew between processes
    assert [e["kind"] for e in events] == [
        "task_started",
        "attempt_started",
        "attempt_succeeded",
        "task_finished",
    ]


def test_the_gap_between_two_requests_of_an_operation_is_the_backoff() -> None:
    chat = span("3000000000000000", 10, 800)
    events = mapped(
        root(),
        chat,
        http("1000000000000001", chat.span_id, 20, 100, 429),
        http("1000000000000002", chat.span_id, 300, 380, 500),
        http("1000000000000003", chat.span_id, 600, 790, 200),
    )
    decisions = of(events, "decision")
    assert [(e["decision"], e["backoff_ms"]) for e in decisions] == [
        ("retry_backoff", 200),
        ("retry_backoff", 220),
    ]


def test_a_long_task_and_attempt_are_measured_to_the_millisecond() -> None:
    hour = 3_600_000
    events = mapped(root(end=hour + 1), span("1000000000000001", 1, hour))
    (ok,) = of(events, "attempt_succeeded")
    assert (ok["latency_ms"], events[-1]["latency_ms"]) == (hour - 1, hour + 1)
