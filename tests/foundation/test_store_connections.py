"""A connection apart (``open_store(apart=True)``): its calls never hold the shared one's, and
inserting on one while reading on the other is safe on the real engine (chDB)."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from retrylens.config import Settings
from retrylens.store import EventStore, open_store
from retrylens.store.events import BACKGROUND_INSERT_NICENESS

pytestmark = pytest.mark.clickhouse

#: a call that holds its connection this long (ClickHouse's ``sleepEachRow``, 3 rows)
HOLD_S = 1.2


def _hold(store: EventStore, started: threading.Event) -> None:
    started.set()
    store.client.query("SELECT sleepEachRow(0.4) FROM numbers(3)")


def _read_while_held(holder: EventStore, reader: EventStore) -> float:
    started = threading.Event()
    thread = threading.Thread(target=_hold, args=(holder, started))
    thread.start()
    started.wait()
    time.sleep(0.2)  # the hold is under way
    begun = time.perf_counter()
    reader.count_distinct_events("acme")
    waited = time.perf_counter() - begun
    thread.join()
    return waited


def test_a_read_on_the_shared_connection_does_not_wait_for_a_call_on_one_apart(settings: Settings,
                                                                              store: EventStore) -> None:
    apart = open_store(settings, migrate=False, apart=True)
    try:
        assert apart.client is not store.client
        assert _read_while_held(apart, store) < HOLD_S / 2
        # the contrast that makes the test mean something: on one connection the read waits
        assert _read_while_held(store, store) > HOLD_S / 2
    finally:
        apart.client.close()


def test_inserts_apart_and_exact_reads_side_by_side_lose_and_double_nothing(settings: Settings,
                                                                           store: EventStore) -> None:
    from retrylens.analytics.synthetic import synthetic_events
    from retrylens.store.event_table import event_row

    events = synthetic_events(12, seed=5, project="acme")
    batches = [events[i:i + 40] for i in range(0, len(events), 40)]
    apart = open_store(settings, migrate=False, apart=True)
    seen: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                seen.append(store.count_distinct_events("acme"))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for reader in readers:
        reader.start()
    try:
        offset = 0
        for batch in batches * 2:  # each batch twice: the second copy must collapse on the exact read
            apart.insert_rows([event_row(e, topic="t", partition=0, offset=offset + i) for i, e in enumerate(batch)])
            offset += len(batch)
    finally:
        done.set()
        for reader in readers:
            reader.join()
        apart.client.close()
    assert errors == []
    assert seen and max(seen) <= len(events)
    assert store.count_distinct_events("acme") == len(events)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness is Linux's")
def test_inserts_apart_run_on_engine_threads_below_the_api_and_leave_the_caller_as_it_was(
        settings: Settings, store: EventStore) -> None:
    """The engine runs an insert (its materialized views too) on pooled threads a niced caller does
    not lower: the store apart asks the engine to nice them (``os_thread_priority``), and the
    calling ingest thread keeps its own niceness afterwards (the engine resets it to 0)."""
    from retrylens.analytics.synthetic import synthetic_events
    from retrylens.store.event_table import event_row

    db = settings.clickhouse_database
    store.client.command(f"CREATE TABLE `{db}`.seen_priority (p Int64) ENGINE = Memory")
    store.client.command(f"CREATE MATERIALIZED VIEW `{db}`.seen_priority_mv TO `{db}`.seen_priority AS "
                         f"SELECT toInt64(getSetting('os_thread_priority')) AS p FROM `{db}`.events")
    rows = [event_row(e, topic="t", partition=0, offset=i)
            for i, e in enumerate(synthetic_events(2, seed=3, project="acme"))]
    apart = open_store(settings, migrate=False, apart=True)
    seen: dict[str, int] = {}

    def insert_from_a_niced_thread() -> None:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + 3)
        seen["before"] = os.getpriority(os.PRIO_PROCESS, tid)
        apart.insert_rows(rows[:5])
        seen["after"] = os.getpriority(os.PRIO_PROCESS, tid)

    try:
        worker = threading.Thread(target=insert_from_a_niced_thread)
        worker.start()
        worker.join()
        store.insert_rows(rows[5:10])  # the API's own connection: the engine's default
        priorities = sorted(int(r[0]) for r in store.client.query(f"SELECT p FROM `{db}`.seen_priority").result_rows)
        assert priorities == [0] * 5 + [BACKGROUND_INSERT_NICENESS] * 5
        assert seen["after"] == seen["before"]
    finally:
        apart.client.close()
