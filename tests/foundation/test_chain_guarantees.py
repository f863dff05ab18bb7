"""The ingest chain's promise, read on the store and on what it commits (issue 25).

A source's position is committed only after the rows before it are stored (a crash
before that replays them), batches are committed in order, a batch is handed on the
moment it is full, and nothing held is committed or stored twice — with the insert on
the chain's own thread (the default) or on its helper thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from factories import make_events

from retrylens.ingest.batch import Batch
from retrylens.ingest.chain import Chain, build_chain
from retrylens.ingest.dead_letter_file import DeadLetterFile
from retrylens.ingest.encoder import RawChunk
from retrylens.ingest.writer import BatchWriter
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse
VALUES = [event.to_json_bytes() for event in make_events(60, tasks=9, seed=8)]


def _chunk(first: int, count: int, *, bad: tuple[int, ...] = ()) -> RawChunk:
    offsets = list(range(first, first + count))
    values = [b"{bad" if offset in bad else VALUES[offset] for offset in offsets]
    return RawChunk("t", 0, offsets, [b"k"] * count, values, offsets[-1] + 1)


class _Commits:
    """The source's side: the positions committed, and the rows stored when each came."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.seen: list[tuple[int, int]] = []

    def __call__(self, batch: Batch) -> None:
        self.seen.append((batch.positions[("t", 0)], self.store.count_distinct_events()))


def _chain(
    store: EventStore, commits: Callable[[Batch], None], tmp_path: Path, **options: object
) -> Chain:
    options = {"max_rows": 10, "max_seconds": 60.0, **options}
    return build_chain(
        writer=BatchWriter(store),
        dead_letters=DeadLetterFile(tmp_path / "dead.jsonl"),
        commit=commits,
        **options,
    )  # type: ignore[arg-type]


def test_a_full_batch_is_stored_then_committed_at_once_by_default(
    store: EventStore, tmp_path: Path
) -> None:
    commits = _Commits(store)
    chain = _chain(store, commits, tmp_path)
    chain.submit(_chunk(0, 9))
    chain.poll()  # the source's loop polls all the time: a batch neither full nor old stays
    assert commits.seen == [] and store.count_rows() == 0  # one short of full: held
    assert 59.0 < chain.seconds_left() <= 60.0  # type: ignore[operator]
    chain.submit(_chunk(9, 1))
    assert commits.seen == [(10, 10)]  # full: stored, then committed, before submit returned
    chain.submit(_chunk(10, 15))  # overfull in one chunk: handed on too
    assert commits.seen == [(10, 10), (25, 25)]
    assert chain.seconds_left() is None  # nothing held
    chain.join()  # nothing held: nothing more is committed
    assert commits.seen == [(10, 10), (25, 25)]
    assert (chain.stats.batches, chain.stats.rows, chain.stats.messages) == (2, 25, 25)


def test_with_the_insert_on_a_helper_thread_each_commit_follows_its_insert_in_order(
    store: EventStore, tmp_path: Path
) -> None:
    commits = _Commits(store)
    chain = _chain(store, commits, tmp_path, threaded_insert=True)
    for first in range(0, 40, 10):
        chain.submit(_chunk(first, 10, bad=(first + 3,)))
    chain.submit(_chunk(40, 5))
    chain.join()
    assert [position for position, _ in commits.seen] == [10, 20, 30, 40, 45]
    # The valid rows of every batch up to a commit were stored when it came.
    assert all(
        stored >= valid
        for (_, stored), valid in zip(commits.seen, [9, 18, 27, 36, 41], strict=True)
    )
    assert commits.seen[-1] == (45, 41)
    assert (chain.stats.batches, chain.stats.rows, chain.stats.dead_letters) == (5, 41, 4)
    letters = [orjson.loads(line) for line in (tmp_path / "dead.jsonl").read_bytes().splitlines()]
    assert [(d["reason"], d["source"]) for d in letters] == [
        ("bad_json", f"t:0:{i}") for i in (3, 13, 23, 33)
    ]


def test_a_finished_helper_insert_is_committed_by_poll_without_more_input(
    store: EventStore, tmp_path: Path
) -> None:
    commits = _Commits(store)
    chain = _chain(store, commits, tmp_path, threaded_insert=True)
    chain.submit(_chunk(0, 10))
    assert 0 < chain.seconds_left() <= 0.05  # type: ignore[operator]  # come back soon: an insert to commit
    deadline = time.monotonic() + 30
    while not commits.seen and time.monotonic() < deadline:
        chain.poll()
        time.sleep(0.01)
    assert commits.seen == [(10, 10)]
    assert chain.seconds_left() is None


def test_closing_with_an_insert_in_flight_commits_nothing_and_the_replay_is_stored_once(
    store: EventStore, tmp_path: Path
) -> None:
    commits = _Commits(store)
    chain = _chain(store, commits, tmp_path, threaded_insert=True)
    chain.submit(_chunk(0, 10))
    chain.close()  # waits for the insert, but does not commit it
    assert commits.seen == [] and store.count_rows() == 10
    again = _chain(store, commits, tmp_path)
    again.submit(_chunk(0, 10))
    assert commits.seen == [(10, 10)] and store.count_rows() == 10


class _DownSink:
    """A dead-letter sink whose broker is down: publishing or flushing fails."""

    def publish(self, invalid, *, key, value) -> None:  # noqa: ANN001
        raise ConnectionError("dead-letter topic down")

    def flush(self) -> None:
        raise ConnectionError("dead-letter topic down")


def test_a_batch_without_dead_letters_is_stored_while_the_dead_letter_road_is_down(
    store: EventStore,
) -> None:
    committed: list[object] = []
    chain = build_chain(
        writer=BatchWriter(store),
        dead_letters=_DownSink(),
        commit=committed.append,
        max_rows=10,
        max_seconds=60,
    )
    chain.submit(_chunk(0, 10))
    assert store.count_rows() == 10 and len(committed) == 1
    with pytest.raises(ConnectionError):
        chain.submit(_chunk(10, 10, bad=(12,)))
    assert store.count_rows() == 10 and len(committed) == 1


def test_on_worker_processes_submit_waits_only_for_a_full_queue_and_join_stores_everything(
    store: EventStore, tmp_path: Path
) -> None:
    """Decoding on workers overlaps the source: ``submit`` hands chunks out and returns,
    results are taken when the queue of chunks in flight is full (8 per worker + 16: all
    of them, so the queue stays bounded) or at join, and then stored and committed exactly
    as inline."""
    commits = _Commits(store)
    chain = _chain(store, commits, tmp_path, workers=1, max_rows=10)
    try:
        for offset in range(23):
            chain.submit(_chunk(offset, 1))
        assert commits.seen == [] and chain.head.pending() == 23  # handed out, none taken back yet
        assert 0 < chain.seconds_left() <= 0.05  # type: ignore[operator]  # come back soon: results to take
        chain.submit(_chunk(23, 1))  # the 24th fills the queue: every result is taken back
        assert chain.head.pending() == 0
        assert commits.seen == [(10, 10), (20, 20)]  # two full batches; four messages held
        # A chunk that keeps the worker busy a while: join must wait for it, not commit without it.
        big = [event.to_json_bytes() for event in make_events(3000, tasks=50, seed=5)]
        chain.submit(RawChunk("t", 0, list(range(24, 3024)), [None] * 3000, big, 3024))
        chain.join()
        assert commits.seen == [(10, 10), (20, 20), (3024, 3024)] and store.count_rows() == 3024
    finally:
        chain.close()
