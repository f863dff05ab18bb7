"""One partition's run of messages → verdicts and a Native block: the ingest workers' job.

Validating and encoding are most of a consumer's CPU. :func:`encode_chunk` does both for
a chunk of consecutive messages with the same pure :func:`~.processor.process` the inline
path uses, and returns only bytes and verdicts, which are cheap to send between
processes. Running it on a worker process leaves the consumer's core to Kafka and
ClickHouse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafka.consumer.fetcher import ConsumerRecord

from retrylens.store.native_block import encode_native

from .processor import InvalidMessage, SourceRef, ValidEvent, process


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



def chunk_args(messages: Sequence[ConsumerRecord]) -> tuple[str, int, list[int], list[bytes | None]]:
    """:func:`encode_chunk`'s arguments for one partition's consecutive records from a poll:
    only offsets and values, which is all a worker process needs to be sent."""
    first = messages[0]
    return first.topic, first.partition, [m.offset for m in messages], [m.value for m in messages]


def encode_messages(messages: Sequence[ConsumerRecord]) -> EncodedChunk:
    return encode_chunk(*chunk_args(messages))
