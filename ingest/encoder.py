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
