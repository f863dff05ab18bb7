"""The ClickHouse store: migrations, deduplication, exact reads, bound parameters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from factories import make_events

from retrylens.config import Settings
from retrylens.ingest.batch import dedup_token
from retrylens.ingest.processor import SourceRef, ValidEvent, process
from retrylens.store import EventStore
from retrylens.store.migrations.base import MigrationContext
from retrylens.store.migrator import LEDGER, Migrator, discover, render_all

pytestmark = pytest.mark.clickhouse


def _rows(events, topic="events", partition=0, first_offset=0):
    rows = []
    for offset, event in enumerate(events, start=first_offset):
        outcome = process(event.to_json_bytes(), SourceRef(topic, partition, offset))
        assert isinstance(outcome, ValidEvent)
        rows.append(outcome.row)
    return rows


def test_migrations_are_recorded_and_idempotent(store: EventStore) -> None:
    migrator = Migrator(store.client, store.ctx)
    assert migrator.applied_versions() == {m.version for m in discover()}
    assert migrator.apply() == []
    ledger = store.client.query(f"SELECT count() FROM {store.database}.{LEDGER} FINAL").result_rows
    assert ledger[0][0] == len(discover())


def test_rollback_then_forward_again(store: EventStore) -> None:
    migrator = Migrator(store.client, store.ctx)
    undone = migrator.rollback(0)
    assert {m.version for m in undone} == {m.version for m in discover()}
    assert migrator.applied_versions() == set()
    assert [m.version for m in migrator.apply()] == [m.version for m in discover()]
    assert store.count_distinct_events() == 0


def test_events_table_has_the_promised_engine_key_partitions_and_ttls(store: EventStore) -> None:
    ddl = store.client.query(f"SHOW CREATE TABLE {store.database}.events").result_rows[0][0]
    assert "ReplacingMergeTree" in ddl
    assert "ORDER BY (project, task_id, correlation_id, event_id)" in ddl
    assert "PARTITION BY toYYYYMM(ts)" in ddl
    assert "TTL toDateTime(ts) + toIntervalDay(395)" in ddl
    assert "`context_snapshot` String CODEC(ZSTD(3)) TTL toDateTime(ts) + toIntervalDay(30)" in ddl
    assert "`error_message` String CODEC(ZSTD(3)) TTL toDateTime(ts) + toIntervalDay(30)" in ddl
    assert "non_replicated_deduplication_window = 10000" in ddl


def test_same_dedup_token_inserts_once(store: EventStore) -> None:
    rows = _rows(make_events(200))
    token = dedup_token({("events", 0): (0, 199)})
    store.insert_rows(rows, dedup_token=token)
    store.insert_rows(rows, dedup_token=token)  # replay after a crash before commit
    assert store.count_rows() == 200


def test_resent_event_in_another_batch_is_counted_once(store: EventStore) -> None:
    events = make_events(100)
    store.insert_rows(_rows(events), dedup_token="a")
    store.insert_rows(_rows(events[:10], first_offset=500), dedup_token="b")
    assert store.count_rows() == 110  # physically there until merged …
    assert store.count_distinct_events() == 100  # … but exact reads see each event once


def test_user_values_are_bound_not_spliced(store: EventStore) -> None:
    store.insert_rows(_rows(make_events(20, project="acme")), dedup_token="x")
    assert store.count_distinct_events("acme") == 20
    for hostile in ["acme' OR '1'='1", "acme\\' OR 1=1 --", "x'); DROP TABLE events; --"]:
        assert store.count_distinct_events(hostile) == 0
    assert store.count_distinct_events() == 20
    assert store.task_events("acme' OR 1=1 --", "task-1") == []


def test_task_events_are_ordered_and_exact(store: EventStore) -> None:
    events = make_events(300, tasks=3)
    store.insert_rows(_rows(events), dedup_token="t")
    store.insert_rows(_rows(events[:50]), dedup_token="u")
    story = store.task_events("acme", "task-1")
    expected = [e for e in events if e.task_id == "task-1"]
    assert [row["event_id"] for row in story] == [e.event_id for e in expected]


def test_cluster_migrations_use_on_cluster_replicated_engines_and_a_distributed_table() -> None:
    statements = render_all(MigrationContext(database="rl", cluster="prod"))
    events_local = next(s for s in statements if "`rl`.`events_local`" in s and "CREATE TABLE" in s)
    assert "ON CLUSTER `prod`" in events_local
    assert "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/rl/events_local', '{replica}')" in events_local
    assert "replicated_deduplication_window" in events_local
    distributed = next(s for s in statements if "ENGINE = Distributed" in s)
    assert "`rl`.`events` ON CLUSTER `prod` AS `rl`.`events_local`" in distributed
    assert all("ON CLUSTER" in s for s in statements if s.startswith("CREATE"))


def test_single_server_migrations_have_no_cluster_clauses() -> None:
    statements = render_all(MigrationContext(database="rl"))
    assert not any("ON CLUSTER" in s or "Replicated" in s or "Distributed" in s for s in statements)


def test_second_process_on_a_locked_embedded_store_gets_a_clear_error(tmp_path: Path) -> None:
    env = {**os.environ, "RETRYLENS_DATA_DIR": str(tmp_path), "KAFKA_BOOTSTRAP_SERVERS": ""}
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys,time\nfrom retrylens.config import load_settings\n"
         "from retrylens.store import open_store\nopen_store(load_settings())\nprint('ready', flush=True)\n"
         "time.sleep(900)"],  # held until killed below, however slow the second process starts
        env=env, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        # No hang: the second process fails at once (its timeout is only the bound of a busy machine).
        second = subprocess.run(
            [sys.executable, "-m", "retrylens", "store", "stats"], env=env, capture_output=True, text=True, timeout=180
        )
        assert second.returncode == 1
        assert "owned by another process" in second.stderr
        assert "RETRYLENS_CLICKHOUSE_DSN" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        holder.kill()
        holder.wait()
    after = subprocess.run([sys.executable, "-m", "retrylens", "store", "stats"], env=env, capture_output=True, text=True, timeout=180)
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout) == {"events": 0, "rows": 0}


def test_settings_reject_a_bad_database_name(settings: Settings) -> None:
    from retrylens.config import load_settings
    from retrylens.errors import ConfigError

    with pytest.raises(ConfigError, match="clickhouse_database"):
        load_settings(clickhouse_database="x; DROP DATABASE y")
