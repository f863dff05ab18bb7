"""Migration 0008 upgrades a store whose rollups were sealed by the old layout (0005/0006).

The old sealer deleted the set states of sealed buckets from ``metrics_5m`` (lightweight
deletes) and kept them in ``metrics_sealed*`` tables; 0008 drops all of them and fills its
open set ``metrics_open`` from events, so that metrics stay exact before and after the first
pass of the new sealer.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from analytics_eventset import T1, approx_rollup, assert_metrics, load

from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import metrics_by, metrics_summary
from retrylens.analytics.rollups import seal_rollups
from retrylens.store.migrations.base import MigrationContext
from retrylens.store.migrations.m0008_rollup_levels import backwards, forwards
from retrylens.store.migrator import Migrator

pytestmark = pytest.mark.clickhouse
ALPHA = Slice(project="alpha")
PARTLY = T1 + timedelta(minutes=25)
OLD_TABLES = (
    "metrics_5m",
    "metrics_sealed",
    "metrics_sealed_open",
    "metrics_seal_log",
    "metrics_sealed_1h",
)


def _tables(store) -> set[str]:
    sql = "SELECT name FROM system.tables WHERE database = {db:String}"
    return {
        row[0] for row in store.client.query(sql, parameters={"db": store.database}).result_rows
    }


def _as_sealed_by_the_old_layout(store) -> None:
    """What the old sealer left: buckets before 11:15 logged as sealed, their set states deleted."""
    boundary = {"boundary": PARTLY - timedelta(minutes=10)}
    store.client.command(
        store.sql(
            "INSERT INTO [[db]].metrics_seal_log SELECT DISTINCT bucket, 1, now64(3), 0 FROM [[db]].metrics_5m"
            " WHERE bucket < {boundary:DateTime('UTC')}"
        ),
        parameters=boundary,
    )
    store.client.command(
        store.sql("DELETE FROM [[db]].metrics_5m WHERE bucket < {boundary:DateTime('UTC')}"),
        parameters=boundary,
    )


def test_upgrade_from_the_old_sealed_layout_keeps_metrics_exact(store):
    load(store, duplicates=True)
    migrator = Migrator(store.client, store.ctx)
    assert [m.version for m in migrator.rollback(7)] == [11, 10, 9, 8]  # 11 (pre-checks) is newer: undone first
    assert set(OLD_TABLES) <= _tables(store) and "metrics_rollup" not in _tables(store)
    _as_sealed_by_the_old_layout(store)

    assert [m.version for m in migrator.apply()] == [8, 9, 10, 11]
    assert not set(OLD_TABLES) & _tables(store)
    assert_metrics(metrics_summary(store, ALPHA))  # before any pass: the refilled set states
    report = seal_rollups(store, now=PARTLY)
    assert report.sealed == 4 and report.hours == 1
    assert_metrics(metrics_summary(store, ALPHA))
    assert metrics_by(store, "agent") == approx_rollup(metrics_by(store, "agent", source="raw"))


def test_rollback_of_the_level_layout_restores_exact_set_states(store):
    load(store, duplicates=True)
    seal_rollups(store, now=PARTLY)  # deletes sealed buckets from the open set
    Migrator(store.client, store.ctx).rollback(7)
    sql = store.sql("SELECT count(DISTINCT bucket) FROM [[db]].metrics_5m WHERE project = 'alpha'")
    assert int(store.client.command(sql)) == 5  # every bucket with alpha's events is back


def test_level_migration_is_idempotent_and_cluster_aware():
    single = forwards(MigrationContext(database="rl"))
    creates = [s for s in single if s.startswith("CREATE")]
    assert (
        creates
        and all("IF NOT EXISTS" in s for s in creates)
        and not any("ON CLUSTER" in s for s in single)
    )
    assert all("IF EXISTS" in s for s in single if s.startswith("DROP"))
    cluster = forwards(MigrationContext(database="rl", cluster="prod"))
    assert all("ON CLUSTER `prod`" in s for s in cluster if s.startswith(("CREATE", "DROP")))
    assert any("ReplicatedMergeTree" in s for s in cluster) and any(
        "ENGINE = Distributed" in s for s in cluster
    )
    assert any(
        "ReplicatedReplacingMergeTree(" in s
        and "metrics_rollup_state_local', '{replica}', revision)" in s
        for s in cluster
    )
    assert any(
        "ReplicatedAggregatingMergeTree(" in s and "metrics_open_local" in s for s in cluster
    )
    assert all(
        "IF EXISTS" in s or "IF NOT EXISTS" in s or s.startswith("INSERT")
        for s in backwards(MigrationContext(database="rl", cluster="prod"))
    )
