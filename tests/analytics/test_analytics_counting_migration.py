"""Migration 0009 re-counts a store rolled up under 0008's definitions: hand-offs once, the four outcomes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from analytics_eventset import approx_rollup, rows_of
from test_analytics_handoff_count import T0, _handed_off_task

from retrylens.analytics.definitions import COSTED, COUNTS, RETRY_OUTCOME, WAITED
from retrylens.analytics.metrics import metrics_summary
from retrylens.analytics.rollups import open_select, seal_rollups
from retrylens.store.migrations import m0009_one_counting_event as m0009
from retrylens.store.migrations import m0010_loop_signals as m0010
from retrylens.store.migrations.base import MigrationContext
from retrylens.store.migrator import Migrator

pytestmark = pytest.mark.clickhouse


def test_the_frozen_counts_of_0009_are_the_live_definitions() -> None:
    assert m0009.COUNTS == tuple((c.name, c.unit, c.condition) for c in COUNTS)
    assert (m0009.RETRY_OUTCOME, m0009.WAITED, m0009.COSTED) == (RETRY_OUTCOME, WAITED, COSTED)
    assert open_select("src") == m0009.open_select("src")


def test_upgrading_a_store_that_counted_each_handoff_twice(store) -> None:
    migrator = Migrator(store.client, store.ctx)
    assert [m.version for m in migrator.rollback(8)] == [11, 10, 9]  # 11 (pre-checks) is newer: undone first
    for statement in m0010.MIGRATION.forwards(store.ctx):  # the insert below writes 0010's columns
        store.client.command(statement)
    store.insert_rows(rows_of(_handed_off_task()))
    handoff_keys = store.sql(
        "SELECT countIf(bitTest(k.2, 5)) FROM"
        " (SELECT arrayJoin(groupUniqArrayArrayMerge(`keys`)) AS k FROM [[db]].metrics_open)"
    )
    assert int(store.client.command(handoff_keys)) == 2  # 0008: the decision's attempt and the event's

    assert [m.version for m in migrator.apply()] == [9, 10, 11]
    before_pass = metrics_summary(store)
    seal_rollups(store, now=T0 + timedelta(hours=2))
    after_pass = metrics_summary(store)
    assert before_pass == after_pass == approx_rollup(metrics_summary(store, source="raw"))
    assert (after_pass.handoffs, after_pass.failed_with_retry, after_pass.tasks) == (1, 1, 1)


def test_counting_migration_is_idempotent_and_cluster_aware() -> None:
    single = m0009.forwards(MigrationContext(database="rl"))
    assert not any("ON CLUSTER" in s for s in single)
    assert all("IF EXISTS" in s or "IF NOT EXISTS" in s or s.startswith("INSERT") for s in single)
    cluster = m0009.forwards(MigrationContext(database="rl", cluster="prod"))
    assert all("ON CLUSTER `prod`" in s for s in cluster if not s.startswith("INSERT"))
    alters = [s for s in cluster if s.startswith("ALTER")]
    assert alters[0].startswith("ALTER TABLE `rl`.`metrics_rollup_local`")  # storage before Distributed
    assert any("TRUNCATE TABLE IF EXISTS `rl`.`metrics_open_local`" in s for s in cluster)
    back = m0009.backwards(MigrationContext(database="rl", cluster="prod"))
    assert [s for s in back if s.startswith("ALTER")][0].startswith("ALTER TABLE `rl`.`metrics_rollup` ")
