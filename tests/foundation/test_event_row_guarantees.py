"""The row an event is stored as, read column by column (issue 25, mutation testing).

Every road stores :func:`~retrylens.store.event_table.event_row`'s row or one ClickHouse
derives to equal it (``test_ingest_json_rows.py`` holds the two equal), so a wrong column
here is a wrong stored column everywhere. Each optional part is read present and absent:
an absent part stores its column's empty value ("" or 0), never another part's default.
Pure (no store): the processor's verdict on the payload is the row the store receives.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from factories import make_event

from retrylens.ingest.processor import SourceRef, ValidEvent, process
from retrylens.schemas import RetryEvent
from retrylens.store.event_table import EVENT_COLUMN_NAMES, event_row

FULL: dict[str, Any] = {
    "kind": "attempt_failed",
    "parent_task_id": "parent-1",
    "trace_id": "ab" * 16,
    "span_id": "cd" * 8,
    "parent_span_id": "ef" * 8,
    "error_type": "rate_limit",
    "retryable": False,
    "error_detail": {
        "message": "slow down",
        "code": "E429",
        "status": 429,
        "stack_digest": "0f" * 8,
    },
    "input_fingerprint": "12" * 8,
    "input_features": {"steps": 3},
    "context_snapshot": {
        "message_count": 7,
        "token_count": 900,
        "pollution_score": 0.5,
        "trailing_errors": 2,
        "recent_error_share": 0.25,
        "repeated_tool_calls": 4,
    },
    "side_effects": [{"tool": "mailer", "idempotency_key": "mail-1", "status": "committed"}],
    "shadow_decision": "give_up",
    "propensity": 0.5,
    "outcome": "failed",
}
FULL_COLUMNS: dict[str, Any] = {
    "parent_task_id": "parent-1",
    "trace_id": "ab" * 16,
    "span_id": "cd" * 8,
    "parent_span_id": "ef" * 8,
    "error_type": "rate_limit",
    "retryable": False,
    "error_message": "slow down",
    "error_code": "E429",
    "error_status": 429,
    "stack_digest": "0f" * 8,
    "input_fingerprint": "12" * 8,
    "input_features": '{"steps":3}',
    "context_message_count": 7,
    "context_token_count": 900,
    "pollution_score": 0.5,
    "trailing_errors": 2,
    "recent_error_share": 0.25,
    "repeated_tool_calls": 4,
    "side_effect_keys": ["mail-1"],
    "shadow_decision": "give_up",
    "propensity": 0.5,
    "outcome": "failed",
}
#: Every optional part absent: each column's empty value.
BARE_COLUMNS: dict[str, Any] = {
    "parent_task_id": "",
    "trace_id": "",
    "span_id": "",
    "parent_span_id": "",
    "error_type": "",
    "retryable": None,
    "error_message": "",
    "error_code": "",
    "error_status": 0,
    "stack_digest": "",
    "input_fingerprint": "",
    "input_features": "",
    "context_message_count": 0,
    "context_token_count": 0,
    "pollution_score": 0.0,
    "trailing_errors": 0,
    "recent_error_share": 0.0,
    "repeated_tool_calls": 0,
    "context_snapshot": "",
    "side_effects": "",
    "side_effect_keys": [],
    "shadow_decision": "",
    "propensity": None,
    "outcome": "",
}


def _stored(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """The row of one event, as the consumer's processor and as the pydantic model give it."""
    event = make_event(**fields)
    outcome = process(event.to_json_bytes(), SourceRef("t", 2, 40))
    assert isinstance(outcome, ValidEvent)
    model = RetryEvent.model_validate_json(event.to_json_bytes())
    rows = [outcome.row, event_row(model, topic="t", partition=2, offset=40)]
    return [dict(zip(EVENT_COLUMN_NAMES, row, strict=True)) for row in rows]


def test_an_event_with_every_optional_part_stores_each_of_them() -> None:
    for row in _stored(FULL):
        assert {name: row[name] for name in FULL_COLUMNS} == FULL_COLUMNS
        assert orjson.loads(row["context_snapshot"])["repeated_tool_calls"] == 4
        assert orjson.loads(row["side_effects"]) == [
            {"tool": "mailer", "idempotency_key": "mail-1", "status": "committed", "rollback": None}
        ]
        assert (row["kafka_topic"], row["kafka_partition"], row["kafka_offset"]) == ("t", 2, 40)


def test_an_event_without_optional_parts_stores_empty_columns() -> None:
    for row in _stored({}):
        assert {name: row[name] for name in BARE_COLUMNS} == BARE_COLUMNS


@pytest.mark.parametrize(
    "detail",
    [{"message": "boom"}, {"message": "boom", "status": 0, "stack_digest": None}],
    ids=["no-status", "status-0"],
)
def test_an_error_without_status_or_stack_stores_them_empty(detail: dict[str, Any]) -> None:
    for row in _stored({"kind": "attempt_failed", "error_type": "timeout", "error_detail": detail}):
        assert (row["error_message"], row["error_status"], row["stack_digest"]) == ("boom", 0, "")


def test_a_context_with_only_its_counts_stores_zero_scores() -> None:
    for row in _stored({"context_snapshot": {"message_count": 0}}):
        assert row["context_snapshot"] != ""  # present, though every figure is zero
        assert (
            row["context_message_count"],
            row["context_token_count"],
            row["pollution_score"],
            row["trailing_errors"],
            row["recent_error_share"],
            row["repeated_tool_calls"],
        ) == (0, 0, 0.0, 0, 0.0, 0)
