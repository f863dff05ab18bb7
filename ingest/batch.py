"""A batch of processed messages, bounded by count and age, and its deduplication token.

Every ClickHouse insert makes a part, so rows are gathered into batches of thousands.
The batch remembers the first and last offset it read from each partition: those spans
name the batch (the insert deduplication token) and are what gets committed after the
insert.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .processor import InvalidMessage, ValidEvent


@dataclass
class Batch:
    max_rows: int
    max_seconds: float
    clock: Callable[[], float] = time.monotonic
    rows: list[list[Any]] = field(default_factory=list)
    #: Native blocks encoded by ingest workers, and the rows they hold.
    blocks: list[bytes] = field(default_factory=list)
    block_rows: int = 0
    invalid: list[tuple[InvalidMessage, bytes | None, bytes | None]] = field(default_factory=list)
    spans: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    started_at: float | None = None

    def add(
        self,
        outcome: ValidEvent | InvalidMessage,
        *,
        key: bytes | None,
        value: bytes | None,
        span: bool = True,
    ) -> None:
        """Add one processed message; ``span=False`` when the caller covers a run of them with :meth:`cover`."""
        if self.started_at is None:
            self.started_at = self.clock()
        if isinstance(outcome, ValidEvent):
            self.rows.append(outcome.row)
        else:
            self.invalid.append((outcome, key, value))
        if span:
            source = outcome.source
            self.cover(source.topic, source.partition, source.offset, source.offset)

    def add_block(self, block: bytes, rows: int) -> None:
        if self.started_at is None:
            self.started_at = self.clock()
        if rows:
            self.blocks.append(block)
            self.block_rows += rows

    @property
    def row_count(self) -> int:
        return len(self.rows) + self.block_rows

    def cover(self, topic: str, partition: int, first: int, last: int) -> None:
        """Extend the partition's offset span to include ``first..last``."""
        slot = (topic, partition)
        if self.started_at is None:
            self.started_at = self.clock()
        known = self.spans.get(slot)
        self.spans[slot] = (
            (first, last) if known is None else (min(known[0], first), max(known[1], last))
        )

    @property
    def size(self) -> int:
        return self.row_count + len(self.invalid)

    def is_empty(self) -> bool:
        return not self.spans

    def is_due(self) -> bool:
        if self.is_empty():
            return False
        return self.row_count >= self.max_rows or self.clock() - (self.started_at or 0) >= self.max_seconds

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
