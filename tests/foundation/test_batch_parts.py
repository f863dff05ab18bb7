"""Parts of the consumer: the invalid-burst breaker, the chunk encoder, the strategy chain, the status."""

from __future__ import annotations

import random

import orjson
import pytest
from factories import make_events, payload

from retrylens.errors import InvalidBurstError
from retrylens.ingest.batch import Batch
from retrylens.ingest.breaker import BurstPolicy, InvalidBurstBreaker
from retrylens.ingest.chain import build_chain
from retrylens.ingest.dead_letter_file import DeadLetterFile
from retrylens.ingest.encoder import EncodedChunk, RawChunk, encode_chunk
from retrylens.ingest.processor import InvalidReason, SourceRef, process
from retrylens.ingest.status import IngestStatus, combine_snapshots
from retrylens.ingest.writer import BatchWriter, insert_event_lines
from retrylens.store import EventStore
from retrylens.store.native_block import encode_native


def _one_by_one(verdicts: list[bool], breaker: InvalidBurstBreaker) -> list[str | None]:
    return [breaker.record(v) for v in verdicts]


def test_recording_a_clean_run_in_bulk_equals_recording_it_one_by_one() -> None:
    rng = random.Random(3)
    for _ in range(200):
        window = rng.choice([10, 16, 50])
        bulk = InvalidBurstBreaker(max_consecutive=10_000, max_ratio=1.0, window=window)
        single = InvalidBurstBreaker(max_consecutive=10_000, max_ratio=1.0, window=window)
        for _step in range(rng.randrange(1, 12)):
            if rng.random() < 0.5:
                run = rng.randrange(0, 3 * window)
                bulk.record_valid(run)
                _one_by_one([True] * run, single)
            else:
                verdicts = [rng.random() < 0.4 for _ in range(rng.randrange(1, 20))]
                assert _one_by_one(verdicts, bulk) == _one_by_one(verdicts, single)
            assert list(bulk._recent) == list(single._recent)
            assert bulk._invalid_in_window == single._invalid_in_window
            assert bulk.consecutive == single.consecutive


def test_a_chunk_keeps_invalid_verdicts_in_place_and_encodes_the_valid_rows(store: EventStore) -> None:
    events = make_events(5, tasks=2)
    values = [events[0].to_json_bytes(), b"{nope", events[1].to_json_bytes(), payload(schema_version=9), None]
    chunk = encode_chunk("events", 2, [10, 11, 12, 13, 14], values)
    assert chunk.rows == 2
    assert [(i, m.reason) for i, m in chunk.invalid] == [
        (1, InvalidReason.BAD_JSON),
        (3, InvalidReason.UNKNOWN_SCHEMA_VERSION),
        (4, InvalidReason.EMPTY),
    ]
    assert [m.source.offset for _, m in chunk.invalid] == [11, 13, 14]
    insert_event_lines(store, [chunk.block], rows=chunk.rows, dedup_token="chunk-1")
    rows = store.client.query(
        store.sql("SELECT toString(event_id), kafka_partition, kafka_offset FROM [[db]].events ORDER BY kafka_offset")
    ).result_rows
    assert rows == [(str(events[0].event_id), 2, 10), (str(events[1].event_id), 2, 12)]


def test_blocks_encoded_apart_insert_as_one_deduplicated_insert(store: EventStore) -> None:
    rows = [process(e.to_json_bytes(), SourceRef("t", 0, i)).row for i, e in enumerate(make_events(40, tasks=5))]
    blocks = [encode_native(rows[:15]), encode_native(rows[15:])]
    store.insert_native(blocks, dedup_token="two-blocks")
    store.insert_native(blocks, dedup_token="two-blocks")  # a replay: dropped by its token
    assert store.count_rows() == 40
    assert store.count_distinct_events() == 40
    assert encode_native([]) == b""


def test_json_row_blocks_encoded_apart_insert_as_one_deduplicated_insert(store: EventStore) -> None:
    values = [e.to_json_bytes() for e in make_events(40, tasks=5)]
    blocks = [encode_chunk("t", 0, list(range(15)), values[:15]), encode_chunk("t", 0, list(range(15, 40)), values[15:])]
    for _replay in range(2):  # the second insert is a replay: dropped by its token
        insert_event_lines(store, [b.block for b in blocks], rows=40, dedup_token="two-json-blocks")
    assert store.count_rows() == 40
    assert store.count_distinct_events() == 40
    assert encode_chunk("t", 0, [], []).block == b""


# --- the strategy chain, driven directly (the spool and Kafka sources both build it) ---


def _chunk(topic: str, partition: int, first: int, values: list[bytes | None]) -> RawChunk:
    offsets = list(range(first, first + len(values)))
    return RawChunk(topic, partition, offsets, [b"k"] * len(values), values, offsets[-1] + 1)


class _FailingSink:
    """A dead-letter sink whose flush fails (the DLQ broker is down)."""

    def publish(self, invalid, *, key, value) -> None:
        return None

    def flush(self) -> None:
        raise ConnectionError("dead-letter sink down")


def _values(n: int, *, bad_every: int = 0, seed: int = 0) -> list[bytes | None]:
    out: list[bytes | None] = []
    for i, event in enumerate(make_events(n, tasks=7, seed=seed)):
        out.append(b"{bad" if bad_every and i % bad_every == 0 else event.to_json_bytes())
    return out


def test_the_chain_writes_dead_letters_then_inserts_then_commits(store: EventStore, tmp_path) -> None:
    sink = DeadLetterFile(tmp_path / "dead.jsonl")
    committed: list[dict] = []
    chain = build_chain(
        writer=BatchWriter(store), dead_letters=sink, commit=lambda b: committed.append(dict(b.positions)),
        max_rows=1_000, max_seconds=60,
    )
    chain.submit(_chunk("spool:a", 0, 0, _values(20, bad_every=5)))
    chain.submit(_chunk("spool:b", 3, 100, _values(10, seed=1)))  # other events: 26 distinct rows
    assert committed == [] and store.count_rows() == 0  # nothing is due yet
    chain.join()
    assert store.count_rows() == 26
    assert committed == [{("spool:a", 0): 20, ("spool:b", 3): 110}]
    letters = [orjson.loads(line) for line in (tmp_path / "dead.jsonl").read_bytes().splitlines()]
    assert [(d["reason"], d["source"]) for d in letters] == [("bad_json", f"spool:a:0:{i}") for i in (0, 5, 10, 15)]
    assert chain.stats.rows == 26 and chain.stats.dead_letters == 4 and chain.stats.messages == 30


def test_a_failed_dead_letter_flush_inserts_and_commits_nothing(store: EventStore) -> None:
    committed: list[object] = []
    chain = build_chain(writer=BatchWriter(store), dead_letters=_FailingSink(), commit=committed.append,
                        max_rows=1_000, max_seconds=60)
    chain.submit(_chunk("t", 0, 0, _values(10, bad_every=3)))
    with pytest.raises(ConnectionError):
        chain.join()
    assert store.count_rows() == 0 and committed == []


def test_a_crash_before_commit_replays_the_batch_with_the_same_token(store: EventStore, tmp_path) -> None:
    def crash(batch) -> None:
        raise RuntimeError("crash before commit")

    values = _values(50)
    for before_commit in (crash, None):
        committed: list[object] = []
        chain = build_chain(writer=BatchWriter(store), dead_letters=DeadLetterFile(tmp_path / "d.jsonl"),
                            commit=committed.append, max_rows=1_000, max_seconds=60, before_commit=before_commit)
        chain.submit(_chunk("t", 0, 0, values))
        if before_commit is crash:
            with pytest.raises(RuntimeError):
                chain.join()
            assert committed == []
        else:
            chain.join()
            assert len(committed) == 1
    assert store.count_rows() == 50  # the replayed insert was dropped by its token


def test_the_burst_policy_stops_the_flush_before_any_letter_is_sent(store: EventStore, tmp_path) -> None:
    sink = DeadLetterFile(tmp_path / "dead.jsonl")
    committed: list[object] = []
    policy = BurstPolicy(InvalidBurstBreaker(max_consecutive=30, max_ratio=1.0, window=100))
    chain = build_chain(writer=BatchWriter(store), dead_letters=sink, commit=committed.append,
                        max_rows=1_000, max_seconds=60, policy=policy)
    chain.submit(_chunk("t", 0, 0, _values(10)))
    chain.submit(_chunk("t", 0, 10, [b"{bad"] * 40))
    with pytest.raises(InvalidBurstError, match="30 consecutive") as trip:
        chain.join()
    assert trip.value.offset == 39
    assert not sink.path.exists() and store.count_rows() == 0 and committed == []


def test_tenant_refusals_are_dead_lettered_without_tripping_the_burst_policy(store: EventStore, tmp_path) -> None:
    """A producer writing another tenant's events to a bound topic is refused event by
    event, with its reason; it is not a corrupt stream, so it must not stop ingest for
    every tenant. Broken messages still count, and refusals between them do not reset
    their run."""
    sink = DeadLetterFile(tmp_path / "dead.jsonl")
    committed: list[object] = []
    policy = BurstPolicy(InvalidBurstBreaker(max_consecutive=30, max_ratio=0.5, window=100))
    chain = build_chain(writer=BatchWriter(store), dead_letters=sink, commit=committed.append,
                        max_rows=1_000, max_seconds=60, policy=policy)
    alice = frozenset({"alice"})
    values = [payload(project="alice", decision_reason=str(i)) for i in range(10)]
    values += [payload(project="bob", decision_reason=str(i)) for i in range(200)]  # all refused
    chain.submit(RawChunk("t", 0, list(range(210)), [b"k"] * 210, values, 210, projects=alice))
    chain.join()
    letters = [orjson.loads(line) for line in sink.path.read_bytes().splitlines()]
    assert len(letters) == 200 and {letter["reason"] for letter in letters} == {"project_not_bound_to_topic"}
    assert store.count_rows() == 10 and len(committed) == 1

    # 20 broken, 50 refused, 20 broken: 40 consecutive broken ones, a trip at the 30th.
    mixed = [b"{bad"] * 20 + [payload(project="bob")] * 50 + [b"{bad"] * 20
    chain.submit(RawChunk("t", 0, list(range(210, 300)), [b"k"] * 90, mixed, 300, projects=alice))
    with pytest.raises(InvalidBurstError, match="30 consecutive") as trip:
        chain.join()
    assert trip.value.offset == 210 + 20 + 50 + 9


def test_a_batch_is_handed_on_when_full_and_when_old() -> None:
    clock = [0.0]
    batch = Batch(max_rows=5, max_seconds=2.0, clock=lambda: clock[0])
    assert not batch.is_due()
    batch.add(_chunk("t", 0, 0, [b"x"]), EncodedChunk(1, b"", []))
    assert not batch.is_due()
    clock[0] = 2.5
    assert batch.is_due()


def test_status_says_whether_ingest_keeps_up() -> None:
    now = [0.0]
    status = IngestStatus(window_s=30, keep_up_seconds=5, clock=lambda: now[0])
    assert status.snapshot()["keeping_up"] is True  # nothing read yet
    for lag in (1_000, 20_000, 40_000):
        now[0] += 10
        status.record(messages=10_000, rows=10_000, lag=lag, insert_s=0.05)
    falling_behind = status.snapshot()
    assert falling_behind["eps"] == 1_000.0 and falling_behind["lag"] == 40_000
    assert falling_behind["keeping_up"] is False
    for lag in (30_000, 10_000, 2_000):
        now[0] += 10
        status.record(messages=10_000, rows=10_000, lag=lag, insert_s=0.05)
    assert status.snapshot()["keeping_up"] is True and status.snapshot()["lag_trend"] < 0


def test_a_group_keeps_up_only_if_every_member_does_and_its_figures_add_up() -> None:
    now = [0.0]
    steady = IngestStatus(window_s=30, keep_up_seconds=5, clock=lambda: now[0])
    behind = IngestStatus(window_s=30, keep_up_seconds=5, clock=lambda: now[0])
    for lag in (1_000, 20_000, 40_000):
        now[0] += 10
        steady.record(messages=10_000, rows=9_000, lag=0, insert_s=0.05)
        behind.record(messages=5_000, rows=5_000, lag=lag, insert_s=0.2)
    group = combine_snapshots([steady.snapshot(), behind.snapshot()])
    assert (group["messages"], group["rows"], group["eps"], group["lag"]) == (45_000, 42_000, 1_500.0, 40_000)
    assert (group["batches_in_window"], group["mean_batch_rows"], group["last_insert_ms"]) == (6, 7_000.0, 200.0)
    assert group["keeping_up"] is False  # one member falling behind is the group falling behind
    assert [m["keeping_up"] for m in group["members"]] == [True, False]
    assert combine_snapshots([steady.snapshot()])["keeping_up"] is True
