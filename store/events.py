"""The events table as the rest of RetryLens sees it: batch inserts and exact reads.

Reads that must be exact (counts, metrics, a task's story) go through ``FINAL`` so that a
re-sent event that has not been merged away yet is still counted once.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from clickhouse_connect.driver._chdbclient import ChdbClient
from clickhouse_connect.driver.client import Client

from retrylens.config import Settings

from .client import connect, connect_apart
from .event_table import EVENT_COLUMN_NAMES
from .migrations.base import MigrationContext
from .migrator import Migrator, context_from
from .native_block import encode_native
from .sql import query_rows, query_scalar, render


class EventStore:
    """Insert batches of event rows; read them back exactly."""

    def __init__(self, client: Client, ctx: MigrationContext, *, engine_niceness: int = 0) -> None:
        self.client = client
        self.ctx = ctx
        self.database = ctx.database
        self.events_table = f"{ctx.database}.events"
        #: An in-process chDB engine (inserts read files) rather than a ClickHouse server.
        self.client_is_embedded = isinstance(client, ChdbClient)
        #: The niceness of the engine threads that run this store's writes (0: the engine's own).
        #: The calling thread's niceness does not lower them: an embedded insert runs on the engine's
        #: pooled threads (its parsing, materialized views and squashing), which a thread at niceness
        #: 0 started, so a flood's inserts took the CPU from the API's reads at full priority.
        self.engine_niceness = engine_niceness

    def insert_rows(self, rows: Sequence[Sequence[Any]], *, dedup_token: str | None = None) -> None:
        """One INSERT (one part). A repeated ``dedup_token`` within the window is a no-op."""
        if rows:
            self.insert_native([encode_native(rows)], dedup_token=dedup_token)

    def insert_native(self, blocks: Sequence[bytes], *, dedup_token: str | None = None) -> None:
        """One INSERT of already-encoded Native blocks (see :mod:`.native_block`)."""
        body = b"".join(blocks)
        if not body:
            return
        # Collapsing re-sent events is left to merges and FINAL reads, which do it anyway;
        # doing it again while inserting only costs the consumer's core.
        settings: dict[str, Any] = {"optimize_on_insert": 0}
        if dedup_token:
            settings["insert_deduplication_token"] = dedup_token
        if self.ctx.cluster:
            settings["insert_distributed_sync"] = 1
        settings.update(self.write_priority())
        with caller_niceness_kept():
            self.client.raw_insert(
                self.events_table, list(EVENT_COLUMN_NAMES), insert_block=body, fmt="Native", settings=settings
            )

    def write_priority(self) -> dict[str, Any]:
        """The settings that run a write's engine threads at :attr:`engine_niceness` (none at 0);
        a caller passing them runs the call under :func:`caller_niceness_kept`."""
        return {"os_thread_priority": self.engine_niceness} if self.engine_niceness else {}

    def sql(self, template: str) -> str:
        """``template`` with ``[[db]]`` filled in: the one way to name our tables in SQL."""
        return render(template, db=self.database)

    def count_distinct_events(self, project: str | None = None) -> int:
        sql = self.sql("SELECT count() FROM [[db]].events FINAL")
        if project is None:
            return int(query_scalar(self.client, sql))
        return int(
            query_scalar(
                self.client, sql + " WHERE project = {project:String}", {"project": project}
            )
        )

    def count_rows(self) -> int:
        """Physical rows, duplicates included (for tests and diagnostics)."""
        return int(query_scalar(self.client, self.sql("SELECT count() FROM [[db]].events")))

    def task_events(self, project: str, task_id: str) -> list[dict[str, Any]]:
        return query_rows(
            self.client,
            self.sql(
                "SELECT * FROM [[db]].events FINAL WHERE project = {project:String} "
                "AND task_id = {task_id:String} ORDER BY ts, attempt, kafka_offset"
            ),
            {"project": project, "task_id": task_id},
        )

    def event_ids(self) -> set[str]:
        result = self.client.query(
            self.sql("SELECT DISTINCT toString(event_id) FROM [[db]].events")
        )
        return {row[0] for row in result.result_rows}


@contextmanager
def caller_niceness_kept() -> Iterator[None]:
    """Give the calling thread back its niceness after an engine call: a query run with
    ``os_thread_priority`` sets it on every thread that runs it, the caller's included, and
    resets it to 0 (not to what it was) when done, which would leave a caller run under ``nice``
    at full priority afterwards (the server's own threads run at the API's priority, 0 here:
    :mod:`retrylens.ingest.priority`)."""
    if not sys.platform.startswith("linux"):
        yield
        return
    tid = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, tid)
    try:
        yield
    finally:
        if os.getpriority(os.PRIO_PROCESS, tid) != before:
            with suppress(OSError):  # back below 0 needs a privilege the process may not have
                os.setpriority(os.PRIO_PROCESS, tid, before)


#: The niceness of the engine threads that run a background store's inserts
#: (``open_store(apart=True)``): the same as the parse worker's; the threads that call them run Python
#: and stay at the API's priority (:mod:`retrylens.ingest.priority`).
BACKGROUND_INSERT_NICENESS = 10


def open_store(settings: Settings, *, migrate: bool = True, apart: bool = False) -> EventStore:
    """Connect to the configured store and bring its schema up to date.

    ``apart``: on a connection of its own (:func:`.client.connect_apart`), for the server's
    ingest and maintenance threads, so that their work never holds the API's reads; an
    embedded store's inserts on it also run on engine threads at
    :data:`BACKGROUND_INSERT_NICENESS` (a server of its own schedules its own threads)."""
    client = connect_apart(settings) if apart else connect(settings)
    ctx = context_from(settings)
    if migrate:
        Migrator(client, ctx).apply()
    niceness = BACKGROUND_INSERT_NICENESS if apart and settings.effective_dsn.startswith("chdb://") else 0
    return EventStore(client, ctx, engine_niceness=niceness)
