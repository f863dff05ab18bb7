"""The hourly and daily sealed levels: exact, equal to the 5-minute level and to raw, under duplicates.

The event set (analytics_eventset) has tasks A and B in the 10:00 hour and C, D, E in the
11:00 hour of one day. Sealing "at 11:25" closes only the 10:00 hour, "at 13:00" both hours,
"the next day" the day as well. Narrowing ``rollup_query.LEVELS`` makes queries read only the
5-minute level, for comparison.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from analytics_eventset import EXPECTED_ALPHA, T0, T1, approx_rollup, assert_metrics, load, rows_of

from retrylens.analytics import rollup_query
from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import (
    failure_type_distribution,
    metrics_by,
    metrics_summary,
    metrics_trend,
)
from retrylens.analytics.rollups import seal_rollups
from retrylens.schemas import RetryEvent

pytestmark = pytest.mark.clickhouse
ALPHA = Slice(project="alpha")
PARTLY = T1 + timedelta(minutes=25)
ALL = T1 + timedelta(hours=2)
NEXT_DAY = T0 + timedelta(days=1)
DIMENSIONS = ("project", "agent", "phase", "error_type", "policy_version")
# The lowest-dependency run keeps the first two slices; the locked run reads all of them.
WHERES = [
    ALPHA,
    Slice(),
    *(
        pytest.param(where, marks=pytest.mark.slow)
        for where in (
            ALPHA.with_(error_type="logic"),
            ALPHA.with_(phase="execution", policy_version="v2"),
            ALPHA.with_(start=T0, end=T1 + timedelta(hours=1)),
            ALPHA.with_(start=T0 + timedelta(minutes=5), end=ALL),
            ALPHA.with_(start=T0 - timedelta(days=1), end=NEXT_DAY + timedelta(days=1)),
        )
    ),
]


def _readings(store, where: Slice, source: str = "rollup") -> tuple:
    """Everything the first screen reads for ``where``."""
    return (
        metrics_summary(store, where, source=source),
        [metrics_by(store, d, where, source=source) for d in DIMENSIONS],
        metrics_trend(store, where, bucket="1h", source=source),
        metrics_trend(store, where, bucket="1d", source=source),
        failure_type_distribution(store, where, source=source),
    )


def _rows(store, level: int) -> int:
    return int(
        store.client.command(
            store.sql(f"SELECT count() FROM [[db]].metrics_rollup WHERE level = {level}")
        )
    )


def _corrupt(store, level: int) -> None:
    """Add 1000 calls to every counter row of ``level``: any read of that level shows it."""
    store.client.command(
        store.sql(
            f"ALTER TABLE [[db]].metrics_rollup UPDATE calls = calls + 1000 WHERE level = {level} AND grain != 'keys'"
        ),
        settings={"mutations_sync": 2},
    )


@pytest.fixture(scope="module")
def sealed(module_stores):
    """``sealed(now)``: (store, seal report) of the event set loaded with duplicates and sealed
    at ``now``, made once per time and read by every slice's case (they only read)."""
    made = {}

    def at(now):
        if now not in made:
            store = module_stores()
            load(store, duplicates=True)
            made[now] = (store, seal_rollups(store, now=now))
        return made[now]

    return at


@pytest.mark.parametrize("now", [PARTLY, ALL, NEXT_DAY])
@pytest.mark.parametrize("where", WHERES)
def test_coarser_levels_equal_the_five_minute_level_and_raw(sealed, monkeypatch, now, where):
    store, report = sealed(now)
    assert (report.hours, report.days) == {PARTLY: (1, 0), ALL: (2, 0), NEXT_DAY: (2, 1)}[now]
    readings = _readings(store, where)
    assert readings == approx_rollup(_readings(store, where, "raw"))
    monkeypatch.setattr(rollup_query, "LEVELS", (300,))
    assert (
        _readings(store, where) == readings
    )  # same histograms at every level: equal, not just close


@pytest.mark.parametrize("now", [ALL, NEXT_DAY])
def test_coarser_levels_match_hand_computed_values(store, now):
    load(store, duplicates=True)
    seal_rollups(store, now=now)
    assert _rows(store, 3600) > 0 and (_rows(store, 86400) > 0) == (now == NEXT_DAY)
    assert_metrics(metrics_summary(store, ALPHA))
    trend = metrics_trend(store, ALPHA, bucket="1h")
    assert [(p.metrics.calls, p.metrics.retries, p.metrics.tasks) for p in trend] == [
        (4, 2, 2),
        (5, 2, 3),
    ]
    [day] = metrics_trend(store, ALPHA, bucket="1d")
    assert_metrics(day.metrics)


def test_summaries_read_the_daily_level(store):
    load(store, duplicates=True)
    seal_rollups(store, now=NEXT_DAY)
    _corrupt(store, 86400)
    assert metrics_summary(store, ALPHA).calls == EXPECTED_ALPHA["calls"] + 1000
    assert metrics_trend(store, ALPHA, bucket="1h") == approx_rollup(
        metrics_trend(store, ALPHA, bucket="1h", source="raw")
    )


def test_five_minute_trends_never_read_the_coarser_levels(store):
    load(store, duplicates=True)
    seal_rollups(store, now=NEXT_DAY)
    _corrupt(store, 3600)
    _corrupt(store, 86400)
    assert (
        metrics_summary(store, ALPHA.with_(start=T0, end=T1)).calls == 4 + 1000
    )  # the hour is read …
    trend = metrics_trend(store, ALPHA, bucket="5m")
    assert trend == approx_rollup(
        metrics_trend(store, ALPHA, bucket="5m", source="raw")
    )  # … but not here


def test_duplicates_and_late_events_reseal_their_hour_and_day(store):
    events = load(store, duplicates=True)
    seal_rollups(store, now=NEXT_DAY)
    store.insert_rows(
        rows_of([e for e in events if e.task_id in {"task-A", "task-C"}], first_offset=5000)
    )
    late = RetryEvent(
        event_id=uuid.uuid4(),
        ts=T0 + timedelta(minutes=40),
        project="alpha",
        agent={"name": "planner", "role": "worker"},
        task_id="task-F",
        correlation_id="task-F-a1",
        attempt=1,
        phase="planning",
        kind="attempt_succeeded",  # an attempt counts when it ends
        policy_id="default",
        policy_version="v1",
    )
    store.insert_rows(rows_of([late], first_offset=6000))
    report = seal_rollups(store, now=NEXT_DAY)
    assert (report.hours, report.days) == (2, 1)  # A's and C's hours (F's is A's), and their day
    assert metrics_summary(store, ALPHA).calls == EXPECTED_ALPHA["calls"] + 1
    assert _readings(store, ALPHA) == approx_rollup(_readings(store, ALPHA, "raw"))


def test_a_task_spanning_two_hours_is_counted_once_in_the_day(store):
    load(store, duplicates=True)
    seal_rollups(store, now=NEXT_DAY)
    late = RetryEvent(  # task A (10:00) gets a decision at 11:30: no longer local to its hour
        event_id=uuid.uuid4(),
        ts=T1 + timedelta(minutes=30),
        project="alpha",
        agent={"name": "planner", "role": "worker"},
        task_id="task-A",
        correlation_id="task-A-a2",
        attempt=2,
        phase="planning",
        kind="decision",
        decision="none",
        policy_id="default",
        policy_version="v1",
    )
    store.insert_rows(rows_of([late], first_offset=7000))
    seal_rollups(store, now=NEXT_DAY)
    keys = store.sql(
        "SELECT level, count() FROM [[db]].metrics_rollup WHERE grain = 'keys' GROUP BY level ORDER BY level"
    )
    assert [row[0] for row in store.client.query(keys).result_rows] == [
        300,
        3600,
    ]  # local again in the day
    assert_metrics(metrics_summary(store, ALPHA))
    assert [p.metrics.tasks for p in metrics_trend(store, ALPHA, bucket="1h")] == [
        2,
        3,
    ]  # A counts once, in the hour its outcome was recorded
    assert _readings(store, ALPHA) == approx_rollup(_readings(store, ALPHA, "raw"))


def test_sealing_twice_gives_the_same_rows_at_every_level(store):
    load(store, duplicates=True)
    seal_rollups(store, now=NEXT_DAY)
    rows_sql = store.sql(
        "SELECT level, project, bucket, grain, agent_name, error_type, key_hash, calls, tasks, retry_latency_keys"
        " FROM [[db]].metrics_rollup ORDER BY ALL"
    )
    rows = store.client.query(rows_sql).result_rows
    assert {row[0] for row in rows} == {300, 3600, 86400}
    seal_rollups(
        store, now=NEXT_DAY
    )  # re-seals the just-touched buckets, hours and day as a new generation
    assert store.client.query(rows_sql).result_rows == rows  # older generations are deleted
