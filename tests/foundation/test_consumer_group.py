"""Scale-out: several consumer-group members (threads sharing the embedded store) join and
leave mid-stream; every event is stored exactly once and no commit runs ahead of the store."""

from __future__ import annotations

import time

import pytest
from kafka_helpers import CheckedMember, committed_total, fast_payloads, produce

from retrylens.config import Settings
from retrylens.store import EventStore

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

EVENTS = 100_000


def _wait_for(predicate, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.2)


@pytest.mark.slow
def test_members_joining_and_leaving_mid_stream_store_each_event_once(
    kafka_settings: Settings, store: EventStore
) -> None:
    settings = kafka_settings.model_copy(update={"batch_max_rows": 2_000, "batch_max_seconds": 0.5})
    produce(settings, fast_payloads(EVENTS, tasks=3_000))
    problems: list[str] = []
    first = CheckedMember(settings, store, problems).start()
    _wait_for(lambda: committed_total(settings) >= EVENTS // 5)
    # The two that stay run until every event is committed (then are stopped), not until 4 s
    # of silence: the topic's end is known, nothing is produced after the start.
    second = CheckedMember(settings, store, problems, idle_exit_s=None).start()  # joins: partitions are rebalanced
    third = CheckedMember(settings, store, problems, idle_exit_s=None).start()
    _wait_for(lambda: committed_total(settings) >= EVENTS // 2)
    first.consumer.stop()  # leaves cleanly mid-stream
    first.thread.join(timeout=60)
    _wait_for(lambda: committed_total(settings) >= EVENTS or any(m.error for m in (second, third)), 240)
    for member in (second, third):
        member.consumer.stop()
        member.thread.join(timeout=60)
    assert all(m.error is None for m in (first, second, third)), [m.error for m in (first, second, third)]
    assert problems == []
    assert committed_total(settings) == EVENTS
    assert store.count_distinct_events() == EVENTS
    assert sum(m.consumer.stats.messages for m in (first, second, third)) >= EVENTS
