"""The spool on a real full disk: what it acknowledged it can read back, before and after.

Issue 36: on ``ENOSPC`` an append left a torn frame at the tail and raised; the appends
after it (once space was back) returned normally, but the reader stopped at the torn
frame's header and a reopen truncated everything from there: 2,000 acknowledged events
gone. Now a failed append is rolled back to the last complete record before it raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from full_disk import fill, free, small_filesystem

from retrylens.errors import SpoolWriteError
from retrylens.sdk.transport.spool import Spool


@pytest.fixture
def disk() -> Iterator[Path]:
    with small_filesystem(256) as directory:
        yield directory


def _records(n: int, start: int = 0, size: int = 300) -> list[tuple[bytes, bytes]]:
    return [(f"task-{i}".encode(), f"event-{i}:".encode().ljust(size, b"x")) for i in range(start, start + n)]


def test_an_append_the_full_disk_refuses_leaves_no_torn_frame(disk: Path) -> None:
    spool = Spool(disk / "spool")
    spool.append(_records(5))
    segment = next((disk / "spool").glob("*.log"))
    size = segment.stat().st_size
    fill(disk)
    with pytest.raises(SpoolWriteError, match=r"could not persist 40 records \(No space left on device\); none was kept"):
        spool.append(_records(40, start=5))
    assert segment.stat().st_size == size  # rolled back to the last complete record
    spool.close()


def test_records_appended_after_a_refused_append_are_read_back_and_survive_reopening(disk: Path) -> None:
    folder = disk / "spool"
    spool = Spool(folder)
    spool.append(_records(5))
    fill(disk)
    with pytest.raises(SpoolWriteError):
        spool.append(_records(40, start=100))
    free(disk)
    spool.append(_records(20, start=5))  # acknowledged: must be readable for good
    expected = [f"task-{i}".encode() for i in range(25)]
    assert [r.key for r in Spool(folder, writer=False).read()] == expected
    spool.close()
    reopened = Spool(folder)  # a reopen cuts a torn tail: nothing acknowledged may be in it
    assert [r.key for r in reopened.read()] == expected
    reopened.append(_records(1, start=25))
    assert [r.key for r in reopened.read()][-2:] == [b"task-24", b"task-25"]
    reopened.close()


def test_a_spool_keeps_refusing_while_the_disk_is_full_and_accepts_once_space_is_back(disk: Path) -> None:
    folder = disk / "spool"
    spool = Spool(folder)
    fill(disk)
    for attempt in range(3):
        with pytest.raises(SpoolWriteError):
            spool.append(_records(10, start=attempt * 10))
    assert Spool(folder, writer=False).read() == []
    free(disk)
    spool.append(_records(3, start=50))
    assert [r.key for r in Spool(folder, writer=False).read()] == [b"task-50", b"task-51", b"task-52"]
    spool.close()


def test_a_refused_append_just_after_a_rotation_rolls_back_within_the_new_segment(disk: Path) -> None:
    folder = disk / "spool"
    spool = Spool(folder, segment_bytes=4 * 1024)
    spool.append(_records(14))  # past 4 KiB: the next append opens the second segment
    spool.append(_records(1, start=14))
    fill(disk)
    with pytest.raises(SpoolWriteError):
        spool.append(_records(40, start=100))
    free(disk)
    spool.append(_records(1, start=15))
    assert [r.key for r in Spool(folder, writer=False).read()] == [f"task-{i}".encode() for i in range(16)]
    spool.close()
