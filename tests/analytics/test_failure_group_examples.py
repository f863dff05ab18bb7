"""A failure group's example tasks come in a defined order: most recently failing first, then id."""

from __future__ import annotations

from datetime import timedelta

import pytest
from analytics_eventset import rows_of
from factories import BASE_TS, make_event

from retrylens.analytics.failure_groups import failure_groups

pytestmark = pytest.mark.clickhouse


def _failure(task: str, minutes: int, n: int = 1):
    return make_event(
        project="order",
        task_id=task,
        correlation_id=f"{task}/{n}",
        attempt=n,
        kind="attempt_failed",
        error_type="logic",
        error_detail={"message": f"invalid plan for order {minutes}: missing field 'total'"},
        ts=BASE_TS + timedelta(minutes=minutes),
    )


def test_example_tasks_are_the_most_recent_failures_in_a_stable_order(store):
    # t-a..t-g fail at minutes 1..7; t-b fails again last (minute 20); t-x and t-w tie at 9.
    events = [_failure(f"t-{c}", i + 1) for i, c in enumerate("abcdefg")]
    events += [_failure("t-b", 20, n=2), _failure("t-x", 9), _failure("t-w", 9)]
    for chunk in (events[:4], events[4:8], events[8:]):  # separate parts, merged at read
        store.insert_rows(rows_of(chunk))
    store.insert_rows(rows_of(events[:3], first_offset=500))  # re-sent duplicates change nothing

    reads = [failure_groups(store, "order", now=BASE_TS + timedelta(days=1))[0] for _ in range(3)]
    assert reads[0].example_tasks == ["t-b", "t-w", "t-x", "t-g", "t-f"]
    assert all(group.example_tasks == reads[0].example_tasks for group in reads)
    assert reads[0].tasks == 9 and reads[0].failures == 10
