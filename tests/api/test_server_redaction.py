"""Secrets sent past the SDK are never stored: the server cleans an event's free text with the
SDK's own patterns (``retrylens.sdk.text.redaction``) on every road, before storage.

Each road with the real store (chDB) and, for Kafka, the real broker: raw HTTP (the events
as an agent without the SDK posts them, and the server's own spool on disk), OTLP exception
messages, and a producer writing straight to the event topic. Asserted on every stored
column of the project's rows and on the failure groups' example messages.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson
import pytest
from apitest_support import ACME
from fastapi.testclient import TestClient

from retrylens.analytics.synthetic import synthetic_events
from retrylens.api.app import create_app
from retrylens.ingest.spool_ingestor import SpoolIngestor
from retrylens.store import EventStore
from retrylens.store.sql import query_rows

pytestmark = pytest.mark.clickhouse

JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJtZWktY2hlbiIsImV4cCI6MTc2MDAwMDAwMH0.Qz3kP8vB7nR2pL9sK3wY6dT1"
#: what an agent without the SDK lets through, and the part of it that must never be stored
SECRETS = {
    "openai key": ("provider said: invalid key sk-proj-Zx81QmT4vB7nR2pL9sK3wY6d", "Zx81QmT4vB7nR2pL9sK3wY6d"),
    "aws access key": ("s3 refused AKIAZ7QW3ER5TY1UI9OP for bucket", "AKIAZ7QW3ER5TY1UI9OP"),
    "aws secret key": ("signing with wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY failed", "bPxRfiCYEXAMPLEKEY"),
    "bearer jwt": (f"401 for Authorization: Bearer {JWT}", "eyJzdWIiOiJtZWktY2hlbiIsImV4cCI6MTc2MDAwMDAwMH0"),
    "card": ("charge declined for card 4111 1111 1111 1111, try another", "4111 1111 1111 1111"),
    "password": ("login failed with password=hunter2xyz!", "hunter2xyz"),
    "github token": ("push refused for github_pat_11ABCDE2F0aBcDeFgHiJkLmN_oPqRsTuVwXyZ0123456789",
                     "11ABCDE2F0aBcDeFgHiJkLmN"),
    "classic github token": ("push refused for ghp_7Hq2Wm9Xk4Lp1Zr8Tn5Vb3Yc6Gd0Fs2Aj4Ke",
                             "7Hq2Wm9Xk4Lp1Zr8Tn5Vb3Yc6Gd0Fs2Aj4Ke"),
}
ALL_TEXT = " ; ".join(text for text, _ in SECRETS.values())


def _raw_events(project: str = "acme") -> list[dict[str, Any]]:
    """One task's events as a raw HTTP agent sends them, every secret in every free-text field
    (the failures' messages, the decisions' reasons, the context snapshot's last messages)."""
    events = [e.model_dump(mode="json") for e in synthetic_events(3, seed=11, project=project)]
    for event in events:
        if event["kind"] == "attempt_failed":
            event["error_detail"]["message"] = ALL_TEXT
            event["context_snapshot"] = {"message_count": 1, "last_messages": [
                {"role": "tool", "content": ALL_TEXT}]}
        if event["kind"] == "decision":
            event["decision_reason"] = ALL_TEXT[:500]
    assert any(e["kind"] == "attempt_failed" for e in events)
    return events


def _stored(store: EventStore, project: str = "acme") -> str:
    rows = query_rows(store.client, store.sql("SELECT * FROM [[db]].events WHERE project = {p:String}"),
                      {"p": project})
    assert rows, "nothing was stored: the test would prove nothing"
    return orjson.dumps(rows, default=str).decode()


def _leaks(text: str) -> list[str]:
    return [case for case, (_, secret) in SECRETS.items() if secret in text]


def _failure_examples(client: TestClient) -> str:
    groups = client.get("/v1/projects/acme/failure-groups?include_noise=true", headers=ACME).json()
    examples = [g["example_message"] for g in groups]
    assert examples, "no failure group: the examples prove nothing"
    return " ".join(examples)


def test_raw_http_events_are_stored_without_their_secrets(api_settings, store) -> None:
    with TestClient(create_app(api_settings, store)) as client:
        result = client.post("/v1/events", json={"events": _raw_events()}, headers=ACME).json()
        assert result["rejected"] == [] and result["accepted"] > 0
        spooled = b"".join(p.read_bytes() for p in (api_settings.effective_spool_dir / "http").rglob("*")
                           if p.is_file())
        assert b"attempt_failed" in spooled and _leaks(spooled.decode("utf-8", "replace")) == []
        SpoolIngestor(api_settings, store).drain()
        stored = _stored(store)
        assert _leaks(stored) == [] and "[REDACTED_KEY]" in stored and "[CARD]" in stored
        assert _leaks(_failure_examples(client)) == []


def test_an_event_re_sent_with_its_secret_is_still_stored_once(api_settings, store) -> None:
    """The cleaned event is re-encoded with its id (derived from what was sent when it had
    none), so a re-sent event deduplicates as before."""
    events = [{k: v for k, v in e.items() if k != "event_id"} for e in _raw_events()]
    with TestClient(create_app(api_settings, store)) as client:
        for _ in range(2):
            assert client.post("/v1/events", json={"events": events}, headers=ACME).json()["accepted"] == len(events)
    SpoolIngestor(api_settings, store).drain()
    assert store.count_distinct_events("acme") == len(events)


def _otlp_body(message: str) -> bytes:
    trace, t0 = uuid.uuid4().hex, time.time_ns() - 60_000_000_000  # a minute ago (the store keeps recent rows)

    def attrs(values: dict) -> list[dict]:
        return [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}
                for k, v in values.items()]

    spans = [
        {"traceId": trace, "spanId": "b7ad6b7169203331", "parentSpanId": "", "name": "workflow",
         "startTimeUnixNano": str(t0), "endTimeUnixNano": str(t0 + 900_000_000), "attributes": [],
         "status": {"code": 2}, "events": []},
        {"traceId": trace, "spanId": "00f067aa0ba902b7", "parentSpanId": "b7ad6b7169203331", "name": "chat gpt",
         "startTimeUnixNano": str(t0 + 1_000_000), "endTimeUnixNano": str(t0 + 800_000_000),
         "attributes": attrs({"gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 50}),
         "status": {"code": 2, "message": message},
         "events": [{"name": "exception", "attributes": attrs({"exception.type": "AuthenticationError",
                                                                "exception.message": message})}]},
    ]
    return orjson.dumps({"resourceSpans": [{"resource": {"attributes": attrs({"service.name": "raw-agent"})},
                                            "scopeSpans": [{"scope": {"name": "hand"}, "spans": spans}]}]})


def test_otlp_exception_messages_are_stored_without_their_secrets(api_settings, store) -> None:
    with TestClient(create_app(api_settings, store)) as client:
        response = client.post("/v1/traces", content=_otlp_body(ALL_TEXT),
                               headers={**ACME, "Content-Type": "application/json"})
        assert response.status_code == 200 and response.json()["retrylens"]["events"] > 0, response.text
        SpoolIngestor(api_settings, store).drain()
        stored = _stored(store)
        assert "AuthenticationError" in stored and _leaks(stored) == []
        assert _leaks(_failure_examples(client)) == []


@pytest.mark.kafka
def test_events_produced_straight_to_the_topic_are_stored_without_their_secrets(kafka_settings, store) -> None:
    """A producer of its own (no SDK, no HTTP): the consumer cleans before it inserts."""
    from kafka_drain import consume_to_end

    from retrylens.ingest.consumer import IngestConsumer
    from retrylens.ingest.kafka_clients import ensure_topics, make_producer

    ensure_topics(kafka_settings)
    producer = make_producer(kafka_settings)
    for event in _raw_events():
        producer.send(kafka_settings.kafka_topic, key=event["task_id"].encode(), value=orjson.dumps(event))
    producer.flush(timeout=30)
    producer.close()
    consume_to_end(kafka_settings, IngestConsumer(kafka_settings, store))
    stored = _stored(store)
    assert _leaks(stored) == [] and "Bearer [REDACTED]" in stored


@pytest.mark.kafka
def test_raw_http_events_on_the_kafka_road_reach_the_topic_without_their_secrets(kafka_settings, store) -> None:
    from kafka_drain import consume_to_end

    from retrylens.ingest.consumer import IngestConsumer
    from retrylens.ingest.kafka_clients import ensure_topics, make_consumer

    settings = kafka_settings.model_copy(update={"api_keys": {"acme": "k"}})
    ensure_topics(settings)
    with TestClient(create_app(settings, store)) as client:
        result = client.post("/v1/events", json={"events": _raw_events()}, headers={"X-API-Key": "k"}).json()
    assert result["road"] == "kafka" and result["rejected"] == []
    reader = make_consumer(settings, group_id=f"peek-{uuid.uuid4().hex[:8]}", consumer_timeout_ms=5_000)
    reader.subscribe([settings.kafka_topic])
    on_topic = b"".join(m.value for m in reader)
    reader.close()
    assert b"attempt_failed" in on_topic and _leaks(on_topic.decode()) == []
    consume_to_end(settings, IngestConsumer(settings, store))
    assert _leaks(_stored(store)) == []
