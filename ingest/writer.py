"""Writes one batch to the store as one deduplicated insert, and measures it."""

from __future__ import annotations

import time

from retrylens.store import EventStore

from . import metrics
from .batch import Batch


class BatchWriter:
    def __init__(self, store: EventStore) -> None:
        self._store = store
        #: Seconds the last insert took (the status report's insert latency).
        self.last_insert_s = 0.0

    def write(self, batch: Batch) -> int:
        """Insert the batch's rows in one INSERT; returns when ClickHouse has them (or raises)."""
        count = batch.row_count
        if not count:
            return 0
        started = time.perf_counter()
        self._store.insert_native(batch.blocks, dedup_token=batch.dedup_token())
        self.last_insert_s = time.perf_counter() - started
        metrics.INSERT_SECONDS.observe(self.last_insert_s)
        metrics.ROWS_INSERTED.inc(count)
        metrics.BATCH_ROWS.observe(count)
        metrics.BATCH_BYTES.observe(batch.payload_bytes)
        return count
