"""Pure parts of the consumer: the invalid-burst breaker's bulk path and the chunk encoder."""

from __future__ import annotations

import random

from factories import make_events, payload

from retrylens.ingest.breaker import InvalidBurstBreaker
from retrylens.ingest.encoder import encode_chunk
from retrylens.ingest.processor import InvalidReason, SourceRef, process
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
    store.insert_native([chunk.block], dedup_token="chunk-1")
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
