"""The hourly sealed level: exact, equal to the 5-minute level and to raw, under duplicates.

The event set (analytics_eventset) has tasks A and B in the 10:00 hour and C, D, E in the
11:00 hour. Sealing "at 13:00" closes both hours; "at 11:25" closes only the 10:00 hour.
To read the 5-minute level alone, the tests make the query see no whole hours.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from analytics_eventset import EXPECTED_ALPHA, T0, T1, load, rows_of

from retrylens.analytics import metrics
from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import (
    failure_type_distribution,
    metrics_by,
    metrics_summary,
    metrics_trend,
)
from retrylens.analytics.rollups import seal_rollups
from retrylens.schemas import RetryEvent
from retrylens.store.migrations.base import MigrationContext
from retrylens.store.migrations.m0006_hourly_sealed_rollups import backwards, forwards

pytestmark = pytest.mark.clickhouse
ALPHA = Slice(project="alpha")
PARTLY = T1 + timedelta(minutes=25)
ALL = T1 + timedelta(hours=2)
WHERES = [
    ALPHA, Slice(), ALPHA.with_(error_type="logic"), ALPHA.with_(phase="execution", policy_version="v2"),
    ALPHA.with_(start=T0, end=T1 + timedelta(hours=1)), ALPHA.with_(start=T0 + timedelta(minutes=5), end=ALL),
]


def _readings(store, where: Slice) -> tuple:
    """Everything the first screen reads for ``where``, from the rollups."""
    return (
        metrics_summary(store, where),
        [metrics_by(store, d, where) for d in ("project", "agent", "phase", "error_type", "policy_version")],
        metrics_trend(store, where, bucket="1h"),
        metrics_trend(store, where, bucket="1d"),
        failure_type_distribution(store, where),
    )


def _raw(store, where: Slice) -> tuple:
    return (
        metrics_summary(store, where, source="raw"),
        [metrics_by(store, d, where, source="raw") for d in ("project", "agent", "phase", "error_type", "policy_version")],
        metrics_trend(store, where, bucket="1h", source="raw"),
        metrics_trend(store, where, bucket="1d", source="raw"),
        failure_type_distribution(store, where, source="raw"),
    )


def _five_minute_level_only(monkeypatch) -> None:
    monkeypatch.setattr(metrics, "_hour_span", lambda aligned: None)


def _hourly_rows(store) -> int:
    return int(store.client.command(store.sql("SELECT count() FROM [[db]].metrics_sealed_1h")))


@pytest.mark.parametrize("now", [PARTLY, ALL])
@pytest.mark.parametrize("where", WHERES)
def test_hourly_level_equals_five_minute_level_and_raw(store, monkeypatch, now, where):
    load(store, duplicates=True)
    report = seal_rollups(store, now=now)
    assert report.hours == (1 if now == PARTLY else 2) and _hourly_rows(store) > 0
    hourly = _readings(store, where)
    assert hourly == _raw(store, where)
    _five_minute_level_only(monkeypatch)
    assert _readings(store, where) == hourly


def test_hourly_level_matches_hand_computed_values(store):
    load(store, duplicates=True)
    seal_rollups(store, now=ALL)
    summary = metrics_summary(store, ALPHA)
    for name, value in EXPECTED_ALPHA.items():
        assert getattr(summary, name) == pytest.approx(value), name
    trend = metrics_trend(store, ALPHA, bucket="1h")
    assert [(p.metrics.calls, p.metrics.retries, p.metrics.tasks) for p in trend] == [(4, 2, 2), (5, 2, 3)]


def test_five_minute_trends_never_read_the_hourly_level(store):
    load(store, duplicates=True)
    seal_rollups(store, now=ALL)
    store.client.command(store.sql("TRUNCATE TABLE [[db]].metrics_sealed_1h"))  # would change any hourly read
    assert metrics_trend(store, ALPHA, bucket="5m") == metrics_trend(store, ALPHA, bucket="5m", source="raw")


def test_duplicates_and_late_events_reseal_their_hour(store):
    events = load(store, duplicates=True)
    seal_rollups(store, now=ALL)
    store.insert_rows(rows_of([e for e in events if e.task_id in {"task-A", "task-C"}], first_offset=5000))
    late = RetryEvent(
        event_id=uuid.uuid4(), ts=T0 + timedelta(minutes=40), project="alpha", agent={"name": "planner", "role": "worker"},
        task_id="task-F", correlation_id="task-F-a1", attempt=1, phase="planning", kind="attempt_started",
        policy_id="default", policy_version="v1",
    )
    store.insert_rows(rows_of([late], first_offset=6000))
    report = seal_rollups(store, now=ALL)
    assert report.hours == 2  # A's and C's hours; F's is A's
    assert metrics_summary(store, ALPHA).calls == EXPECTED_ALPHA["calls"] + 1
    assert _readings(store, ALPHA) == _raw(store, ALPHA)


def test_sealing_twice_gives_the_same_hourly_rows(store):
    load(store, duplicates=True)
    seal_rollups(store, now=ALL)
    rows_sql = store.sql("SELECT project, bucket, agent_name, error_type, any_error, calls, tasks FROM [[db]].metrics_sealed_1h ORDER BY ALL")
    rows = store.client.query(rows_sql).result_rows
    seal_rollups(store, now=ALL)  # re-seals the just-touched hours as a new generation
    assert store.client.query(rows_sql).result_rows == rows  # older generations are deleted


def test_hourly_migration_is_idempotent_and_cluster_aware():
    single = forwards(MigrationContext(database="rl"))
    assert all("IF NOT EXISTS" in s for s in single) and not any("ON CLUSTER" in s for s in single)
    cluster = forwards(MigrationContext(database="rl", cluster="prod"))
    assert all("ON CLUSTER `prod`" in s for s in cluster)
    assert any("ReplicatedMergeTree" in s for s in cluster) and any("ENGINE = Distributed" in s for s in cluster)
    assert all("IF EXISTS" in s for s in backwards(MigrationContext(database="rl", cluster="prod")))
