"""Scale-out: several consumer-group members (threads sharing the embedded store) join and
leave mid-stream; every event is stored exactly once and no commit runs ahead of the store."""

from __future__ import annotations

import time

import pytest
from kafka_helpers import CheckedMember, committed_total, fast_payloads, produce

from retrylens.config import Settings
from retrylens.store import EventStore

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

# 30k (100k until session 18: 12.6 s of CPU, now 3.5): two members join once a fifth is
# committed and the first leaves at half; the leave is asserted to come before the end, so the
# smaller stream still has the members change under it.
EVENTS = 30_000


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
    left_at = committed_total(settings)
    assert left_at < EVENTS, f"the first member left after the end ({left_at} of {EVENTS} committed)"
    _wait_for(lambda: committed_total(settings) >= EVENTS or any(m.error for m in (second, third)), 240)
    for member in (second, third):
        member.consumer.stop()
        member.thread.join(timeout=60)
    assert all(m.error is None for m in (first, second, third)), [m.error for m in (first, second, third)]
    assert problems == []
    assert committed_total(settings) == EVENTS
    assert store.count_distinct_events() == EVENTS
    assert sum(m.consumer.stats.messages for m in (first, second, third)) >= EVENTS


def test_a_member_whose_commit_meets_a_rebalance_rejoins_and_stores_each_event_once(
    kafka_settings: Settings, store: EventStore
) -> None:
    """A commit refused because the group moved on under the member (a batch slower than
    ``max_poll_interval``, or heartbeats starved past the session on a loaded machine) must
    not stop the member: its rows are stored, its offsets are not, so it rejoins on its next
    poll and whatever it re-reads is stored once. Session 17 saw a member stop on
    ``CommitFailedError`` in the 100k-event test instead. Here the interval is 3 s and the
    first batch takes 6 s between its insert and its commit."""
    settings = kafka_settings.model_copy(update={"batch_max_rows": 100, "batch_max_seconds": 0.2})
    produce(settings, fast_payloads(600, tasks=60))
    problems: list[str] = []
    slowed: list[int] = []

    def first_batch_slower_than_the_poll_interval(_batch) -> None:
        if not slowed:
            slowed.append(1)
            time.sleep(6)

    member = CheckedMember(settings, store, problems, idle_exit_s=None,
                           before_commit=first_batch_slower_than_the_poll_interval,
                           consumer_config={"max_poll_interval_ms": 3_000, "session_timeout_ms": 6_000,
                                            "heartbeat_interval_ms": 1_000}).start()
    try:
        _wait_for(lambda: member.error is not None or committed_total(settings) >= 600, 90)
        assert member.error is None, repr(member.error)
    finally:
        member.consumer.stop()
        member.thread.join(timeout=60)
    assert slowed and problems == []
    assert member.consumer.commit_refusals >= 1
    assert store.count_distinct_events() == 600
