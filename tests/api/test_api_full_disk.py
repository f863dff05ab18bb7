"""The HTTP intake on a real full disk (embedded mode: events go to the server's spool).

Issue 36: while the spool's disk was full the API answered 500 "internal server error",
``/healthz`` said ok, and the batches acknowledged after space came back were lost behind
a torn frame. Now a batch that cannot be persisted is answered 503 with the reason, the
health check says ``degraded`` until a batch goes through again, and every event answered
200 is stored, once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from apitest_support import ACME
from fastapi.testclient import TestClient
from full_disk import fill, free, small_filesystem

from retrylens.analytics.synthetic import synthetic_events
from retrylens.api.app import create_app
from retrylens.config import Settings
from retrylens.ingest.spool_ingestor import SpoolIngestor
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse


@pytest.fixture
def disk() -> Iterator[Path]:
    with small_filesystem(512) as directory:
        yield directory


def _batch(seed: int, n: int = 5) -> dict[str, list[dict]]:
    return {"events": [e.model_dump(mode="json") for e in synthetic_events(n, seed=seed, project="acme")]}


def test_a_full_disk_is_a_503_with_its_reason_and_every_event_answered_200_is_stored_once(
    api_settings: Settings, store: EventStore, disk: Path
) -> None:
    settings = api_settings.model_copy(update={"spool_dir": disk / "spool"})
    accepted = 0
    with TestClient(create_app(settings, store)) as client:
        first = client.post("/v1/events", json=_batch(1), headers=ACME)
        assert first.status_code == 200
        accepted += first.json()["accepted"]
        fill(disk)
        refused = client.post("/v1/events", json=_batch(2), headers=ACME)
        assert refused.status_code == 503, refused.text
        assert "No space left on device" in refused.json()["detail"]
        health = client.get("/healthz").json()
        assert health["status"] == "degraded" and "No space left on device" in health["reason"]
        free(disk)
        for seed in (3, 4):
            answer = client.post("/v1/events", json=_batch(seed), headers=ACME)
            assert answer.status_code == 200
            accepted += answer.json()["accepted"]
        assert client.get("/healthz").json()["status"] == "ok"
    assert accepted == sum(len(_batch(seed)["events"]) for seed in (1, 3, 4))
    SpoolIngestor(settings, store).drain()
    assert store.count_distinct_events("acme") == accepted
    assert store.count_rows() == accepted  # the refused batch left nothing behind
