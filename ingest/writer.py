"""Writes one batch of rows to the store as one deduplicated insert."""

from __future__ import annotations

import time

from retrylens.store import EventStore

from . import metrics
from .batch import Batch


class BatchWriter:
    def __init__(self, store: EventStore) -> None:
        self._store = store

    def write(self, batch: Batch) -> int:
        """Insert the batch's rows; returns when ClickHouse has them (or raises)."""
        if not batch.rows:
            return 0
        started = time.perf_counter()
        self._store.insert_rows(batch.rows, dedup_token=batch.dedup_token())
        metrics.INSERT_SECONDS.observe(time.perf_counter() - started)
        metrics.ROWS_INSERTED.inc(len(batch.rows))
        return len(batch.rows)
