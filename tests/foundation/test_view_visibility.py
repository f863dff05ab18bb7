"""When an insert's rows reach the rollups: the engine fact behind "wait for the writer".

ClickHouse makes an insert's ``events`` rows readable before the rows its materialized views
(the rollup's open set ``metrics_open``, ``metrics_touched``, …) derive from them, and the
INSERT returns only once every view has its rows. So a reader that waits for rows to show in
``events`` and then reads the rollup metrics may read them without those rows (0 tasks where
the exact read gave 20, README "What is not done"); one that waits for the writer to report the
insert (the ingestors' ``rows``) reads rollup metrics equal to the exact ones. This test holds
the engine to that order with a view made slow on purpose, so that the window is wide enough to
see on a loaded machine.
"""

from __future__ import annotations

import threading
import time

import pytest

from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import metrics_summary
from retrylens.analytics.synthetic import synthetic_events
from retrylens.config import Settings
from retrylens.store import EventStore, open_store
from retrylens.store.event_table import event_row

pytestmark = [pytest.mark.clickhouse, pytest.mark.slow]

#: how long the slow view holds the insert (``sleepEachRow`` on its one row)
HOLD_S = 1.5


def test_events_rows_are_readable_before_their_views_rows_and_the_insert_returns_after(
    settings: Settings, store: EventStore
) -> None:
    db = store.database
    store.client.command(f"CREATE TABLE {db}.slow_target (n UInt64) ENGINE = MergeTree ORDER BY n")
    # `sleep` runs once per block: the view holds the insert HOLD_S seconds whatever its size
    store.client.command(
        f"CREATE MATERIALIZED VIEW {db}.slow_mv TO {db}.slow_target AS "
        f"SELECT count() AS n FROM {db}.events WHERE sleep({HOLD_S}) = 0"
    )
    events = synthetic_events(1, seed=3, project="acme")
    rows = [event_row(e, topic="t", partition=0, offset=i) for i, e in enumerate(events)]
    writer = open_store(settings, migrate=False, apart=True)
    returned = threading.Event()

    def insert() -> None:
        writer.insert_rows(rows)
        returned.set()

    thread = threading.Thread(target=insert)
    try:
        thread.start()
        deadline = time.monotonic() + 30
        while store.count_rows() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        # the insert's `events` row is readable while its views are still running
        assert store.count_rows() == len(rows)
        assert store.client.command(f"SELECT count() FROM {db}.slow_target") == 0
        assert not returned.is_set()
        thread.join(timeout=60)
        # once the insert has returned, every view has its rows: rollup = exact
        assert store.client.command(f"SELECT count() FROM {db}.slow_target") == 1
        assert store.client.command(f"SELECT count() FROM {db}.metrics_touched") >= 1
        where = Slice(project="acme")
        assert metrics_summary(store, where).tasks == metrics_summary(store, where, source="raw").tasks == 1
    finally:
        thread.join(timeout=60)
        writer.client.close()
