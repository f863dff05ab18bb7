"""A batch of decoded chunks, bounded by size and age, and its deduplication token.

Every ClickHouse insert makes a part, so rows are gathered into batches of thousands.
The batch remembers the first and last offset it read from each partition: those spans
name the batch (the insert deduplication token). It also keeps, per partition, the
source position after its last message (what the commit step hands back to the source)
and each chunk's verdicts in order (what the dead-letter policy judges).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .encoder import EncodedChunk, RawChunk
from .processor import InvalidMessage, InvalidReason


@dataclass
class Batch:
    max_rows: int
    max_seconds: float
    clock: Callable[[], float] = time.monotonic
    #: Row blocks (JSON lines) encoded by the decode step, and the rows they hold.
    blocks: list[bytes] = field(default_factory=list)
    #: The chunks as read: what the writer re-judges if ClickHouse rejects the rows.
    chunks: list[RawChunk] = field(default_factory=list)
    row_count: int = 0
    messages: int = 0
    payload_bytes: int = 0
    invalid: list[tuple[InvalidMessage, bytes | None, bytes | None]] = field(default_factory=list)
    #: Per chunk, in order: (topic, partition, offsets, indices of the invalid ones,
    #: indices of those the tenant binding refused — valid events on the wrong topic).
    verdicts: list[tuple[str, int, list[int], list[int], frozenset[int]]] = field(default_factory=list)
    spans: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    positions: dict[tuple[str, int], Any] = field(default_factory=dict)
    started_at: float | None = None

    def add(self, raw: RawChunk, encoded: EncodedChunk) -> None:
        """Add one decoded chunk (its messages must follow what the batch holds of its partition)."""
        if not raw.offsets:
            return
        if self.started_at is None:
            self.started_at = self.clock()
        if encoded.rows:
            self.blocks.append(encoded.block)
            self.row_count += encoded.rows
        self.chunks.append(raw)
        self.messages += len(raw.offsets)
        self.payload_bytes += raw.payload_bytes
        for index, message in encoded.invalid:
            self.invalid.append((message, raw.keys[index], raw.values[index]))
        refused = frozenset(
            index for index, message in encoded.invalid if message.reason is InvalidReason.PROJECT_NOT_BOUND_TO_TOPIC
        )
        self.verdicts.append((raw.topic, raw.partition, raw.offsets, [index for index, _ in encoded.invalid], refused))
        slot = (raw.topic, raw.partition)
        known = self.spans.get(slot)
        first, last = raw.offsets[0], raw.offsets[-1]
        self.spans[slot] = (first, last) if known is None else (min(known[0], first), max(known[1], last))
        self.positions[slot] = raw.commit_to

    @property
    def size(self) -> int:
        return self.messages

    def is_empty(self) -> bool:
        return not self.spans

    def is_due(self) -> bool:
        if self.is_empty():
            return False
        return self.messages >= self.max_rows or self.clock() - (self.started_at or 0) >= self.max_seconds

    def seconds_left(self) -> float:
        if self.started_at is None:
            return self.max_seconds
        return max(0.0, self.max_seconds - (self.clock() - self.started_at))

    def dedup_token(self) -> str:
        """Same partitions and offset spans → same token, so a replayed insert is a no-op."""
        return dedup_token(self.spans)


def dedup_token(spans: dict[tuple[str, int], tuple[int, int]]) -> str:
    text = ";".join(f"{t}:{p}:{first}-{last}" for (t, p), (first, last) in sorted(spans.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:40]
