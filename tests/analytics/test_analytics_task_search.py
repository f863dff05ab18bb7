"""The dashboard's task search counts a task's attempts, not the ids its events carry."""

from __future__ import annotations

import pytest
from analytics_eventset import rows_of
from test_analytics_handoff_count import _handed_off_task

from retrylens.dashboard.source import StoreSource

pytestmark = pytest.mark.clickhouse


def test_task_search_counts_attempts_not_correlation_ids(store) -> None:
    events = _handed_off_task()  # task_started, task_finished and handoff carry '<task>:<n>' ids
    store.insert_rows(rows_of(events))
    [found] = StoreSource(store).find_tasks(events[0].task_id)
    assert found["attempts"] == sum(e.kind == "attempt_started" for e in events) == 4
