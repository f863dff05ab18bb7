"""The pre-check log: every answered pre-check is stored, in few inserts, and none is lost at shutdown.

An insert into the store costs ~17 ms of CPU whatever its size (10 rows or 500), so the log
batches several seconds of pre-checks per insert; the API's reads flush it first, and the
app's shutdown writes what is left.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest
from apitest_support import ACME
from fastapi.testclient import TestClient

from retrylens.analytics.prechecks import PrecheckRow
from retrylens.api.app import create_app
from retrylens.api.precheck_log import PrecheckLog
from retrylens.store.sql import query_scalar

pytestmark = pytest.mark.clickhouse


def _row() -> PrecheckRow:
    return PrecheckRow(precheck_id=uuid.uuid4().hex, ts=datetime.now(UTC), project="acme", agent="planner",
                       task_id="", input_fingerprint="f" * 16, risk=0.2, model_version="none", known_bad=False,
                       advice=(), explanation={"top_features": []})


def _stored(store, ids: list[str] | None = None) -> int:
    sql = store.sql("SELECT count() FROM [[db]].prechecks FINAL" +
                    (" WHERE precheck_id IN {ids:Array(String)}" if ids is not None else ""))
    return int(query_scalar(store.client, sql, {"ids": ids} if ids is not None else {}))


def test_a_steady_trickle_is_not_inserted_every_second_but_batched(store):
    log = PrecheckLog(store)
    rows = [_row() for _ in range(3)]
    for row in rows:
        log.add(row)
    time.sleep(1.5)  # the old cadence wrote every second: one ~17 ms insert per second of traffic
    assert _stored(store) == 0
    log.close()
    assert _stored(store, [r.precheck_id for r in rows]) == 3


def test_a_full_batch_is_written_without_waiting_for_the_interval(store):
    log = PrecheckLog(store, flush_s=3600, batch_rows=5)
    rows = [_row() for _ in range(5)]
    for row in rows:
        log.add(row)
    deadline = time.monotonic() + 10
    while _stored(store) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _stored(store, [r.precheck_id for r in rows]) == 5
    log.close()


def test_the_apps_shutdown_stores_every_precheck_it_answered(api_settings, seeded):
    ids = []
    with TestClient(create_app(api_settings, seeded)) as client:
        for text in ("Summarise the weekly meeting", "Plan the vendor audit", ""):
            answer = client.post("/v1/precheck", headers=ACME,
                                 json={"project": "acme", "agent": "planner", "task_input": text})
            assert answer.status_code == 200, answer.text
            ids.append(answer.json()["precheck_id"])
        bad = client.post("/v1/precheck", headers=ACME, json={"project": "acme", "agent": " ", "task_input": "x"})
        assert bad.status_code == 422  # refused clearly, stores nothing, loses nothing valid
    assert _stored(seeded, ids) == 3
    assert _stored(seeded) == 3


def test_pre_checks_a_failed_insert_could_not_store_are_stored_by_the_next_flush(store):
    """The store refuses an insert for real (its pre-check table is away for a moment):
    the rows stay queued, in order, and the next flush stores every one of them, once."""
    log = PrecheckLog(store, flush_s=3600)
    rows = [_row() for _ in range(4)]
    for row in rows[:3]:
        log.add(row)
    store.client.command(store.sql("RENAME TABLE [[db]].prechecks TO [[db]].prechecks_away"))
    try:
        assert log.flush() == 0  # refused: "table does not exist"
    finally:
        store.client.command(store.sql("RENAME TABLE [[db]].prechecks_away TO [[db]].prechecks"))
    log.add(rows[3])
    assert log.flush() == 4
    assert _stored(store, [r.precheck_id for r in rows]) == 4
    assert _stored(store) == 4
    log.close()


def test_the_buffer_keeps_at_most_max_buffer_rows_and_an_empty_flush_writes_nothing(store):
    log = PrecheckLog(store, flush_s=3600, max_buffer=3)
    assert log.flush() == 0
    rows = [_row() for _ in range(5)]
    for row in rows:
        log.add(row)  # the last two are dropped (and counted): memory stays bounded
    assert log.flush() == 3
    assert _stored(store, [r.precheck_id for r in rows]) == 3
    log.close()


def test_a_full_batch_after_a_failed_insert_is_written_without_waiting_for_the_interval(store, caplog):
    """A failed insert puts its rows back; the next pre-check, with more than a batch waiting,
    wakes the writer at once instead of leaving them all for the timer (here an hour)."""
    log = PrecheckLog(store, flush_s=3600, batch_rows=3)
    rows = [_row() for _ in range(4)]
    store.client.command(store.sql("RENAME TABLE [[db]].prechecks TO [[db]].prechecks_away"))
    try:
        for row in rows[:3]:
            log.add(row)  # the third wakes the writer, whose insert is refused
        deadline = time.monotonic() + 10
        while "cannot store 3 pre-checks" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.01)
        while len(log._rows) < 3 and time.monotonic() < deadline:  # put back, in order
            time.sleep(0.01)
        assert len(log._rows) == 3
    finally:
        store.client.command(store.sql("RENAME TABLE [[db]].prechecks_away TO [[db]].prechecks"))
    log.add(rows[3])  # four waiting, batch_rows three: write now
    deadline = time.monotonic() + 10
    while _stored(store) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _stored(store, [r.precheck_id for r in rows]) == 4
    log.close()
