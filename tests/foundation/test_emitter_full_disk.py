"""An agent's emitter on a real full disk (embedded mode: the spool is the destination).

While the spool cannot persist, the emitter keeps the refused records in memory, first in
line, and writes them once space is back: every event emitted is read back from the spool
exactly once, in order, and nothing is written behind a torn frame (issue 36).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from factories import make_events
from full_disk import fill, free, small_filesystem

from retrylens.schemas import RetryEvent
from retrylens.sdk.transport.emitter import Emitter
from retrylens.sdk.transport.spool import Spool


@pytest.fixture
def disk() -> Iterator[Path]:
    with small_filesystem(512) as directory:
        yield directory


def _spooled_ids(folder: Path) -> list[str]:
    return [RetryEvent.from_json_bytes(r.value).event_id.hex for r in Spool(folder, writer=False).read()]


def test_events_emitted_while_the_disk_is_full_are_spooled_in_order_once_space_is_back(disk: Path) -> None:
    folder = disk / "agent"
    events = make_events(60)
    emitter = Emitter(sink=None, spool=Spool(folder), min_backoff_s=0.02, max_backoff_s=0.05)
    for event in events[:10]:
        assert emitter.emit(event)
    assert emitter.flush(5)
    fill(disk)
    for event in events[10:50]:
        assert emitter.emit(event)
    assert not emitter.flush(0.5), "nothing can be persisted while the disk is full"
    assert emitter.stats["spool_unwritable"] > 0
    free(disk)
    assert emitter.flush(10)
    for event in events[50:]:
        assert emitter.emit(event)
    emitter.close()
    assert _spooled_ids(folder) == [e.event_id.hex for e in events]
    assert emitter.stats["dropped_spool_unwritable"] == 0
    # a refused batch is counted queued once, when it is finally taken: 60 emitted, 60 queued
    assert (emitter.stats["queued"], emitter.stats["spooled"]) == (60, 60)


def test_an_emitter_closed_while_the_disk_is_full_counts_what_it_could_not_keep(disk: Path) -> None:
    folder = disk / "agent"
    events = make_events(30)
    emitter = Emitter(sink=None, spool=Spool(folder), min_backoff_s=0.02, max_backoff_s=0.05)
    for event in events[:10]:
        assert emitter.emit(event)
    assert emitter.flush(5)
    fill(disk)
    for event in events[10:]:
        assert emitter.emit(event)
    emitter.close(timeout_s=0.3)
    assert emitter.stats["dropped_spool_unwritable"] == 20
    free(disk)
    assert _spooled_ids(folder) == [e.event_id.hex for e in events[:10]]


def test_a_full_queue_on_a_full_disk_drops_the_event_and_says_so_without_raising(disk: Path) -> None:
    """emit() answers False (and counts it) for an event neither the queue nor the spool can take."""
    folder = disk / "agent"
    events = make_events(15)
    emitter = Emitter(sink=None, spool=Spool(folder), queue_size=5, min_backoff_s=30, max_backoff_s=30)
    fill(disk)
    for event in events[:5]:
        assert emitter.emit(event)
    deadline = time.monotonic() + 10
    while not (emitter.stats["spool_unwritable"] and len(emitter._queue) == 5) and time.monotonic() < deadline:
        time.sleep(0.01)  # the pump's append is refused: the five are put back, the pump waits 30 s
    assert [emitter.emit(event) for event in events[5:]] == [False] * 10
    assert emitter.stats["dropped_spool_unwritable"] == 10
    emitter.close(timeout_s=0.2)
    assert emitter.stats["dropped_spool_unwritable"] == 15  # the five queued, at close


def test_a_refusal_after_a_good_append_is_retried_soon_and_a_second_one_waits_longer(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The spool's waits: min_backoff_s after a first refusal, max_backoff_s after a refusal
    in a row; a good append starts over (a disk full once a day is not waited on for long)."""
    folder = disk / "agent"
    events = make_events(41)
    emitter = Emitter(sink=None, spool=Spool(folder), min_backoff_s=0.01, max_backoff_s=3.0)
    assert emitter.emit(events[0])
    assert emitter.flush(5)  # a good append
    fill(disk)
    for event in events[1:]:
        assert emitter.emit(event)

    def refusals() -> int:
        return sum("spool cannot persist" in r.getMessage() for r in caplog.records)

    deadline = time.monotonic() + 1.5
    while refusals() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)
    assert refusals() == 2  # refused, 10 ms, refused again, then 3 s: none more in this half second
    emitter.close(timeout_s=0.1)
    free(disk)
    kept = _spooled_ids(folder)
    assert kept == [e.event_id.hex for e in events[: len(kept)]]
    assert emitter.stats["dropped_spool_unwritable"] == len(events) - len(kept)
