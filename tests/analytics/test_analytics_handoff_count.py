"""A hand-off counts once, as the real SDK records it (decision + ``handoff`` event under other ids)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from analytics_eventset import rows_of

from retrylens.analytics.metrics import metrics_summary, metrics_trend
from retrylens.analytics.rollups import seal_rollups
from retrylens.schemas import RetryEvent
from retrylens.sdk import CallbackChannel, Governor, RetryPolicy
from retrylens.sdk.core.governor import VirtualClock
from retrylens.sdk.core.side_effects import MemoryKeyStore

pytestmark = pytest.mark.clickhouse
T0 = (datetime.now(UTC) - timedelta(days=1)).replace(hour=9, minute=0, second=0, microsecond=0)


def _handed_off_task() -> list[RetryEvent]:
    """One task the governor hands to a human after its network retries run out."""
    events: list[RetryEvent] = []
    clock = VirtualClock()
    governor = Governor(
        RetryPolicy(), project="p", emit=events.append, clock=clock, wall=lambda: T0 + timedelta(seconds=clock()),
        sleep=clock.advance, rng=random.Random(1), handoff=CallbackChannel(lambda package: None),
        key_store=MemoryKeyStore(),
    )

    def always_down(task: dict, attempt: int) -> None:
        raise ConnectionError("connection reset by peer")

    with pytest.raises(Exception, match="handoff_human"):
        governor.call(always_down, {}, goal="Refund order A-17", agent="support", dependency="gpt-4o")
    return events


def test_the_sdk_records_a_handoff_as_a_decision_and_an_event_with_different_correlation_ids() -> None:
    events = _handed_off_task()
    decision, handoff = (e for e in events if e.decision == "handoff_human")
    assert (decision.kind, handoff.kind) == ("decision", "handoff")
    assert decision.correlation_id != handoff.correlation_id and decision.attempt == handoff.attempt


@pytest.mark.parametrize("source", ["raw", "rollup"])
def test_a_handoff_counts_once_whatever_ids_its_events_carry(store, source: str) -> None:
    events = _handed_off_task()
    failures = sum(e.kind == "attempt_failed" for e in events)
    store.insert_rows(rows_of(events))
    for sealed in (False, True):
        if sealed:
            seal_rollups(store, now=T0 + timedelta(days=1))
        metrics = metrics_summary(store, source=source)
        assert (metrics.handoffs, metrics.tasks_handed_off, metrics.failures) == (1, 1, failures)
        assert metrics.handoff_rate == 1 / failures
        assert sum(p.metrics.handoffs for p in metrics_trend(store, bucket="5m", source=source)) == 1
