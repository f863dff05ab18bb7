"""What the processor promises every road, pinned at its verdicts (issue 25, mutation testing).

The verdict is what gets stored (the row, its event id) or dead-lettered (the reason and
its detail), so these read the verdict itself: an event sent without an id gets one id
however it is sent and whichever decoder judged it, and a dead letter carries the reason
a reader can act on.
"""

from __future__ import annotations

import uuid

import orjson
from factories import payload

from retrylens.ingest.processor import (
    MAX_DETAIL_CHARS,
    InvalidMessage,
    InvalidReason,
    SourceRef,
    ValidEvent,
    derived_event_id,
    process,
)
from retrylens.schemas import MAX_EVENT_BYTES

SOURCE = SourceRef("events", 2, 40)


def _body(**overrides: object) -> dict:
    body = orjson.loads(payload(**overrides))
    del body["event_id"]
    return body


def _stored_id(raw: bytes, source: SourceRef = SOURCE) -> uuid.UUID:
    outcome = process(raw, source)
    assert isinstance(outcome, ValidEvent), outcome
    return uuid.UUID(str(outcome.row[0]))


def _verdict(raw: bytes) -> InvalidMessage:
    outcome = process(raw, SOURCE)
    assert isinstance(outcome, InvalidMessage), outcome
    return outcome


def test_a_lax_event_sent_without_an_id_gets_the_same_id_every_time() -> None:
    """Input the fast decoder leaves to pydantic (an attempt number as text) takes the
    other road through validation; re-sent, it must still collapse into one row."""
    raw = orjson.dumps(_body(attempt="3"))
    assert _stored_id(raw) == _stored_id(raw, SourceRef("spool:agent", 0, 7))
    assert _stored_id(raw) == derived_event_id(raw)
    spaced = orjson.dumps(
        dict(reversed(list(orjson.loads(raw).items()))), option=orjson.OPT_INDENT_2
    )
    assert _stored_id(spaced) == _stored_id(raw)


def test_a_lax_event_with_an_event_id_only_in_a_nested_part_gets_a_derived_id() -> None:
    raw = orjson.dumps(_body(attempt="3", input_features={"event_id": 1.0}))
    assert _stored_id(raw) == _stored_id(raw) == derived_event_id(raw)


def test_a_lax_event_keeps_the_id_it_was_sent_with() -> None:
    sent = uuid.uuid4()
    raw = orjson.dumps(_body(attempt="3") | {"event_id": str(sent)})
    assert _stored_id(raw) == sent


def test_a_derived_id_is_the_same_in_every_release() -> None:
    """An event re-sent after an upgrade must get the id it got before, or it is stored
    twice: the derivation (UUID v5 of the canonical JSON) is pinned to a known value."""
    raw = b'{"b": [1, 2.5, "x"], "a": {"d": null, "c": true}}'
    assert derived_event_id(raw) == uuid.UUID("ff6e2887-6cda-5c3e-a892-ff0734e9e59d")
    assert derived_event_id(raw).version == 5
    assert derived_event_id(b'{"a":{"c":true,"d":null},"b":[1,2.5,"x"]}') == derived_event_id(raw)


def test_the_size_limit_is_inclusive() -> None:
    at_limit = b"{" + b" " * (MAX_EVENT_BYTES - 1)
    assert _verdict(at_limit).reason is InvalidReason.BAD_JSON
    over = _verdict(at_limit + b" ")
    assert over.reason is InvalidReason.OVERSIZED
    assert over.detail == f"{MAX_EVENT_BYTES + 1} bytes > limit {MAX_EVENT_BYTES}"


def test_an_unknown_schema_version_is_named_even_when_another_field_is_also_wrong() -> None:
    letter = _verdict(payload(schema_version=2, attempt="three"))
    assert letter.reason is InvalidReason.UNKNOWN_SCHEMA_VERSION
    assert "version 1" in letter.detail and letter.source == SOURCE


def test_invalid_fields_are_each_named_with_their_path_and_cut_to_the_detail_limit() -> None:
    letter = _verdict(payload(attempt="three", agent={"name": 5, "role": "planning"}))
    assert letter.reason is InvalidReason.INVALID_FIELDS
    assert letter.detail == (
        "agent.name: Input should be a valid string; "
        "attempt: Input should be a valid integer, unable to parse string as an integer"
    )
    many = _verdict(payload(**{f"unknown_{i}": i for i in range(200)}))
    assert many.reason is InvalidReason.INVALID_FIELDS and len(many.detail) == MAX_DETAIL_CHARS


def test_an_error_about_the_whole_event_is_named_as_such() -> None:
    letter = _verdict(payload(kind="attempt_failed"))  # attempt_failed without an error_type
    assert letter.reason is InvalidReason.INVALID_FIELDS
    assert letter.detail.startswith("(event): ")


def test_a_dead_letter_for_bytes_that_are_not_utf8_or_json_says_where() -> None:
    letter = _verdict(b'{"a": "\xff' + b"x" * 3000)
    assert letter.reason is InvalidReason.NOT_UTF8 and "0xff" in letter.detail
    bad = _verdict(b'{"a": ' + b"[" * 3000)
    assert bad.reason is InvalidReason.BAD_JSON and 0 < len(bad.detail) <= MAX_DETAIL_CHARS


def test_a_json_value_that_is_not_an_object_is_named_so_and_an_object_missing_fields_is_not() -> (
    None
):
    for raw in (b"[]", b"12", b"null", b"true"):
        assert _verdict(raw).reason is InvalidReason.NOT_AN_OBJECT, raw
    assert _verdict(b"{}").reason is InvalidReason.INVALID_FIELDS
