"""Scale-out: several consumer-group members (threads sharing the embedded store) join and
leave mid-stream; every event is stored exactly once and no commit runs ahead of the store."""

from __future__ import annotations

import threading
import time

import pytest
from kafka_helpers import committed_total, fast_payloads, produce

from retrylens.config import Settings
from retrylens.ingest.batch import Batch
from retrylens.ingest.consumer import IngestConsumer
from retrylens.store import EventStore

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]

EVENTS = 100_000


class Member:
    """One consumer-group member on its own thread; checks each batch is stored before its commit."""

    def __init__(self, settings: Settings, store: EventStore, problems: list[str]) -> None:
        self.store = store
        self.problems = problems
        self.consumer = IngestConsumer(settings, store, before_commit=self._check)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.consumer.run(idle_exit_s=4)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _check(self, batch: Batch) -> None:
        for (_topic, partition), (first, last) in batch.spans.items():
            stored = self.store.client.query(
                self.store.sql(
                    "SELECT count() FROM [[db]].events WHERE kafka_partition = {p:Int32} "
                    "AND kafka_offset BETWEEN {a:Int64} AND {b:Int64}"
                ),
                parameters={"p": partition, "a": first, "b": last},
            ).result_rows[0][0]
            if stored < last - first + 1:
                self.problems.append(f"commit of p{partition} {first}-{last} ahead of the store ({stored} rows)")

    def start(self) -> Member:
        self.thread.start()
        return self


def _wait_for(predicate, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.2)


def test_members_joining_and_leaving_mid_stream_store_each_event_once(
    kafka_settings: Settings, store: EventStore
) -> None:
    settings = kafka_settings.model_copy(update={"batch_max_rows": 2_000, "batch_max_seconds": 0.5})
    produce(settings, fast_payloads(EVENTS, tasks=3_000))
    problems: list[str] = []
    first = Member(settings, store, problems).start()
    _wait_for(lambda: committed_total(settings) >= EVENTS // 5)
    second = Member(settings, store, problems).start()  # joins: partitions are rebalanced
    third = Member(settings, store, problems).start()
    _wait_for(lambda: committed_total(settings) >= EVENTS // 2)
    first.consumer.stop()  # leaves cleanly mid-stream
    first.thread.join(timeout=60)
    for member in (second, third):
        member.thread.join(timeout=240)
    assert all(m.error is None for m in (first, second, third)), [m.error for m in (first, second, third)]
    assert problems == []
    assert committed_total(settings) == EVENTS
    assert store.count_distinct_events() == EVENTS
    assert sum(m.consumer.stats.messages for m in (first, second, third)) >= EVENTS
