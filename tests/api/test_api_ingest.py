"""HTTP ingestion: judged like Kafka messages, valid events stored exactly once, invalid ones explained."""

from __future__ import annotations

import time

import pytest
from apitest_support import ACME
from fastapi.testclient import TestClient

from retrylens.analytics.synthetic import synthetic_events
from retrylens.api.app import create_app
from retrylens.api.server import IngestThreads
from retrylens.ingest.spool_ingestor import SpoolIngestor

pytestmark = pytest.mark.clickhouse


def _events(n: int, project: str = "acme", seed: int = 11) -> list[dict]:
    return [e.model_dump(mode="json") for e in synthetic_events(n, seed=seed, project=project)]


def test_invalid_events_are_rejected_per_item_with_the_processor_reason(client):
    good = _events(1)[:2]
    bad = [
        {**good[0], "schema_version": 9},
        {**good[0], "kind": "attempt_failed", "error_type": None},
        "not an object",
        {k: v for k, v in good[0].items() if k != "schema_version"},
        {**good[0], "error_detail": {"message": "x" * 70_000}},
    ]
    result = client.post("/v1/events", json={"events": [good[0], *bad, good[1]]}, headers=ACME).json()
    assert result["accepted"] == 2 and result["road"] == "spool"
    reasons = {r["index"]: r["reason"] for r in result["rejected"]}
    assert reasons == {1: "unknown_schema_version", 2: "invalid_fields", 3: "not_an_object",
                       4: "missing_schema_version", 5: "oversized"}
    assert "attempt_failed events need an error_type" in result["rejected"][1]["detail"]


def test_valid_events_are_stored_exactly_once_even_when_sent_twice(api_settings, store):
    events = _events(30)
    with TestClient(create_app(api_settings, store)) as client:
        for _ in range(2):
            assert client.post("/v1/events", json={"events": events}, headers=ACME).json()["accepted"] == len(events)
    SpoolIngestor(api_settings, store).drain()
    assert store.count_distinct_events("acme") == len(events)
    assert store.count_rows() >= len(events)


def test_embedded_road_end_to_end_through_the_servers_spool_ingestor(api_settings, store):
    ingest = IngestThreads(api_settings, store, spool_interval_s=0.1)
    ingest.start()
    try:
        with TestClient(create_app(api_settings, store, health=ingest.status)) as client:
            events = _events(20, seed=12)
            assert client.post("/v1/events", json={"events": events}, headers=ACME).json()["accepted"] == len(events)
            # Waits for the ingestor to report the rows written, not for them to show in `events`:
            # ClickHouse makes an insert's `events` rows readable before its materialized views'
            # rows (the rollup's open set among them), and the insert returns only once every
            # view has its rows; in between, a read saw 111 events and an empty open set (0 tasks
            # where the exact read gave 20; tests/foundation/test_view_visibility.py). The
            # insert's engine threads run at nice +10 (below the API): on a busy machine they get
            # a small share of a core, so it is given long (the loop ends as soon as the rows are in).
            deadline = time.monotonic() + 120
            while ingest.status()["spool_rows"] < len(events) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert store.count_distinct_events("acme") == len(events), "not ingested within 120 s"
            rollup = client.get("/v1/projects/acme/metrics", headers=ACME).json()["metrics"]
            assert rollup["tasks"] == 20
            exact = client.get("/v1/projects/acme/metrics?source=raw", headers=ACME).json()["metrics"]
            assert {k: v for k, v in rollup.items() if isinstance(v, int)} == {
                k: v for k, v in exact.items() if isinstance(v, int)
            }
            assert client.get("/healthz").json()["spool_rows"] == len(events)
            assert (api_settings.effective_spool_dir / "http").is_dir()
    finally:
        ingest.stop()
    assert store.count_distinct_events("acme") == len(events)


@pytest.mark.kafka
def test_kafka_road_produces_keyed_by_task_and_the_consumer_stores_once(kafka_settings, store):
    from kafka_drain import consume_to_end

    from retrylens.ingest.consumer import IngestConsumer
    from retrylens.ingest.kafka_clients import ensure_topics

    settings = kafka_settings.model_copy(update={"api_keys": {"acme": "k"}})
    ensure_topics(settings)
    events = _events(10, seed=13)
    with TestClient(create_app(settings, store)) as client:
        result = client.post("/v1/events", json={"events": events}, headers={"X-API-Key": "k"}).json()
    assert result == {"accepted": len(events), "rejected": [], "road": "kafka"}
    consume_to_end(settings, IngestConsumer(settings, store))
    assert store.count_distinct_events("acme") == len(events)
