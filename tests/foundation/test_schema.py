"""The retry event v1: what is valid, what is not, and the published JSON Schema."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import jsonschema
import orjson
import pytest
from factories import make_event
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from retrylens.schemas import MAX_EVENT_BYTES, EventTooLargeError, RetryEvent
from retrylens.schemas.export import SCHEMA_FILE, render_json_schema


def test_round_trips_through_json() -> None:
    event = make_event(kind="attempt_failed", error_type="timeout", retryable=True, attempt=2)
    assert RetryEvent.from_json_bytes(event.to_json_bytes()) == event


def test_timestamps_become_utc_milliseconds() -> None:
    local = datetime(2026, 5, 1, 14, 30, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    event = make_event(ts=local)
    assert event.ts.utcoffset() == timedelta(0)
    assert event.ts.hour == 12 and event.ts.microsecond == 123000


def test_default_timestamp_has_millisecond_resolution() -> None:
    event = RetryEvent(project="p", agent={"name": "a"}, task_id="t", correlation_id="c", kind="task_started")
    assert event.ts.microsecond % 1000 == 0


def test_naive_timestamp_is_rejected() -> None:
    with pytest.raises(ValidationError, match="timezone"):
        make_event(ts=datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"kind": "attempt_failed"}, "error_type"),
        ({"kind": "task_finished"}, "outcome"),
        ({"shadow": True}, "shadow_decision"),
        ({"error_type": "flaky"}, "error_type"),
        ({"decision": "retry_forever"}, "decision"),
        ({"trace_id": "XYZ"}, "trace_id"),
        ({"span_id": "0" * 15}, "span_id"),
        ({"attempt": -1}, "attempt"),
        ({"cost_usd": float("nan")}, "cost_usd"),
        ({"task_id": ""}, "task_id"),
        ({"unexpected": 1}, "unexpected"),
        ({"input_features": {f"f{i}": i for i in range(65)}}, "input_features"),
    ],
)
def test_invalid_fields_are_named(overrides: dict, fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        make_event(**overrides)


def test_oversized_event_is_refused_with_the_reason() -> None:
    event = make_event(
        kind="attempt_failed",
        error_type="tool_error",
        input_features={f"k{i}": "x" * 256 for i in range(64)},
        decision_reason="y" * 512,
        error_detail={"message": "z" * 2048},
        context_snapshot={
            "message_count": 5,
            "last_messages": [{"role": "user", "content": "\U0001F600" * 2000}] * 5,
            "message_digests": ["ab" * 32] * 256,
        },
    )
    with pytest.raises(EventTooLargeError, match=str(MAX_EVENT_BYTES)):
        event.to_json_bytes()


def test_published_schema_file_matches_the_model() -> None:
    assert SCHEMA_FILE.read_bytes() == render_json_schema(), "run `retrylens schema export`"


def test_serialized_events_validate_against_the_published_schema() -> None:
    schema = orjson.loads(SCHEMA_FILE.read_bytes())
    event = make_event(kind="decision", decision="retry_backoff", backoff_ms=800, trace_id="a" * 32)
    jsonschema.validate(orjson.loads(event.to_json_bytes()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**orjson.loads(event.to_json_bytes()), "decision": "nope"}, schema)


_ids = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x2FFF), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(project=_ids, task_id=_ids, attempt=st.integers(0, 10_000), tokens=st.integers(0, 2**31))
def test_any_valid_event_round_trips(project: str, task_id: str, attempt: int, tokens: int) -> None:
    event = make_event(project=project, task_id=task_id, attempt=attempt, tokens_in=tokens)
    assert RetryEvent.from_json_bytes(event.to_json_bytes()) == event
