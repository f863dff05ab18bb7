"""Payload → row, or an invalid message with a reason. Pure: no I/O, no clock but the row's.

The consumer, the embedded spool ingestor, HTTP ingestion and the naive benchmark all
call :func:`process`, so an event is judged the same way whichever road it took.
Processing the same payload twice gives the same verdict and the same row (replay
idempotency). That includes an event sent without an ``event_id``: its id is derived from
its canonical content (see :func:`derived_event_id`), never invented at random, so a
re-sent event collapses into one row on every road.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import msgspec
import orjson
from pydantic import BaseModel, ValidationError

from retrylens.schemas import MAX_EVENT_BYTES, SCHEMA_VERSION, RetryEvent
from retrylens.schemas.wire import WireEvent, decode_wire
from retrylens.store.event_table import event_row

from .redaction import redact_event_text


class InvalidReason(StrEnum):
    """Why a message went to the dead-letter topic (the ``reason`` header)."""

    EMPTY = "empty"
    OVERSIZED = "oversized"
    NOT_UTF8 = "not_utf8"
    BAD_JSON = "bad_json"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_SCHEMA_VERSION = "missing_schema_version"
    UNKNOWN_SCHEMA_VERSION = "unknown_schema_version"
    INVALID_FIELDS = "invalid_fields"
    PROJECT_NOT_BOUND_TO_TOPIC = "project_not_bound_to_topic"  # ingest/binding.py


@dataclass(frozen=True, slots=True)
class SourceRef:
    """Where a payload was read: a Kafka topic/partition/offset or a spool position."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class ValidEvent:
    event: RetryEvent | WireEvent  # same attributes either way
    row: list[Any]
    source: SourceRef


@dataclass(frozen=True, slots=True)
class InvalidMessage:
    reason: InvalidReason
    detail: str
    source: SourceRef


MAX_DETAIL_CHARS = 1000
_SCHEMA_VERSION_KEY = b'"schema_version"'
_EVENT_ID_KEY = b'"event_id"'
#: Namespace of derived event ids (a UUID v5 over the canonical payload).
EVENT_ID_NAMESPACE = uuid.UUID("5b1f0c3e-7a52-4d0e-9a51-2f6f1d0c8e14")


class _TopLevelId(msgspec.Struct):
    event_id: Any = msgspec.UNSET


_TOP_LEVEL_ID = msgspec.json.Decoder(_TopLevelId)


def derived_event_id(payload: bytes) -> uuid.UUID:
    """The id of an event sent without one: UUID v5 of its canonical JSON (sorted keys, no
    whitespace), so the same event re-sent — through Kafka, HTTP or the spool, however its
    serializer spaced or ordered it — gets the same id and is stored once."""
    canonical = orjson.dumps(orjson.loads(payload), option=orjson.OPT_SORT_KEYS)
    digest = hashlib.sha1(EVENT_ID_NAMESPACE.bytes + canonical).digest()
    return uuid.UUID(bytes=digest[:16], version=5)


def _sent_without_event_id(payload: bytes) -> bool:
    if _EVENT_ID_KEY not in payload:  # cheap and certain
        return True
    # The key may belong to a nested object only: ask a decoder that reads the top level.
    return _TOP_LEVEL_ID.decode(payload).event_id is msgspec.UNSET


def process(payload: bytes | None, source: SourceRef) -> ValidEvent | InvalidMessage:
    """Validate one serialized event and build its row."""
    event = validate(payload, source)
    if isinstance(event, InvalidMessage):
        return event
    row = event_row(event, topic=source.topic, partition=source.partition, offset=source.offset)
    return ValidEvent(event, row, source)


def validate(
    payload: bytes | None, source: SourceRef, *, redacted: bool = True
) -> RetryEvent | WireEvent | InvalidMessage:
    """The verdict on one serialized event: the event (its id derived if it was sent
    without one, its free text cleaned of secrets: :mod:`.redaction`), or why it is
    invalid. Every road's row is built from what this returns. ``redacted=False`` gives the
    event as sent, for a caller that redacts it itself and must know whether that changed it."""
    event = _validated(payload, source)
    if not redacted or isinstance(event, InvalidMessage):
        return event
    return redact_event_text(event)


def _validated(payload: bytes | None, source: SourceRef) -> RetryEvent | WireEvent | InvalidMessage:
    if not payload:
        return InvalidMessage(InvalidReason.EMPTY, "empty payload", source)
    if len(payload) > MAX_EVENT_BYTES:
        return InvalidMessage(
            InvalidReason.OVERSIZED, f"{len(payload)} bytes > limit {MAX_EVENT_BYTES}", source
        )
    # The fast decoder accepts only what pydantic accepts; anything else (lax input, errors)
    # is judged by the pydantic model, which also words the dead-letter reason.
    event: RetryEvent | WireEvent | None = decode_wire(payload, fill_event_id=False)
    if event is None:
        try:
            event = RetryEvent.model_validate_json(payload)
        except ValidationError as exc:
            return _invalid(payload, exc, source)
        sent_without_id = _sent_without_event_id(payload)
    else:
        sent_without_id = event.event_id is msgspec.UNSET
    if _SCHEMA_VERSION_KEY not in payload:
        return InvalidMessage(
            InvalidReason.MISSING_SCHEMA_VERSION,
            f"schema_version is required on the wire (current: {SCHEMA_VERSION})",
            source,
        )
    if sent_without_id:
        event = _with_event_id(event, derived_event_id(payload))
    return event


def _with_event_id(event: RetryEvent | WireEvent, event_id: uuid.UUID) -> RetryEvent | WireEvent:
    if isinstance(event, BaseModel):
        return event.model_copy(update={"event_id": event_id})
    return msgspec.structs.replace(event, event_id=event_id)


def _invalid(payload: bytes, exc: ValidationError, source: SourceRef) -> InvalidMessage:
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    if first["type"] == "json_invalid":
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError as decode_error:
            return InvalidMessage(
                InvalidReason.NOT_UTF8, str(decode_error)[:MAX_DETAIL_CHARS], source
            )
        return InvalidMessage(InvalidReason.BAD_JSON, first["msg"][:MAX_DETAIL_CHARS], source)
    if first["type"] in {"model_type", "model_attributes_type"} and not first["loc"]:
        return InvalidMessage(InvalidReason.NOT_AN_OBJECT, first["msg"], source)
    for error in errors:
        if error["loc"] == ("schema_version",) and error["type"] == "literal_error":
            return InvalidMessage(
                InvalidReason.UNKNOWN_SCHEMA_VERSION,
                f"schema_version not supported: this consumer reads version {SCHEMA_VERSION}",
                source,
            )
    detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(event)'}: {e['msg']}" for e in errors)
    return InvalidMessage(InvalidReason.INVALID_FIELDS, detail[:MAX_DETAIL_CHARS], source)
