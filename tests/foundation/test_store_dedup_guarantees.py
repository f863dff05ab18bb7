"""The store's side of "nothing counted twice", read on the stored rows (issue 25).

An event re-sent inside one insert is kept as a physical row until a merge (collapsing it
while inserting is left out on purpose: FINAL reads and merges do it anyway), and every
exact count reads it once, also per project.
"""

from __future__ import annotations

import pytest
from factories import make_events

from retrylens.ingest.encoder import encode_chunk
from retrylens.ingest.processor import SourceRef, ValidEvent, process
from retrylens.ingest.writer import insert_event_lines
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse


def _rows(values: list[bytes]) -> list[list]:
    outcomes = [process(value, SourceRef("t", 0, offset)) for offset, value in enumerate(values)]
    assert all(isinstance(outcome, ValidEvent) for outcome in outcomes)
    return [outcome.row for outcome in outcomes]  # type: ignore[union-attr]


def test_an_event_resent_within_one_insert_is_counted_once_on_both_roads(store: EventStore) -> None:
    store.client.command(store.sql("SYSTEM STOP MERGES [[db]].events"))
    events = make_events(6, tasks=3, seed=2)
    values = [e.to_json_bytes() for e in events] + [events[0].to_json_bytes()]
    store.insert_rows(_rows(values), dedup_token="native-1")
    assert (store.count_rows(), store.count_distinct_events()) == (7, 6)
    chunk = encode_chunk("t", 1, list(range(7)), values)
    insert_event_lines(store, [chunk.block], rows=chunk.rows, dedup_token="lines-1")
    assert (store.count_rows(), store.count_distinct_events()) == (14, 6)


def test_a_projects_exact_count_reads_its_own_events_once(store: EventStore) -> None:
    alpha = [e.to_json_bytes() for e in make_events(5, tasks=2, seed=1, project="alpha")]
    beta = [e.to_json_bytes() for e in make_events(3, tasks=2, seed=9, project="beta")]
    store.insert_rows(_rows(alpha + beta))
    store.insert_rows(_rows(alpha[:2]))  # re-sent in another insert
    assert store.count_distinct_events("alpha") == 5
    assert store.count_distinct_events("beta") == 3
    assert store.count_distinct_events("gamma") == 0
    assert store.count_distinct_events() == 8


def test_an_empty_insert_stores_nothing_and_a_replay_under_its_token_is_dropped(
    store: EventStore,
) -> None:
    store.insert_rows([], dedup_token="empty")
    store.insert_native([b""], dedup_token="empty")
    assert store.count_rows() == 0
    first = [e.to_json_bytes() for e in make_events(4, seed=3)]
    store.insert_rows(_rows(first), dedup_token="same")
    store.insert_rows(_rows(first), dedup_token="same")
    store.insert_rows(_rows(first))  # no token: a second physical copy, counted once
    assert (store.count_rows(), store.count_distinct_events()) == (8, 4)
