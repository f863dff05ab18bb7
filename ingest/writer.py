"""Writes one batch of rows to the store as one deduplicated insert."""

from __future__ import annotations

import time

from retrylens.store import EventStore
from retrylens.store.native_block import encode_native

from . import metrics
from .batch import Batch


class BatchWriter:
    def __init__(self, store: EventStore) -> None:
        self._store = store

    def write(self, batch: Batch) -> int:
        """Insert the batch's rows in one INSERT; returns when ClickHouse has them (or raises)."""
        count = batch.row_count
        if not count:
            return 0
        started = time.perf_counter()
        blocks = [*batch.blocks, encode_native(batch.rows)] if batch.rows else batch.blocks
        self._store.insert_native(blocks, dedup_token=batch.dedup_token())
        metrics.INSERT_SECONDS.observe(time.perf_counter() - started)
        metrics.ROWS_INSERTED.inc(count)
        return count
