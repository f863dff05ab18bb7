"""Boundary rules of ingestion: a re-sent event is counted once on every road, and a
filtered dead-letter replay leaves the letters it skips replayable."""

from __future__ import annotations

import uuid

import orjson
import pytest
from factories import payload
from fastapi.testclient import TestClient
from kafka_drain import consume_to_end
from kafka_helpers import fast_payloads, produce, read_topic

from retrylens.config import Settings
from retrylens.ingest.consumer import IngestConsumer
from retrylens.ingest.dlq import REPLAYED_HEADER, replay_dead_letters
from retrylens.ingest.processor import SourceRef, ValidEvent, process
from retrylens.ingest.spool_ingestor import SpoolIngestor
from retrylens.sdk.transport.spool import Spool
from retrylens.store import EventStore


def _without_event_id(**overrides: object) -> bytes:
    body = orjson.loads(payload(**overrides))
    del body["event_id"]
    return orjson.dumps(body)


def _event_id(raw: bytes, source: SourceRef = SourceRef("events", 0, 1)) -> uuid.UUID:
    outcome = process(raw, source)
    assert isinstance(outcome, ValidEvent)
    return uuid.UUID(str(outcome.row[0]))


def test_an_event_without_id_gets_the_same_id_each_time_it_is_processed() -> None:
    raw = _without_event_id(decision_reason="a")
    assert _event_id(raw) == _event_id(raw, SourceRef("spool:x", 3, 99))
    # Whitespace and key order are the serializer's, not the event's.
    reordered = orjson.dumps(dict(reversed(list(orjson.loads(raw).items()))), option=orjson.OPT_INDENT_2)
    assert _event_id(reordered) == _event_id(raw)
    assert _event_id(_without_event_id(decision_reason="b")) != _event_id(raw)


def test_an_event_id_in_a_nested_object_only_is_not_the_events_id() -> None:
    raw = _without_event_id(input_features={"event_id": 1.0})
    assert _event_id(raw) == _event_id(raw)


def test_a_sent_event_id_is_kept() -> None:
    raw = payload()
    assert _event_id(raw) == uuid.UUID(orjson.loads(raw)["event_id"])


@pytest.mark.clickhouse
def test_the_same_bytes_spooled_twice_are_stored_once(settings: Settings, store: EventStore) -> None:
    raw = _without_event_id()
    spool = Spool(settings.effective_spool_dir / "agent")
    spool.append([(b"task-1", raw)], sync=True)
    spool.append([(b"task-1", raw)], sync=True)
    spool.close()
    # No merge (the fixture events' bulky-column TTL has passed: one would run at once) may
    # collapse the two physical rows before they are counted.
    store.client.command(store.sql("SYSTEM STOP MERGES [[db]].events"))
    assert SpoolIngestor(settings, store).drain() == 2
    assert store.count_rows() == 2
    assert store.count_distinct_events() == 1


@pytest.mark.clickhouse
def test_the_same_event_posted_twice_over_http_is_stored_once(settings: Settings, store: EventStore) -> None:
    from retrylens.api.app import create_app

    api_settings = settings.model_copy(update={"api_keys": {"acme": "k"}})
    event = orjson.loads(_without_event_id())
    with TestClient(create_app(api_settings, store)) as client:
        for _ in range(2):
            answer = client.post("/v1/events", json={"events": [event]}, headers={"X-API-Key": "k"}).json()
            assert answer["accepted"] == 1
    SpoolIngestor(api_settings, store).drain()
    assert store.count_distinct_events() == 1


@pytest.mark.kafka
@pytest.mark.clickhouse
def test_the_same_bytes_produced_twice_to_kafka_are_stored_once(kafka_settings: Settings, store: EventStore) -> None:
    raw = _without_event_id()
    produce(kafka_settings, [(b"task-1", raw), (b"task-1", raw), *fast_payloads(10)])
    consume_to_end(kafka_settings, IngestConsumer(kafka_settings, store))
    assert store.count_distinct_events() == 11


@pytest.mark.kafka
@pytest.mark.clickhouse
def test_a_replay_filtered_by_reason_leaves_the_other_letters_replayable(
    kafka_settings: Settings, store: EventStore
) -> None:
    unknown_version = [(b"v%d" % i, payload(schema_version=7, decision_reason=str(i))) for i in range(10)]
    bad_json = [(b"j%d" % i, b'{"broken": %d' % i) for i in range(6)]
    produce(kafka_settings, [*fast_payloads(5), *unknown_version, *bad_json])
    consume_to_end(kafka_settings, IngestConsumer(kafka_settings, store))

    first = replay_dead_letters(kafka_settings, reason="bad_json", idle_timeout_s=3)
    assert (first.replayed, first.skipped) == (6, 10)
    second = replay_dead_letters(kafka_settings, reason="unknown_schema_version", idle_timeout_s=3)
    assert second.replayed == 10
    replayed = [m for m in read_topic(kafka_settings, kafka_settings.kafka_topic) if m.headers]
    assert sorted(m.value for m in replayed) == sorted(v for _, v in [*unknown_version, *bad_json])
    assert all(REPLAYED_HEADER in dict(m.headers) for m in replayed)
    assert replay_dead_letters(kafka_settings, idle_timeout_s=2).replayed == 0  # each letter once


@pytest.mark.kafka
@pytest.mark.clickhouse
def test_a_dead_letter_is_replayed_into_the_topic_it_came_from(kafka_settings: Settings, store: EventStore) -> None:
    """With projects bound to topics, a letter from ``events.<tenant>`` must go back there:
    sent to the shared event topic it would be refused again (project not bound to it)."""
    tenant_topic = f"{kafka_settings.kafka_topic}.acme"
    settings = kafka_settings.model_copy(update={"project_topics": {"acme": [tenant_topic]}})
    broken = [(b"j%d" % i, b'{"broken": %d' % i) for i in range(3)]
    produce(settings, broken, topic=tenant_topic)
    produce(settings, [(b"plain", b"not json")])  # from the shared event topic
    consume_to_end(settings, IngestConsumer(settings, store))
    # A letter whose origin names a topic the consumer does not read (written to the DLQ by
    # hand, or after the binding changed) goes to the shared event topic, never elsewhere.
    forged = [("source_topic", b"payments"), ("reason", b"bad_json")]
    from retrylens.ingest.kafka_clients import make_producer

    producer = make_producer(settings)
    producer.send(settings.kafka_dlq_topic, key=b"forged", value=b"{", headers=forged)
    producer.flush(timeout=30)
    producer.close()

    result = replay_dead_letters(settings, idle_timeout_s=3)
    assert result.replayed == 5
    back_home = [m for m in read_topic(settings, tenant_topic) if m.headers]
    assert sorted(m.value for m in back_home) == sorted(v for _, v in broken)
    shared = [m for m in read_topic(settings, settings.kafka_topic) if m.headers]
    assert sorted(m.value for m in shared) == sorted([b"{", b"not json"])
