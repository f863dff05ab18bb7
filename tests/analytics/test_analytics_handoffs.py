"""The hand-off list: one row per hand-off, from the hand-off index, exact under duplicates."""

from __future__ import annotations

from datetime import timedelta

import pytest
from analytics_eventset import T0, _Task, load, rows_of

from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import recent_handoffs
from retrylens.store.migrations.base import MigrationContext
from retrylens.store.migrations.m0007_handoff_index import forwards

pytestmark = pytest.mark.clickhouse


def _sdk_handoff(task_id: str, start, reason: str = "retry cap reached") -> list:
    """As the SDK emits it: the attempt's decision, then the task's ``handoff`` event under its own correlation id."""
    t = _Task("gamma", task_id, "planner", "planning", "v1", start, "text")
    t.start()
    t.attempt(1, False, latency=100, cost=0.001, tokens=(1, 1), error="logic")
    t._emit("decision", 1, decision="handoff_human", decision_reason=reason, error_type="logic")
    event = t._emit("handoff", 1, decision="handoff_human", decision_reason=f"{reason} (channel failed: 502)")
    t.events[-1] = event.model_copy(update={"correlation_id": f"{task_id}:1"})
    t.finish("handed_off", 1)
    return t.events


def test_a_handoff_is_one_row_merging_the_decision_and_the_handoff_event(store):
    store.insert_rows(rows_of(_sdk_handoff("task-H", T0)))
    [row] = recent_handoffs(store, Slice(project="gamma"))
    assert (row["task_id"], row["correlation_id"], row["error_type"]) == ("task-H", "task-H-a1", "logic")
    assert row["reason"] == "retry cap reached (channel failed: 502)"
    assert row["agent"] == "planner" and row["ts"] is not None


def test_resent_handoff_events_are_counted_once(store):
    events = _sdk_handoff("task-H", T0) + _sdk_handoff("task-I", T0 + timedelta(minutes=5))
    store.insert_rows(rows_of(events))
    store.insert_rows(rows_of(events, first_offset=100))
    rows = recent_handoffs(store, Slice(project="gamma"))
    assert [r["task_id"] for r in rows] == ["task-I", "task-H"]


def test_handoffs_paginate_newest_first(store):
    store.insert_rows(rows_of([e for i in range(5) for e in _sdk_handoff(f"task-{i}", T0 + timedelta(minutes=i))]))
    first, second = (recent_handoffs(store, limit=2, offset=o) for o in (0, 2))
    assert [r["task_id"] for r in first + second] == ["task-4", "task-3", "task-2", "task-1"]


def test_the_list_reads_the_index_not_the_events(store):
    load(store)
    before = recent_handoffs(store)
    store.client.command(store.sql("TRUNCATE TABLE [[db]].events"))
    assert recent_handoffs(store) == before and [r["task_id"] for r in before] == ["task-B", "task-Z"]


def test_migration_backfills_events_stored_before_it_and_may_run_again(store):
    load(store)
    store.client.command(store.sql("TRUNCATE TABLE [[db]].handoffs"))
    assert recent_handoffs(store) == []
    for _ in range(2):
        for statement in forwards(store.ctx):
            store.client.command(statement)
    assert [(r["task_id"], r["correlation_id"]) for r in recent_handoffs(store)] == [
        ("task-B", "task-B-a2"), ("task-Z", "task-Z-a1")
    ]


def test_handoff_index_migration_is_cluster_aware():
    statements = forwards(MigrationContext(database="rl", cluster="prod"))
    assert all("ON CLUSTER `prod`" in s for s in statements if s.startswith("CREATE"))
    assert any("ReplicatedReplacingMergeTree" in s for s in statements)
    assert any("`rl`.`handoffs` ON CLUSTER `prod` AS `rl`.`handoffs_local`" in s for s in statements)
