"""How the emitter paces a sink that fails or is slow (mutation target ``emitter``).

A replay is sent in pages of five batches (a broker's request size stays bounded); a sink
that keeps failing is retried after a wait that doubles up to ``max_backoff_s``; and once
``close()`` has given up waiting, what is still queued goes to the spool, not to a sink
that has already made it wait.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from factories import make_events

from retrylens.schemas import RetryEvent
from retrylens.sdk.transport.emitter import Emitter, Record
from retrylens.sdk.transport.spool import Spool


class RecordingSink:
    """Refuses while ``down`` is set; otherwise keeps every batch, after ``delay_s``."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.down = threading.Event()
        self.batches: list[list[Record]] = []
        self.delay_s = delay_s

    def deliver(self, records: list[Record]) -> int:
        if self.down.is_set():
            raise ConnectionError("broker unreachable")
        time.sleep(self.delay_s)
        self.batches.append(list(records))
        return len(records)

    def close(self) -> None:
        pass


def _ids(records: list[Record]) -> list[str]:
    return [RetryEvent.from_json_bytes(value).event_id.hex for _, value in records]


def test_a_spool_replay_is_sent_in_pages_of_five_batches(tmp_path: Path) -> None:
    sink = RecordingSink()
    sink.down.set()
    events = make_events(23)
    emitter = Emitter(sink=sink, spool=Spool(tmp_path), batch_size=2, min_backoff_s=0.001, max_backoff_s=0.002)
    for event in events:
        assert emitter.emit(event)
    assert not emitter.flush(0.3)
    sink.down.clear()
    assert emitter.flush(10)
    emitter.close()
    assert [len(b) for b in sink.batches] == [10, 10, 3]
    assert _ids([r for b in sink.batches for r in b]) == [e.event_id.hex for e in events]


def test_a_failing_sink_is_retried_after_a_wait_that_doubles_up_to_the_maximum() -> None:
    sink = RecordingSink()
    sink.down.set()
    emitter = Emitter(sink=sink, spool=None, min_backoff_s=0.2, max_backoff_s=1.5)
    record = (b"t", b"{}")
    waits = []
    for _ in range(5):
        before = time.monotonic()
        assert emitter._deliver([record]) == 0
        waits.append(emitter._next_drain - before)  # the wait before the next try
    assert waits == pytest.approx([0.2, 0.4, 0.8, 1.5, 1.5], abs=0.05)
    sink.down.clear()
    assert emitter._deliver([record]) == 1
    sink.down.set()
    before = time.monotonic()
    emitter._deliver([record])
    assert emitter._next_drain - before == pytest.approx(0.2, abs=0.05)  # a success starts the waits again
    emitter.close()


def test_what_close_could_not_deliver_in_time_is_spooled_not_sent_to_the_slow_sink(tmp_path: Path) -> None:
    sink = RecordingSink(delay_s=0.3)
    events = make_events(5)
    emitter = Emitter(sink=sink, spool=Spool(tmp_path), batch_size=1)
    for event in events:
        assert emitter.emit(event)
    emitter.close(timeout_s=0.1)
    delivered = [r for b in sink.batches for r in b]
    assert len(delivered) <= 1  # at most the batch in flight when close() gave up
    spooled = [(r.key, r.value) for r in Spool(tmp_path, writer=False).read()]
    assert _ids(delivered + spooled) == [e.event_id.hex for e in events]


class BlockingSink(RecordingSink):
    """Holds the first delivery until ``release`` is set (a broker that does not answer yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def deliver(self, records: list[Record]) -> int:
        self.entered.set()
        self.release.wait(10)
        return super().deliver(records)


def test_without_a_spool_an_event_past_a_full_queue_is_refused_and_counted() -> None:
    sink = BlockingSink()
    events = make_events(5)
    emitter = Emitter(sink=sink, spool=None, queue_size=2, batch_size=1)
    assert emitter.emit(events[0])
    assert sink.entered.wait(10)  # the pump holds events[0], waiting on the sink
    assert [emitter.emit(e) for e in events[1:]] == [True, True, False, False]
    assert emitter.stats["dropped_queue_full"] == 2
    sink.release.set()
    assert emitter.flush(10)
    emitter.close()
    assert _ids([r for b in sink.batches for r in b]) == [e.event_id.hex for e in events[:3]]


def test_a_healthy_sink_without_a_spool_never_reports_a_refusal(caplog: pytest.LogCaptureFixture) -> None:
    sink = RecordingSink()
    events = make_events(4)
    emitter = Emitter(sink=sink, spool=None, batch_size=2)
    for event in events:
        assert emitter.emit(event)
    assert emitter.flush(10)
    emitter.close()
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
    assert _ids([r for b in sink.batches for r in b]) == [e.event_id.hex for e in events]


def test_a_healthy_sinks_events_never_go_through_the_spool(tmp_path: Path) -> None:
    sink = RecordingSink()
    events = make_events(6)
    emitter = Emitter(sink=sink, spool=Spool(tmp_path))
    for part in (events[:3], events[3:]):
        for event in part:
            assert emitter.emit(event)
        assert emitter.flush(10)
    emitter.close()
    assert emitter.stats["spooled"] == 0 and emitter.stats["queued"] == 6
    assert _ids([r for b in sink.batches for r in b]) == [e.event_id.hex for e in events]
