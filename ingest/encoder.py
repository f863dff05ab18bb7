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

from .processor import InvalidMessage, SourceRef, ValidEvent, process


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


def encode_chunk(topic: str, partition: int, offsets: Sequence[int], values: Sequence[bytes | None]) -> EncodedChunk:
    rows = []
    invalid: list[tuple[int, InvalidMessage]] = []
    for index, (offset, value) in enumerate(zip(offsets, values, strict=True)):
        outcome = process(value, SourceRef(topic, partition, offset))
        if isinstance(outcome, ValidEvent):
            rows.append(outcome.row)
        else:
            invalid.append((index, outcome))
    return EncodedChunk(len(rows), encode_native(rows), invalid)


def encode_raw(raw: RawChunk) -> EncodedChunk:
    return encode_chunk(raw.topic, raw.partition, raw.offsets, raw.values)
