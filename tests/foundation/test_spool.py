"""The local spool: append-only, crash-safe, read from a durable cursor."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrylens.sdk.transport.spool import Spool, SpoolLockedError


def _records(n: int, start: int = 0) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), f"value-{i}".encode()) for i in range(start, start + n)]


def test_reads_back_in_order_and_resumes_after_commit(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append(_records(10))
    first = spool.read(max_records=4)
    assert [r.key for r in first] == [b"k0", b"k1", b"k2", b"k3"]
    spool.commit(first[-1].next_position)
    assert [r.key for r in spool.read()] == [f"k{i}".encode() for i in range(4, 10)]


def test_cursor_survives_reopening(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append(_records(5))
    spool.commit(spool.read(max_records=2)[-1].next_position)
    spool.close()
    reopened = Spool(tmp_path)
    assert [r.key for r in reopened.read()] == [b"k2", b"k3", b"k4"]


def test_segments_rotate_and_read_segments_are_deleted(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=64)
    for batch in range(10):
        spool.append(_records(1, batch))
    assert len(list(tmp_path.glob("*.log"))) >= 3
    records = spool.read()
    assert [r.key for r in records] == [f"k{i}".encode() for i in range(10)]
    spool.commit(records[-1].next_position)
    assert len(list(tmp_path.glob("*.log"))) == 1
    assert spool.read() == []


def test_torn_tail_is_cut_on_reopen_and_nothing_before_it_is_lost(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append(_records(3))
    spool.close()
    segment = next(tmp_path.glob("*.log"))
    with open(segment, "ab") as handle:
        handle.write(b"\x00\x00\x00\x09\x00")  # half a header: a crash mid-append
    reopened = Spool(tmp_path)
    reopened.append(_records(1, 3))
    assert [r.key for r in reopened.read()] == [b"k0", b"k1", b"k2", b"k3"]


def test_corrupted_record_is_skipped_not_delivered(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append(_records(3))
    segment = next(tmp_path.glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[data.index(b"value-1")] ^= 0xFF
    segment.write_bytes(bytes(data))
    assert [r.key for r in Spool(tmp_path, writer=False).read()] == [b"k0", b"k2"]


def test_one_writer_per_folder(tmp_path: Path) -> None:
    writer = Spool(tmp_path)
    with pytest.raises(SpoolLockedError, match="another process"):
        Spool(tmp_path)
    writer.close()
    Spool(tmp_path)  # free again once the first writer closed


def test_reading_resumes_mid_segment_in_a_later_segment(tmp_path: Path) -> None:
    """A cursor inside the second segment, and a start inside the first: each read gives
    exactly the records from there on, across the segment boundary (never from offset 0)."""
    spool = Spool(tmp_path, segment_bytes=64)
    for batch in range(10):
        spool.append(_records(1, batch))
    everything = spool.read()
    assert [r.key for r in everything] == [f"k{i}".encode() for i in range(10)]
    later = next(r for r in everything if r.position.segment > everything[0].position.segment
                 and r.position.offset > 0)
    assert [r.key for r in spool.read(everything[1].position)] == [f"k{i}".encode() for i in range(1, 10)]
    assert [r.next_position for r in spool.read(everything[1].position)] == [r.next_position for r in everything[1:]]
    spool.commit(later.position)  # drops the segments before the cursor's
    after = [r.key for r in everything if r.position >= later.position]
    assert [r.key for r in spool.read()] == after and 1 < len(after) < 10


def test_a_segment_rotates_once_it_reaches_its_size_exactly(tmp_path: Path) -> None:
    frame = 10 + len(b"k0") + len(b"value-0")  # header (10 bytes) + key + value
    spool = Spool(tmp_path, segment_bytes=2 * frame)
    for i in range(4):
        spool.append(_records(1, i))
    assert [p.stat().st_size for p in sorted(tmp_path.glob("*.log"))] == [2 * frame, 2 * frame]
    assert [r.key for r in spool.read()] == [b"k0", b"k1", b"k2", b"k3"]


def test_a_segment_longer_than_one_read_chunk_is_read_to_its_end_before_the_next(tmp_path: Path) -> None:
    """Frames of exactly 1 MiB: one read chunk (16 MiB) ends on a frame boundary with a 17th
    frame still in the segment and a later segment waiting; the reader must not jump to it."""
    value = b"v" * (1024 * 1024 - 10 - 3)
    spool = Spool(tmp_path, segment_bytes=17 * 1024 * 1024)
    spool.append([(f"{i:03d}".encode(), value) for i in range(17)])
    spool.append([(b"new", value)])  # the second segment
    keys: list[bytes] = []
    while records := spool.read(max_records=100):
        keys += [r.key for r in records]
        spool.commit(records[-1].next_position)
    assert keys == [f"{i:03d}".encode() for i in range(17)] + [b"new"]


def test_a_frame_torn_after_its_header_is_neither_read_nor_kept_on_reopen(tmp_path: Path) -> None:
    """A crash mid-append after a whole header: readers stop before the torn frame (they
    cannot know its end), and the next writer cuts it before appending."""
    spool = Spool(tmp_path)
    spool.append(_records(3))
    spool.close()
    segment = next(tmp_path.glob("*.log"))
    with open(segment, "ab") as handle:
        handle.write(b"\x00\x00\x00\x40\x00\x00\x00\x00\x00\x02k3val")  # claims 64 bytes of value
    assert [r.key for r in Spool(tmp_path, writer=False).read()] == [b"k0", b"k1", b"k2"]
    reopened = Spool(tmp_path)
    assert reopened.append(_records(1, 3)) == 1 and reopened.append([]) == 0
    assert [r.key for r in reopened.read()] == [b"k0", b"k1", b"k2", b"k3"]


def test_a_record_with_an_empty_key_and_value_is_read_back_and_kept_on_reopen(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append([(b"k", b"v"), (b"", b"")])
    assert [(r.key, r.value) for r in spool.read()] == [(b"k", b"v"), (b"", b"")]
    spool.close()
    reopened = Spool(tmp_path)
    reopened.append([(b"k2", b"v2")])
    assert [(r.key, r.value) for r in reopened.read()] == [(b"k", b"v"), (b"", b""), (b"k2", b"v2")]


def test_a_writer_reopened_over_several_segments_appends_after_the_last(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=64)
    for i in range(8):
        spool.append(_records(1, i))
    spool.close()
    reopened = Spool(tmp_path, segment_bytes=1024)  # larger now: the earlier segments are not full
    reopened.append(_records(1, 8))
    assert [r.key for r in reopened.read()] == [f"k{i}".encode() for i in range(9)]


def test_every_corrupted_record_is_skipped(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append(_records(40))
    segment = next(tmp_path.glob("*.log"))
    data = bytearray(segment.read_bytes())
    for i in range(0, 40, 2):
        data[data.index(f"value-{i}".encode()) + 6] ^= 0x55  # one byte of each even record's value
    segment.write_bytes(bytes(data))
    assert [r.key for r in Spool(tmp_path, writer=False).read()] == [f"k{i}".encode() for i in range(1, 40, 2)]


def test_positions_in_a_segment_numbered_past_256_are_read_from_their_offset(tmp_path: Path) -> None:
    """Segment numbers are ints compared by value (CPython caches only small ints)."""
    (tmp_path / "cursor").write_text("300 0")
    spool = Spool(tmp_path)
    spool.append(_records(3))
    records = spool.read()
    assert records[0].position.segment == 300
    assert [r.key for r in spool.read(records[1].position)] == [b"k1", b"k2"]
