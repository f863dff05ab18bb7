"""An agent's emitter on a real full disk (embedded mode: the spool is the destination).

While the spool cannot persist, the emitter keeps the refused records in memory, first in
line, and writes them once space is back: every event emitted is read back from the spool
exactly once, in order, and nothing is written behind a torn frame (issue 36).
"""

from __future__ import annotations

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
