"""One partition's run of messages → verdicts and a Native block: the decode step's job.

Validating and encoding are most of a consumer's CPU. :func:`encode_chunk` does both for
a chunk of consecutive messages with the same pure :func:`~.processor.process` the HTTP
road uses, and returns only bytes and verdicts, which are cheap to send between
processes. Running it on a worker process leaves the consumer's core to Kafka and
ClickHouse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrylens.store.native_block import encode_native

from .binding import refusal
from .processor import InvalidMessage, InvalidReason, SourceRef, ValidEvent, process


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
        return sum(len(value) for value in self.values if value)


@dataclass(frozen=True, slots=True)
class EncodedChunk:
    """The result for messages ``offsets[0]..offsets[-1]`` of one partition."""

    rows: int
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
    rows = []
    invalid: list[tuple[int, InvalidMessage]] = []
    for index, (offset, value) in enumerate(zip(offsets, values, strict=True)):
        outcome = process(value, SourceRef(topic, partition, offset))
        if projects is not None and isinstance(outcome, ValidEvent):  # tenant binding (kafkasec)
            outcome = bound(outcome, projects)
        if isinstance(outcome, ValidEvent):
            rows.append(outcome.row)
        else:
            invalid.append((index, outcome))
    return EncodedChunk(len(rows), encode_native(rows), invalid)


def bound(outcome: ValidEvent, projects: frozenset[str]) -> ValidEvent | InvalidMessage:
    """``outcome``, or a dead letter if its project may not arrive on its topic."""
    detail = refusal(outcome.event.project, outcome.source.topic, projects)
    if detail is None:
        return outcome
    return InvalidMessage(InvalidReason.PROJECT_NOT_BOUND_TO_TOPIC, detail, outcome.source)


def encode_raw(raw: RawChunk) -> EncodedChunk:
    return encode_chunk(raw.topic, raw.partition, raw.offsets, raw.values, raw.projects)
