"""The pure processor: payload → row, or an invalid message with its reason."""

from __future__ import annotations

import orjson
import pytest
from factories import make_event, payload

from retrylens.ingest.processor import InvalidMessage, InvalidReason, SourceRef, ValidEvent, process
from retrylens.schemas import MAX_EVENT_BYTES
from retrylens.store.event_table import EVENT_COLUMN_NAMES

SOURCE = SourceRef("events", 3, 1234)


def test_valid_payload_becomes_a_row_that_keeps_its_source() -> None:
    event = make_event(kind="attempt_failed", error_type="rate_limit", retryable=True)
    outcome = process(event.to_json_bytes(), SOURCE)
    assert isinstance(outcome, ValidEvent)
    row = dict(zip(EVENT_COLUMN_NAMES, outcome.row, strict=True))
    assert row["event_id"] == event.event_id
    assert row["error_type"] == "rate_limit"
    assert (row["kafka_topic"], row["kafka_partition"], row["kafka_offset"]) == ("events", 3, 1234)


def test_processing_twice_gives_the_same_row() -> None:
    raw = payload()
    first, second = process(raw, SOURCE), process(raw, SOURCE)
    assert isinstance(first, ValidEvent) and isinstance(second, ValidEvent)
    ingested_at = EVENT_COLUMN_NAMES.index("ingested_at")
    strip = lambda row: row[:ingested_at] + row[ingested_at + 1 :]  # noqa: E731
    assert strip(first.row) == strip(second.row)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", InvalidReason.EMPTY),
        (None, InvalidReason.EMPTY),
        (b"{not json", InvalidReason.BAD_JSON),
        (b"\xff\xfe\x00garbage", InvalidReason.NOT_UTF8),
        (b"[1, 2, 3]", InvalidReason.NOT_AN_OBJECT),
        (b'"just a string"', InvalidReason.NOT_AN_OBJECT),
        (payload(schema_version=2), InvalidReason.UNKNOWN_SCHEMA_VERSION),
        (payload(attempt="three"), InvalidReason.INVALID_FIELDS),
        (payload(kind="exploded"), InvalidReason.INVALID_FIELDS),
        (b"x" * (MAX_EVENT_BYTES + 1), InvalidReason.OVERSIZED),
    ],
    # Fixed ids: the payloads carry random event ids, and test workers must collect the same names.
    ids=["empty", "none", "bad-json", "not-utf8", "array", "string", "schema-v2", "attempt-text",
         "unknown-kind", "oversized"],
)
def test_malformed_payloads_get_their_reason(raw: bytes | None, reason: InvalidReason) -> None:
    outcome = process(raw, SOURCE)
    assert isinstance(outcome, InvalidMessage)
    assert outcome.reason is reason
    assert outcome.detail
    assert outcome.source == SOURCE


def test_missing_fields_are_listed() -> None:
    body = orjson.loads(payload())
    del body["task_id"], body["project"]
    outcome = process(orjson.dumps(body), SOURCE)
    assert isinstance(outcome, InvalidMessage) and outcome.reason is InvalidReason.INVALID_FIELDS
    assert "task_id" in outcome.detail and "project" in outcome.detail


def test_schema_version_is_required_on_the_wire() -> None:
    body = orjson.loads(payload())
    del body["schema_version"]
    outcome = process(orjson.dumps(body), SOURCE)
    assert isinstance(outcome, InvalidMessage) and outcome.reason is InvalidReason.MISSING_SCHEMA_VERSION


def test_a_cost_the_rollups_cannot_hold_is_a_dead_letter_not_a_poison_pill() -> None:
    """The rollup views store nano-dollars in an Int64: a cost the schema accepted but the
    views cannot hold made ClickHouse refuse the whole batch, and the consumer replayed it
    forever. The schema bounds it, so it is one dead letter with its reason."""
    outcome = process(payload(cost_usd=1e10), SourceRef("t", 0, 1))
    assert isinstance(outcome, InvalidMessage)
    assert outcome.reason is InvalidReason.INVALID_FIELDS and "cost_usd" in outcome.detail
    assert isinstance(process(payload(cost_usd=999_999.5), SourceRef("t", 0, 2)), ValidEvent)


@pytest.mark.clickhouse
def test_a_batch_with_a_huge_cost_stores_every_valid_event(store) -> None:
    from retrylens.ingest.batch import Batch
    from retrylens.ingest.encoder import RawChunk, encode_raw
    from retrylens.ingest.writer import BatchWriter

    values = [payload(), payload(cost_usd=1e10), payload(cost_usd=12.5)]
    raw = RawChunk("t", 0, [0, 1, 2], [None] * 3, values, commit_to=3)
    batch = Batch(max_rows=10, max_seconds=1.0)
    encoded = encode_raw(raw)
    batch.add(raw, encoded)
    assert [index for index, _ in encoded.invalid] == [1]
    assert BatchWriter(store).write(batch) == 2
    assert store.count_distinct_events() == 2
