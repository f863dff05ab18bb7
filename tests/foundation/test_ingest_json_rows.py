"""The consumer's JSON-row insert stores exactly the rows the Native insert stored.

The decode step writes each valid message as an event line (the validated struct as
msgspec encodes it, :mod:`retrylens.store.event_lines`) that ClickHouse parses and turns
into a row in C++ (``INSERT … SELECT``); every other road (HTTP, tests, the writer's fallback) builds
Native blocks in Python. Differentially, on the same messages through both roads, every
column of every stored row must be equal — fleet and failure-heavy events, every field's
boundary values (the probe of ``test_wire.py``), unicode and control characters, maximal
lengths, missing optional fields, duplicates, and floats chosen to sit where a careless
parse would round differently. ``ingested_at`` is the only column allowed to differ (it
is the insert's clock); it is checked to lie within the test's run.
"""

from __future__ import annotations

import random
import struct
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from factories import make_event, make_events
from test_wire import _FIELD_PATHS, _FULL, _candidates, _with

from retrylens.config import Settings
from retrylens.ingest.batch import Batch
from retrylens.ingest.encoder import EncodedChunk, RawChunk, encode_chunk
from retrylens.ingest.processor import InvalidMessage, SourceRef, ValidEvent, process
from retrylens.ingest.writer import BatchWriter, insert_event_lines
from retrylens.store import EventStore, open_store

TOPIC = "events"


@pytest.fixture
def json_store(settings: Settings) -> Iterator[EventStore]:
    """A second database in the same engine, filled by the JSON-row road."""
    database = f"{settings.clickhouse_database}_json"
    other = open_store(settings.model_copy(update={"clickhouse_database": database}))
    yield other
    other.client.command(f"DROP DATABASE IF EXISTS `{database}`")


def _stored(store: EventStore) -> list[tuple[Any, ...]]:
    return store.client.query(
        store.sql("SELECT * EXCEPT (ingested_at) FROM [[db]].events ORDER BY kafka_partition, kafka_offset")
    ).result_rows


def _ingested_at(store: EventStore) -> list[datetime]:
    rows = store.client.query(store.sql("SELECT ingested_at FROM [[db]].events")).result_rows
    return [row[0].replace(tzinfo=UTC) if row[0].tzinfo is None else row[0] for row in rows]


def _through_both(store: EventStore, json_store: EventStore, values: list[bytes | None]) -> EncodedChunk:
    """The old road into ``store``, the JSON road into ``json_store``; returns the chunk."""
    for each in (store, json_store):  # duplicates stay apart: every physical row is compared
        each.client.command(each.sql("SYSTEM STOP MERGES [[db]].events"))
    offsets = list(range(len(values)))
    rows, invalid = [], []
    for offset, value in zip(offsets, values, strict=True):
        outcome = process(value, SourceRef(TOPIC, 3, offset))
        if isinstance(outcome, ValidEvent):
            rows.append(outcome.row)
        else:
            invalid.append((offset, outcome))
    store.insert_rows(rows)
    chunk = encode_chunk(TOPIC, 3, offsets, values)
    insert_event_lines(json_store, [chunk.block], rows=chunk.rows, dedup_token=None)
    assert chunk.rows == len(rows)
    assert [(i, m.reason, m.detail) for i, m in chunk.invalid] == [(i, m.reason, m.detail) for i, m in invalid]
    return chunk


def _assert_same_rows(store: EventStore, json_store: EventStore, expected_rows: int) -> None:
    old, new = _stored(store), _stored(json_store)
    assert len(old) == expected_rows
    assert len(new) == len(old)
    for before, after in zip(old, new, strict=True):
        assert after == before


def _fleet_values(n: int) -> list[bytes]:
    from retrylens.simulation.fleet import run_fleet
    from retrylens.simulation.scenario import load_scenario

    events: list[Any] = []
    run_fleet(load_scenario(), tasks=60, seed=11, emit=events.append)
    return [event.to_json_bytes() for event in events[:n]]


def _failure_values(n: int) -> list[bytes | None]:
    rng = random.Random(5)
    out: list[bytes | None] = []
    for i in range(n):
        event = make_event(
            kind="attempt_failed",
            error_type=rng.choice(["timeout", "rate_limit", "schema_mismatch"]),
            retryable=rng.choice([True, False, None]),
            error_detail={"message": "upstream ⏱ timed out\n" * rng.randrange(0, 4), "code": "E1", "status": 504},
            context_snapshot={"message_count": i, "token_count": 10 * i, "pollution_score": rng.random()},
            attempt=i % 4,
        )
        raw = event.to_json_bytes()
        out.append(raw)
        if i % 7 == 0:
            out.append(b"{broken" + raw)  # a dead letter between valid neighbours
        if i % 11 == 0:
            out.append(raw)  # a duplicate
        if i % 13 == 0:
            out.append(None)
    return out


def test_fleet_and_failure_events_are_stored_identically(store: EventStore, json_store: EventStore) -> None:
    values: list[bytes | None] = [*_fleet_values(400), *_failure_values(150), *[e.to_json_bytes() for e in make_events(100)]]
    started = datetime.now(UTC)
    chunk = _through_both(store, json_store, values)
    assert chunk.invalid, "the failure-heavy mix has dead letters"
    _assert_same_rows(store, json_store, chunk.rows)
    finished = datetime.now(UTC)
    for at in _ingested_at(json_store):
        assert started.replace(microsecond=started.microsecond // 1000 * 1000) <= at <= finished


def test_every_fields_boundary_values_are_stored_identically(store: EventStore, json_store: EventStore) -> None:
    """Valid and invalid variants of every field of every part (ts-less ones aside: their
    ts is the clock at validation, which differs between the two roads by design)."""
    values: list[bytes | None] = [orjson.dumps(_FULL)]
    for path, members in _FIELD_PATHS:
        current: Any = _FULL
        for step in path:
            current = current[step]
        values += [_with(path, value) for value in _candidates(members, current)]
        if not isinstance(path[-1], int) and path != ("ts",):
            values.append(_with(path, None, delete=True))
    sent_id = str(_FULL["event_id"]).encode()
    values = [v.replace(sent_id, str(uuid.UUID(int=i)).encode()) if v else v for i, v in enumerate(values)]
    chunk = _through_both(store, json_store, values)
    assert chunk.rows > 800 and len(chunk.invalid) > 800
    _assert_same_rows(store, json_store, chunk.rows)


def _float32_edges(rng: random.Random, n: int) -> list[float]:
    """Doubles in (0, 1] at and beside the midpoint of two float32 neighbours."""
    out = []
    for _ in range(n):
        low = struct.unpack("<f", struct.pack("<f", rng.uniform(1e-6, 0.999)))[0]
        bits = struct.unpack("<I", struct.pack("<f", low))[0]
        high = struct.unpack("<f", struct.pack("<I", bits + 1))[0]
        middle = (low + high) / 2
        out += [middle, float.fromhex(middle.hex()), low, high, rng.random() or 1.0]
    return [min(1.0, max(5e-324, x)) for x in out]


def test_floats_are_stored_identically_at_rounding_edges(store: EventStore, json_store: EventStore) -> None:
    rng = random.Random(17)
    values: list[bytes | None] = []
    for share in _float32_edges(rng, 300):
        cost = rng.choice([share, share * 10 ** rng.randrange(-300, 6), 5e-324, 2.0**19 + 0.5, 0.1 + 0.2])
        values.append(
            make_event(
                context_snapshot={"message_count": 1, "pollution_score": share, "recent_error_share": 1 - share},
                propensity=share,
                cost_usd=cost,
                input_features={"ratio": share * 3, "tiny": 1e-300, "big": 1.5e300},
            ).to_json_bytes()
        )
    chunk = _through_both(store, json_store, values)
    _assert_same_rows(store, json_store, chunk.rows)


def test_an_event_without_id_or_ts_gets_the_same_id_on_both_roads(store: EventStore, json_store: EventStore) -> None:
    body = orjson.loads(make_event(task_id="no-id", context_snapshot={"message_count": 2}).to_json_bytes())
    del body["event_id"]
    spaced = orjson.dumps(body, option=orjson.OPT_INDENT_2)  # same event, other spacing
    without_ts = dict(body)
    del without_ts["ts"]
    values: list[bytes | None] = [orjson.dumps(body), spaced, orjson.dumps(without_ts)]
    started = datetime.now(UTC).replace(microsecond=0)
    _through_both(store, json_store, values)
    old, new = _stored(store), _stored(json_store)
    assert len(old) == len(new) == 3
    assert old[:2] == new[:2]
    assert old[0][0] == old[1][0]  # one derived id for both spellings
    ts_column = 2
    for row in (old[2], new[2]):
        assert started <= row[ts_column].replace(tzinfo=UTC) <= datetime.now(UTC)
        assert row[:ts_column] + row[ts_column + 1 :] == old[2][:ts_column] + old[2][ts_column + 1 :]


def _batch(values: list[bytes | None], block: bytes, rows: int) -> Batch:
    raw = RawChunk(TOPIC, 0, list(range(len(values))), [None] * len(values), values, len(values))
    batch = Batch(max_rows=10_000, max_seconds=1.0)
    batch.add(raw, EncodedChunk(rows, block, []))
    return batch


def test_a_batch_clickhouse_rejects_goes_in_as_native_rows_once(store: EventStore) -> None:
    """A rejected JSON insert stores nothing (it is atomic), and the writer's Native
    fallback stores the same valid rows once, under the same deduplication token."""
    values: list[bytes | None] = [e.to_json_bytes() for e in make_events(3000)]
    good = encode_chunk(TOPIC, 0, list(range(len(values))), values)
    corrupted = good.block[: -200] + b'["not-a-uuid"]\n'  # the last row is one ClickHouse refuses
    writer = BatchWriter(store)
    assert writer.write(_batch(values, corrupted, good.rows)) == good.rows
    assert writer.fallbacks == 1
    assert store.count_rows() == good.rows  # nothing of the rejected insert survived
    assert store.event_ids() == {str(uuid.UUID(orjson.loads(v)["event_id"])) for v in values if v}
    writer.write(_batch(values, good.block, good.rows))  # the same spans: a replay
    assert store.count_rows() == good.rows


def test_a_replayed_batch_of_json_rows_is_not_stored_twice(store: EventStore) -> None:
    values: list[bytes | None] = [e.to_json_bytes() for e in make_events(50)]
    chunk = encode_chunk(TOPIC, 0, list(range(len(values))), values)
    writer = BatchWriter(store)
    writer.write(_batch(values, chunk.block, chunk.rows))
    writer.write(_batch(values, chunk.block, chunk.rows))
    assert writer.fallbacks == 0
    assert store.count_rows() == 50


def test_invalid_messages_are_judged_the_same_as_by_the_processor() -> None:
    values: list[bytes | None] = [b"", b"[]", b"{}", b'{"schema_version": 2}', b"\xff\xfe", None]
    chunk = encode_chunk(TOPIC, 0, list(range(len(values))), values)
    verdicts = [process(v, SourceRef(TOPIC, 0, i)) for i, v in enumerate(values)]
    assert all(isinstance(v, InvalidMessage) for v in verdicts)
    assert chunk.rows == 0 and chunk.block == b""
    assert [(i, m.reason, m.detail) for i, m in chunk.invalid] == [
        (i, v.reason, v.detail) for i, v in enumerate(verdicts) if isinstance(v, InvalidMessage)
    ]
