"""Embedded mode's ingest of the spool, exactly (``ingest/spool_ingestor.py``).

What the spool source guarantees: every record an agent spooled is stored once, the cursor
of each folder moves past exactly what was stored (its furthest position, whichever segment
it is in), a batch reads at most ``batch_max_rows`` records a folder, the Kafka fallback
folders are left to their own emitter, and a stray file beside the folders is no folder.
Chunks are cut one per segment (a segment plays a partition: its offsets restart at 0, so
the deduplication token must see the segment apart). Against the real store (chDB); these
are the tests of the mutation target ``spool_ingestor`` (``infra/mutation_targets/ingest_store.py``).
"""

from __future__ import annotations

import orjson
import pytest
from factories import payload

from retrylens.config import Settings
from retrylens.ingest.dead_letter_file import DEAD_LETTER_FILE
from retrylens.ingest.encoder import RawChunk
from retrylens.ingest.spool_ingestor import SpoolIngestor, spool_chunks
from retrylens.sdk.transport.build import KAFKA_FALLBACK_PREFIX
from retrylens.sdk.transport.spool import Spool, SpoolPosition, SpoolRecord
from retrylens.store import EventStore


def _spool(settings: Settings, name: str, tasks: list[str], *, one_per_segment: bool = False) -> Spool:
    spool = Spool(settings.effective_spool_dir / name, segment_bytes=1 if one_per_segment else 1 << 20)
    for task in tasks:
        spool.append([(task.encode(), payload(task_id=task))], sync=False)
    spool.close()
    return Spool(spool.directory, writer=False)


def test_records_are_cut_into_one_chunk_per_segment_in_order(settings: Settings) -> None:
    """Pure: no store. Segments 0, 1, 2 of one record each, then a segment of two."""
    spool = Spool(settings.effective_spool_dir / "agent", segment_bytes=1)
    for task in ("a", "b", "c"):
        spool.append([(task.encode(), payload(task_id=task))], sync=False)
    spool.append([(b"d", payload(task_id="d")), (b"e", payload(task_id="e"))], sync=False)
    spool.close()
    records = Spool(spool.directory, writer=False).read()
    assert [r.position.segment for r in records] == [0, 1, 2, 3, 3]
    chunks = spool_chunks("spool:agent", records)
    assert chunks == [
        RawChunk("spool:agent", 0, [0], [b"a"], [records[0].value], records[0].next_position),
        RawChunk("spool:agent", 1, [0], [b"b"], [records[1].value], records[1].next_position),
        RawChunk("spool:agent", 2, [0], [b"c"], [records[2].value], records[2].next_position),
        RawChunk(
            "spool:agent", 3, [0, records[4].position.offset], [b"d", b"e"],
            [records[3].value, records[4].value], records[4].next_position,
        ),
    ]
    assert records[4].position.offset > 0
    assert spool_chunks("spool:agent", []) == []
    one = spool_chunks("spool:x", records[3:])
    assert [(c.partition, c.offsets, c.keys, c.commit_to) for c in one] == [
        (3, [0, records[4].position.offset], [b"d", b"e"], records[4].next_position)]


@pytest.mark.clickhouse
def test_each_run_reads_at_most_a_batch_a_folder_and_commits_its_furthest_position(
    settings: Settings, store: EventStore
) -> None:
    settings = settings.model_copy(update={"batch_max_rows": 2})
    a = _spool(settings, "a", [f"a{i}" for i in range(5)], one_per_segment=True)
    b = _spool(settings, "b", ["b0", "b1", "b2"])
    second = a.read()[1]
    ingestor = SpoolIngestor(settings, store)
    assert ingestor.run_once() == 4  # two of each folder
    assert store.count_rows() == 4
    a_records, b_records = a.read(), b.read()
    assert [r.key for r in a_records] == [b"a2", b"a3", b"a4"], "a's cursor is past its second segment"
    assert [r.key for r in b_records] == [b"b2"]
    assert a.committed() == second.next_position and second.position.segment == 1
    assert ingestor.rows == 4 and ingestor.dead_letters == 0
    assert ingestor.run_once() == 3
    assert ingestor.run_once() == 1
    assert ingestor.run_once() == 0
    assert not a.has_pending() and not b.has_pending()
    assert store.count_rows() == 8 and store.count_distinct_events() == 8


@pytest.mark.clickhouse
def test_drain_stores_every_record_once_and_counts_them(settings: Settings, store: EventStore) -> None:
    settings = settings.model_copy(update={"batch_max_rows": 3})
    spool = _spool(settings, "agent", [f"t{i}" for i in range(7)], one_per_segment=True)
    _spool(settings, "other", ["o0"])
    ingestor = SpoolIngestor(settings, store)
    assert ingestor.drain() == 8
    assert not spool.has_pending() and spool.read() == []
    assert ingestor.drain() == 0
    assert ingestor.rows == 8
    assert store.count_rows() == 8 and store.count_distinct_events() == 8


@pytest.mark.clickhouse
def test_kafka_fallback_folders_and_stray_files_are_left_alone(settings: Settings, store: EventStore) -> None:
    fallback = _spool(settings, f"{KAFKA_FALLBACK_PREFIX}agent", ["k0", "k1"])
    _spool(settings, "agent", ["a0"])
    (settings.effective_spool_dir / "notes.txt").write_text("not a spool")
    ingestor = SpoolIngestor(settings, store)
    assert ingestor.drain() == 1
    assert [r.key for r in fallback.read()] == [b"k0", b"k1"]
    assert fallback.committed() == SpoolPosition(0, 0)
    assert store.count_rows() == 1


@pytest.mark.clickhouse
def test_no_spool_folder_yet_is_nothing_to_ingest(settings: Settings, store: EventStore) -> None:
    assert not settings.effective_spool_dir.exists()
    ingestor = SpoolIngestor(settings, store)
    assert ingestor.drain() == 0 and ingestor.run_once() == 0


@pytest.mark.clickhouse
def test_an_invalid_record_is_a_dead_letter_and_the_cursor_moves_past_it(
    settings: Settings, store: EventStore
) -> None:
    spool = Spool(settings.effective_spool_dir / "agent")
    spool.append([(b"good", payload(task_id="good")), (b"bad", b"{not json"), (b"late", payload(task_id="late"))])
    spool.close()
    ingestor = SpoolIngestor(settings, store)
    assert ingestor.drain() == 2
    assert ingestor.dead_letters == 1
    assert not Spool(spool.directory, writer=False).has_pending()
    letters = [orjson.loads(line) for line in (settings.data_dir / DEAD_LETTER_FILE).read_bytes().splitlines()]
    assert len(letters) == 1
    assert store.count_rows() == 2


def test_a_segment_of_more_than_256_records_is_one_chunk() -> None:
    """Pure. Past CPython's cached small ints: the last record's index is compared by value."""
    records = [SpoolRecord(SpoolPosition(4, i * 10), SpoolPosition(4, i * 10 + 10), b"k%d" % i, b"v")
               for i in range(300)]
    chunks = spool_chunks("spool:big", records)
    assert len(chunks) == 1
    assert chunks[0].partition == 4 and chunks[0].offsets == [i * 10 for i in range(300)]
    assert chunks[0].commit_to == SpoolPosition(4, 3000)


@pytest.mark.clickhouse
def test_an_empty_folder_does_not_stop_the_run_before_the_folders_after_it(
    settings: Settings, store: EventStore
) -> None:
    empty = Spool(settings.effective_spool_dir / "a-empty")
    empty.close()
    _spool(settings, "b-agent", ["b0", "b1"])
    _spool(settings, "c-agent", ["c0"])
    assert SpoolIngestor(settings, store).run_once() == 3
    assert store.count_rows() == 3


def test_segments_past_256_are_compared_by_value() -> None:
    """Pure. Segment numbers are parsed from file names (distinct int objects past 256)."""
    first, second = SpoolPosition(int("300"), 0), SpoolPosition(int("300"), 10)
    records = [SpoolRecord(first, second, b"a", b"v"), SpoolRecord(second, SpoolPosition(int("300"), 20), b"b", b"v")]
    assert [(c.partition, c.offsets) for c in spool_chunks("spool:x", records)] == [(300, [0, 10])]


@pytest.mark.clickhouse
def test_the_ingestor_never_cuts_a_frame_an_agent_is_still_writing(settings: Settings, store: EventStore) -> None:
    """The agent owns its spool's tail: the ingestor reads (and commits) only. Opening the
    folder as a writer would cut the half-written frame at the end of the last segment."""
    spool = Spool(settings.effective_spool_dir / "agent")
    spool.append([(b"t0", payload(task_id="t0"))])
    tail = spool._segment_path(spool._segments()[-1])
    spool.close()
    with open(tail, "ab") as handle:
        handle.write(b"\x00\x00\x01\x00partial")  # a frame's first bytes, the rest still to come
    size = tail.stat().st_size
    assert SpoolIngestor(settings, store).drain() == 1
    assert tail.stat().st_size == size
    assert store.count_rows() == 1


@pytest.mark.clickhouse
def test_a_run_that_fails_part_way_leaves_nothing_behind_to_be_stored_twice(settings: Settings, store: EventStore) -> None:
    """A folder read after another fails (a real fault: a segment that cannot be opened). The
    first folder's chunk is already in the open batch, uncommitted; the next run reads it again
    from its cursor, so the failed run's batch must be forgotten, or its rows are stored twice.
    (A failed insert never leaves one: the batch is handed on whole before the insert.)"""
    _spool(settings, "a-agent", ["a0"])
    broken = settings.effective_spool_dir / "b-agent" / f"{0:012d}.log"
    broken.mkdir(parents=True)  # where a segment file should be, a folder: reading it fails
    ingestor = SpoolIngestor(settings, store)
    with pytest.raises(IsADirectoryError):
        ingestor.run_once()
    assert store.count_rows() == 0
    broken.rmdir()
    _spool(settings, "b-agent", ["b0"])
    assert ingestor.run_once() == 2
    assert store.count_rows() == 2 and ingestor.rows == 2
