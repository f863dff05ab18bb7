"""One partition's run of messages → verdicts and JSON rows: the decode step's job.

Validating and encoding are most of a consumer's CPU. :func:`encode_chunk` does both for
a chunk of consecutive messages with the same pure :func:`~.processor.validate` the HTTP
road uses, and returns only bytes and verdicts, which are cheap to send between
processes. Each valid event becomes one JSON line, the validated struct as msgspec
encodes it plus its position (:mod:`retrylens.store.event_lines`, ~3 µs an event) rather
than a 50-column row built in Python (three times that): ClickHouse parses the lines and
derives the rows in C++, on the insert's helper thread, without holding the GIL, so the
consumer's own core is left to Kafka.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrylens.store.event_lines import append_event_line, line_prefix

from .binding import refusal
from .processor import InvalidMessage, InvalidReason, SourceRef, validate


@dataclass(frozen=True, slots=True)
class RawChunk:
    """Consecutive messages of one source partition as read: a Kafka partition's share of
    a poll, or a run of one spool segment. ``commit_to`` is the source's position after
    the last one (a Kafka offset, a spool position), what the commit step hands back."""

    topic: str
    partition: int
    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    commit_to: Any
    #: Projects this source may carry (tenant binding, :mod:`.binding`); None = any.
    projects: frozenset[str] | None = None

    @property
    def payload_bytes(self) -> int:
        return sum(map(len, filter(None, self.values)))  # once per chunk, over every message


@dataclass(frozen=True, slots=True)
class EncodedChunk:
    """The result for messages ``offsets[0]..offsets[-1]`` of one partition."""

    rows: int
    #: The valid messages as event lines, in order (see :mod:`retrylens.store.event_lines`).
    block: bytes
    #: (index in the chunk, verdict) of each invalid message, in order.
    invalid: list[tuple[int, InvalidMessage]]


def encode_chunk(
    topic: str,
    partition: int,
    offsets: Sequence[int],
    values: Sequence[bytes | None],
    projects: frozenset[str] | None = None,
) -> EncodedChunk:
    block = bytearray()  # every line appended in place, each ending with a newline
    rows = 0
    invalid: list[tuple[int, InvalidMessage]] = []
    prefix = line_prefix(topic, partition)
    # One source for the chunk's valid events (validate reads it only to word a dead
    # letter); an invalid message gets its own offset. This loop runs once per event on
    # the consumer's thread, so it builds nothing per event that a valid one does not need.
    chunk_source = SourceRef(topic, partition, -1)
    for index, (offset, value) in enumerate(zip(offsets, values, strict=True)):
        outcome = validate(value, chunk_source)
        if type(outcome) is InvalidMessage:
            invalid.append((index, InvalidMessage(outcome.reason, outcome.detail, SourceRef(topic, partition, offset))))
            continue
        if projects is not None:  # tenant binding
            outcome = bound(outcome, SourceRef(topic, partition, offset), projects)
            if type(outcome) is InvalidMessage:
                invalid.append((index, outcome))
                continue
        append_event_line(block, outcome, prefix, offset)  # type: ignore[arg-type]
        rows += 1
    # Every line ends with a newline, so the chunks of a batch are simply concatenated.
    return EncodedChunk(rows, bytes(block), invalid)


def bound(event: Any, source: SourceRef, projects: frozenset[str]) -> Any:
    """``event``, or a dead letter if its project may not arrive on its topic."""
    detail = refusal(event.project, source.topic, projects)
    if detail is None:
        return event
    return InvalidMessage(InvalidReason.PROJECT_NOT_BOUND_TO_TOPIC, detail, source)


def encode_raw(raw: RawChunk) -> EncodedChunk:
    return encode_chunk(raw.topic, raw.partition, raw.offsets, raw.values, raw.projects)
