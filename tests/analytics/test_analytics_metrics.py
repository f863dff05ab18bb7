"""Metrics against hand-computed values (see analytics_eventset), duplicates included."""

from __future__ import annotations

from datetime import timedelta

import pytest
from analytics_eventset import T0, T1, assert_metrics, load

from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import (
    failure_type_distribution,
    metrics_by,
    metrics_summary,
    metrics_trend,
    recent_handoffs,
    task_costs,
)
from retrylens.analytics.rollups import backfill_rollups

pytestmark = pytest.mark.clickhouse
ALPHA = Slice(project="alpha")


@pytest.mark.parametrize("source", ["rollup", "raw"])
def test_summary_matches_hand_computed_values_despite_duplicates(store, source):
    load(store, duplicates=True)
    assert store.count_rows() > store.count_distinct_events()
    assert_metrics(metrics_summary(store, ALPHA, source=source), source=source)


def test_backfill_twice_changes_nothing(store):
    load(store, duplicates=True)
    backfill_rollups(store)
    backfill_rollups(store)
    assert_metrics(metrics_summary(store, ALPHA))


@pytest.mark.parametrize("source", ["rollup", "raw"])
def test_slicing_by_agent(store, source):
    load(store)
    by_agent = {s.value: s.metrics for s in metrics_by(store, "agent", ALPHA, source=source)}
    assert by_agent["planner"].calls == 4 and by_agent["planner"].failures == 3
    assert by_agent["planner"].retries == 2 and by_agent["planner"].handoffs == 1
    assert by_agent["coder"].calls == 5 and by_agent["coder"].failures == 3
    assert by_agent["coder"].retry_successes == 1 and by_agent["coder"].degrades == 1


@pytest.mark.parametrize("source", ["rollup", "raw"])
def test_filters_by_policy_version_and_phase(store, source):
    load(store)
    v2 = metrics_summary(store, ALPHA.with_(policy_version="v2", phase="execution"), source=source)
    assert (v2.calls, v2.failures, v2.tasks, v2.budget_exhaustions) == (5, 3, 3, 1)
    assert v2.recovery_rate == pytest.approx(1.0)


@pytest.mark.parametrize("source", ["rollup", "raw"])
def test_hourly_trend(store, source):
    load(store)
    trend = metrics_trend(store, ALPHA, bucket="1h", source=source)
    assert [p.bucket.hour for p in trend] == [10, 11]
    assert [p.metrics.calls for p in trend] == [4, 5]
    assert [p.metrics.retries for p in trend] == [2, 2]


@pytest.mark.parametrize("source", ["rollup", "raw"])
def test_time_range(store, source):
    load(store)
    second_hour = metrics_summary(
        store, ALPHA.with_(start=T1, end=T1 + timedelta(hours=1)), source=source
    )
    assert second_hour.calls == 5
    none = metrics_summary(
        store, ALPHA.with_(start=T0 - timedelta(days=2), end=T0 - timedelta(days=1)), source=source
    )
    assert none.calls == 0 and none.retry_rate is None


def test_failure_type_distribution(store):
    load(store)
    dist = failure_type_distribution(store, ALPHA)
    assert dist[0].error_type == "logic" and dist[0].failures == 2
    assert {d.error_type: d.failures for d in dist} == {
        "logic": 2,
        "timeout": 1,
        "rate_limit": 1,
        "server_error": 1,
        "budget_exhausted": 1,
    }
    assert sum(d.share for d in dist) == pytest.approx(1.0)


def test_task_costs_show_the_price_of_retries(store):
    load(store)
    costs = {c.task_id: c for c in task_costs(store, ALPHA)}
    assert set(costs) == {"task-A", "task-B", "task-C"}
    assert costs["task-C"].retry_cost_usd == pytest.approx(0.031)
    assert costs["task-C"].attempts == 3 and costs["task-C"].outcome == "succeeded"
    assert costs["task-B"].failed_cost_usd == pytest.approx(0.011)


def test_recent_handoffs_one_per_attempt(store):
    load(store)
    handoffs = recent_handoffs(store, ALPHA)
    assert [(h["task_id"], h["correlation_id"]) for h in handoffs] == [("task-B", "task-B-a2")]


def test_empty_store_gives_empty_metrics(store):
    metrics = metrics_summary(store, ALPHA)
    assert metrics.calls == 0 and metrics.retry_rate is None and metrics.p95_backoff_ms is None
    assert metrics_trend(store, ALPHA) == [] and failure_type_distribution(store) == []
