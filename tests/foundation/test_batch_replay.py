"""A batch replayed after a crash is the same batch however its messages were read.

The consumer reads what a poll returns: after a crash before the commit, the same messages
may come back in chunks of other sizes. The insert token names the batch by the first and
last offset it holds of each partition, so the replay must get the same token, or its rows
would be stored twice. And a batch waits its full age from its first message before it is
handed on, whatever the clock read when the consumer started.
"""

from __future__ import annotations

import pytest
from factories import make_events

from retrylens.ingest.batch import Batch
from retrylens.ingest.chain import build_chain
from retrylens.ingest.dead_letter_file import DeadLetterFile
from retrylens.ingest.encoder import EncodedChunk, RawChunk
from retrylens.ingest.writer import BatchWriter
from retrylens.store import EventStore


def _chunks(values: list[bytes], sizes: list[int], first: int = 0) -> list[RawChunk]:
    chunks, at = [], 0
    for size in sizes:
        part = values[at : at + size]
        offsets = list(range(first + at, first + at + size))
        chunks.append(RawChunk("t", 0, offsets, [b"k"] * size, list(part), offsets[-1] + 1))
        at += size
    return chunks


@pytest.mark.clickhouse
@pytest.mark.parametrize(
    ("first_read", "replay"), [([20, 30], [50]), ([50], [10, 10, 30]), ([5, 5, 40], [25, 25])]
)
def test_a_batch_replayed_in_other_chunks_after_a_crash_is_stored_once(
    store: EventStore, tmp_path, first_read: list[int], replay: list[int]
) -> None:  # noqa: ANN001
    def crash(batch: Batch) -> None:
        raise RuntimeError("crash before commit")

    values = [event.to_json_bytes() for event in make_events(50, tasks=7, seed=4)]
    for sizes, before_commit in ((first_read, crash), (replay, None)):
        chain = build_chain(
            writer=BatchWriter(store),
            dead_letters=DeadLetterFile(tmp_path / "dead.jsonl"),
            commit=lambda batch: None,
            max_rows=1_000,
            max_seconds=60,
            before_commit=before_commit,
        )
        for chunk in _chunks(values, sizes):
            chain.submit(chunk)
        if before_commit is crash:
            with pytest.raises(RuntimeError):
                chain.join()
        else:
            chain.join()
    assert store.count_rows() == 50  # the replay's insert was dropped by its token


def test_a_batch_waits_its_age_from_its_first_message_on_any_clock() -> None:
    clock = [1_000.0]  # a monotonic clock is far from zero
    batch = Batch(max_rows=100, max_seconds=2.0, clock=lambda: clock[0])
    batch.add(_chunks([b"x"], [1])[0], EncodedChunk(1, b"", []))
    assert not batch.is_due() and batch.seconds_left() == 2.0
    clock[0] = 1_001.5
    assert not batch.is_due() and batch.seconds_left() == pytest.approx(0.5)
    clock[0] = 1_002.0
    assert batch.is_due() and batch.seconds_left() == 0.0
    clock[0] = 1_009.0  # long overdue: nothing left to wait, never a negative wait
    assert batch.is_due() and batch.seconds_left() == 0.0


def test_a_batch_is_due_the_moment_it_holds_max_rows_messages() -> None:
    batch = Batch(max_rows=3, max_seconds=60.0, clock=lambda: 5.0)
    for at, due in ((0, False), (1, False), (2, True)):
        batch.add(_chunks([b"x"], [1], first=at)[0], EncodedChunk(1, b"", []))
        assert batch.is_due() is due


def test_a_batchs_token_is_the_same_in_every_release() -> None:
    """A batch inserted before an upgrade and replayed after it must still be recognised:
    the token of given spans is pinned (changing it is a migration, not a refactor)."""
    from retrylens.ingest.batch import dedup_token

    spans = {("events", 3): (100, 250), ("events", 0): (0, 9)}
    assert dedup_token(spans) == "55f4206bb00076f0ff21966a12b2c502e40de102"


def test_a_batch_started_at_clock_zero_waits_its_full_age() -> None:
    clock = [0.0]
    batch = Batch(max_rows=100, max_seconds=2.0, clock=lambda: clock[0])
    batch.add(_chunks([b"x"], [1])[0], EncodedChunk(1, b"", []))
    clock[0] = 1.5
    assert not batch.is_due()
    clock[0] = 2.0
    assert batch.is_due()


def test_a_batch_overfilled_by_one_chunk_is_due() -> None:
    batch = Batch(max_rows=3, max_seconds=60.0, clock=lambda: 5.0)
    batch.add(_chunks([b"x"] * 5, [5])[0], EncodedChunk(5, b"", []))
    assert batch.size == 5 and batch.is_due()
