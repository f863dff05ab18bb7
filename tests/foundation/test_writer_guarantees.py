"""The writer's promise, read on the stored rows (issue 25, mutation testing).

A batch ClickHouse rejects as event lines goes in as Native rows re-judged from its raw
messages — exactly the rows the chain counted (tenant refusals left out), once — or not at
all: a batch whose re-judged rows disagree with its count is refused rather than stored
with another count.
"""

from __future__ import annotations

import time

import pytest
from clickhouse_connect.driver.exceptions import ClickHouseError
from factories import make_events, payload

from retrylens.ingest.batch import Batch
from retrylens.ingest.encoder import EncodedChunk, RawChunk, encode_raw
from retrylens.ingest.writer import BatchWriter
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse
CORRUPT = b'{"_t":"t","_p":0,"_o":0,"event_id":"not-a-uuid"}\n'


def _batch(raw: RawChunk, encoded: EncodedChunk) -> Batch:
    batch = Batch(max_rows=10_000, max_seconds=1.0)
    batch.add(raw, encoded)
    return batch


def test_a_rejected_batch_with_tenant_refusals_goes_in_as_its_bound_rows_once(
    store: EventStore,
) -> None:
    values = [payload(project="alice", decision_reason=str(i)) for i in range(6)]
    values[1:1] = [payload(project="bob")]  # refused: another tenant's event on alice's topic
    values.append(payload(project="bob"))
    values.append(b"{bad")  # dead-lettered
    values.append(payload(project="alice", decision_reason="last"))
    raw = RawChunk(
        "t",
        0,
        list(range(len(values))),
        [None] * len(values),
        values,
        len(values),
        frozenset({"alice"}),
    )
    encoded = encode_raw(raw)
    assert encoded.rows == 7
    rejected = EncodedChunk(encoded.rows, encoded.block + CORRUPT, encoded.invalid)
    writer = BatchWriter(store)
    started = time.perf_counter()
    assert writer.write(_batch(raw, rejected)) == 7
    assert 0 < writer.last_insert_s <= time.perf_counter() - started
    assert writer.fallbacks == 1
    stored = store.client.query(
        store.sql("SELECT project, kafka_offset FROM [[db]].events ORDER BY kafka_offset")
    )
    assert stored.result_rows == [("alice", offset) for offset in (0, 2, 3, 4, 5, 6, 9)]
    assert writer.write(_batch(raw, rejected)) == 7  # a replay: same token, nothing more
    assert store.count_rows() == 7 and writer.fallbacks == 2


@pytest.mark.parametrize("claimed", [2, 4])
def test_a_rejected_batch_whose_rows_disagree_with_its_count_is_refused(
    store: EventStore, claimed: int
) -> None:
    values = [event.to_json_bytes() for event in make_events(3, seed=6)]
    raw = RawChunk("t", 0, [0, 1, 2], [None] * 3, values, 3)
    encoded = encode_raw(raw)
    with pytest.raises(ClickHouseError):
        BatchWriter(store).write(_batch(raw, EncodedChunk(claimed, encoded.block + CORRUPT, [])))
    assert store.count_rows() == 0


def test_an_empty_batch_writes_nothing(store: EventStore) -> None:
    writer = BatchWriter(store)
    assert writer.write(Batch(max_rows=10, max_seconds=1.0)) == 0
    assert store.count_rows() == 0 and writer.fallbacks == 0


@pytest.mark.parametrize(
    "drift",
    [
        # A key the line structure does not know (an encoder renamed a field): read with
        # unknown keys skipped, the line would store tokens_in as 0.
        (b'"tokens_in":', b'"tokens_in_":'),
        # A null in a column that holds none: read with nulls as defaults, project ''.
        (b'"project":"alice"', b'"project":null'),
    ],
    ids=["unknown-key", "null-text"],
)
def test_a_line_clickhouse_would_fill_with_defaults_goes_in_from_its_raw_message(
    store: EventStore, drift: tuple[bytes, bytes]
) -> None:
    values = [payload(project="alice", tokens_in=7 + i) for i in range(3)]
    raw = RawChunk("t", 0, [0, 1, 2], [None] * 3, values, 3)
    encoded = encode_raw(raw)
    first, rest = encoded.block.split(b"\n", 1)
    assert drift[0] in first
    drifted = EncodedChunk(encoded.rows, first.replace(*drift) + b"\n" + rest, encoded.invalid)
    writer = BatchWriter(store)
    assert writer.write(_batch(raw, drifted)) == 3
    stored = store.client.query(
        store.sql(
            "SELECT kafka_offset, project, tokens_in FROM [[db]].events ORDER BY kafka_offset"
        )
    )
    assert stored.result_rows == [(0, "alice", 7), (1, "alice", 8), (2, "alice", 9)]
    assert writer.fallbacks == 1
