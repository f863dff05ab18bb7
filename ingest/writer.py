"""Writes one batch to the store as one deduplicated insert, and measures it.

The decode step hands over each valid event as one JSON line
(:mod:`retrylens.store.event_lines`); ClickHouse parses them in C++ and derives the rows
in the insert's ``SELECT`` (the insert runs on the chain's helper thread and releases the
GIL). The insert is kept atomic — one format, no parallel parsing, one block — so a
rejected batch has stored nothing. Python validation already decided which messages are
valid, so a rejection
means the two encodings disagree on some value: the writer then re-judges the batch's
raw messages with :func:`~.processor.process` and inserts the same valid rows as a Native
block, under the same deduplication token (nothing is lost, nothing is stored twice).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from clickhouse_connect.driver.binding import format_str
from clickhouse_connect.driver.exceptions import ClickHouseError

from retrylens.store import EventStore
from retrylens.store.event_lines import LINE_STRUCTURE_SQL, lines_select
from retrylens.store.event_table import JSON_INSERT_COLUMN_NAMES
from retrylens.store.native_block import encode_native

from . import metrics
from .batch import Batch
from .encoder import bound
from .processor import InvalidMessage, SourceRef, ValidEvent, process

log = logging.getLogger(__name__)
LINE_FORMAT = "JSONEachRow"


def insert_event_lines(store: EventStore, blocks: Sequence[bytes], *, rows: int, dedup_token: str | None) -> None:
    """One atomic INSERT of event lines (:func:`~retrylens.store.event_lines.append_event_line`).

    ``INSERT INTO events SELECT … FROM input(…)`` on a ClickHouse server; in chDB, whose
    insert path wants a file anyway, ``… FROM file(…)`` over a temporary file.
    """
    body = b"".join(blocks)
    if not body:
        return
    one_block = max(rows, 1) + 1
    settings: dict[str, Any] = {
        "optimize_on_insert": 0,  # re-sent events collapse in merges and FINAL reads
        # What makes the insert all-or-nothing: one block, read by one thread, never split.
        "input_format_parallel_parsing": 0,
        "max_threads": 1,
        "max_block_size": one_block,
        "max_insert_block_size": one_block,
        "min_insert_block_size_rows": one_block,
        "min_insert_block_size_bytes": 0,
        # Nested parts are read as their JSON text (what the text columns store).
        "input_format_json_read_objects_as_strings": 1,
        "input_format_json_read_arrays_as_strings": 1,
        "input_format_skip_unknown_fields": 0,
        "input_format_null_as_default": 0,
        # RFC 3339 timestamps and shortest-repr floats: read them exactly.
        "date_time_input_format": "best_effort",
        "precise_float_parsing": 1,
    }
    if dedup_token:
        settings["insert_deduplication_token"] = dedup_token
    if store.ctx.cluster:
        settings["insert_distributed_sync"] = 1
    target = f"{store.events_table} ({', '.join(f'`{name}`' for name in JSON_INSERT_COLUMN_NAMES)})"
    if not store.client_is_embedded:
        store.client.raw_insert(
            f"{target} {lines_select(f'input({LINE_STRUCTURE_SQL})')}",
            None,
            insert_block=body,
            fmt=LINE_FORMAT,
            settings=settings,
        )
        return
    with tempfile.NamedTemporaryFile(prefix="retrylens-insert-", suffix=".jsonl") as lines:
        lines.write(body)
        lines.flush()
        source = f"file({format_str(lines.name)}, {format_str(LINE_FORMAT)}, {LINE_STRUCTURE_SQL})"
        clause = ", ".join(f"{name} = {_sql_value(value)}" for name, value in settings.items())
        store.client.command(f"INSERT INTO {target} {lines_select(source)} SETTINGS {clause}")


def _sql_value(value: Any) -> str:
    return str(value) if isinstance(value, int) else format_str(str(value))


def native_rows(batch: Batch) -> list[list[Any]]:
    """The batch's valid rows, re-judged from its raw messages (the fallback's input)."""
    rows = []
    for chunk in batch.chunks:
        for offset, value in zip(chunk.offsets, chunk.values, strict=True):
            source = SourceRef(chunk.topic, chunk.partition, offset)
            outcome = process(value, source)
            if isinstance(outcome, ValidEvent) and chunk.projects is not None:
                if isinstance(bound(outcome.event, source, chunk.projects), InvalidMessage):
                    continue  # dead-lettered by the tenant binding when the chunk was encoded
            if isinstance(outcome, ValidEvent):
                rows.append(outcome.row)
    return rows


class BatchWriter:
    def __init__(self, store: EventStore) -> None:
        self._store = store
        #: Seconds the last insert took (the status report's insert latency).
        self.last_insert_s = 0.0
        #: Batches ClickHouse rejected as event lines and that went in as Native blocks.
        self.fallbacks = 0

    def write(self, batch: Batch) -> int:
        """Insert the batch's rows in one INSERT; returns when ClickHouse has them (or raises)."""
        count = batch.row_count
        if not count:
            return 0
        started = time.perf_counter()
        token = batch.dedup_token()
        try:
            insert_event_lines(self._store, batch.blocks, rows=count, dedup_token=token)
        except ClickHouseError as exc:
            log.warning("ClickHouse rejected a batch of event lines (%s); inserting it as Native rows", exc)
            rows = native_rows(batch)
            if len(rows) != count:  # the verdicts are pure: this cannot differ
                raise
            self._store.insert_native([encode_native(rows)], dedup_token=token)
            self.fallbacks += 1
            metrics.INSERT_FALLBACKS.inc()
        self.last_insert_s = time.perf_counter() - started
        metrics.INSERT_SECONDS.observe(self.last_insert_s)
        metrics.ROWS_INSERTED.inc(count)
        metrics.BATCH_ROWS.observe(count)
        metrics.BATCH_BYTES.observe(batch.payload_bytes)
        return count
