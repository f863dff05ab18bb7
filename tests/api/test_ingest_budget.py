"""Each key's ingest budget in bytes a second: a flooding tenant gets 429 + Retry-After, the others are served."""

from __future__ import annotations

import time

import pytest
from apitest_support import ACME, GLOBEX
from fastapi.testclient import TestClient
from manual_clock import ManualClock

from retrylens.analytics.synthetic import synthetic_events
from retrylens.api.app import create_app
from retrylens.api.ingest_budget import REFUSAL_HOLD_S, TokenBuckets
from retrylens.config import Settings
from retrylens.store import EventStore


def test_a_bucket_lets_a_burst_in_then_charges_the_debt_at_the_rate() -> None:
    clock = ManualClock()
    buckets = TokenBuckets(rate=1000.0, burst=4000.0, clock=clock)
    assert buckets.wait_s("a") == 0
    buckets.take("a", 3000)
    assert buckets.wait_s("a") == 0  # 1,000 left: the next request is let in
    buckets.take("a", 3000)  # and may take the bucket into debt
    assert buckets.wait_s("a") == pytest.approx(2.0)
    assert buckets.wait_s("b") == 0  # another tenant has its own bucket
    clock.now += 1.5
    assert buckets.wait_s("a") == pytest.approx(0.5)
    clock.now += 0.5
    assert buckets.wait_s("a") == 0
    clock.now += 3600
    buckets.take("a", 4001)  # refilled to the burst, never beyond it
    assert buckets.wait_s("a") == pytest.approx(0.001)


def _body(project: str, tasks: int, seed: int) -> dict:
    return {"events": [e.model_dump(mode="json") for e in synthetic_events(tasks, seed=seed, project=project)]}


@pytest.mark.clickhouse
def test_the_flooding_key_gets_429_with_retry_after_while_another_tenant_is_served(api_settings: Settings,
                                                                                  store: EventStore) -> None:
    settings = api_settings.model_copy(update={"api_ingest_rate_bytes": 2048, "api_ingest_burst_bytes": 4096})
    flood = _body("acme", 8, seed=3)
    with TestClient(create_app(settings, store)) as client:
        answers = [client.post("/v1/events", json=flood, headers=ACME)]
        began = time.perf_counter()
        answers.append(client.post("/v1/events", json=flood, headers=ACME))
        held = time.perf_counter() - began
        assert answers[0].status_code == 200  # let in: the bucket was not in debt
        refused = answers[1]
        assert refused.status_code == 429
        size = len(answers[0].request.content)
        assert size > 4096
        # the debt (the body less the burst) repaid at the rate, in whole seconds, less the time
        # since, which includes the refusal's hold: a client ignoring Retry-After re-sends once a second
        debt_s = -(-(size - 4096) // 2048)
        assert debt_s >= 3 and held >= REFUSAL_HOLD_S * 0.95
        assert debt_s - 2 - held <= int(refused.headers["Retry-After"]) <= debt_s
        assert "api_ingest_rate_bytes" in refused.json()["detail"]
        other = client.post("/v1/events", json=_body("globex", 2, seed=4), headers=GLOBEX)
        assert other.status_code == 200 and other.json()["accepted"] > 0
        assert client.get("/v1/projects/globex/metrics", headers=GLOBEX).status_code == 200
        # the same key on the OTLP route: the same bucket
        assert client.post("/v1/traces", content=b"{}", headers={**ACME, "Content-Type": "application/json"}
                           ).status_code == 429


@pytest.mark.clickhouse
def test_a_budget_of_zero_is_no_limit_and_the_local_token_is_never_limited(api_settings: Settings,
                                                                          store: EventStore) -> None:
    from retrylens.api.auth import local_token

    flood = _body("acme", 2, seed=3)
    limited = api_settings.model_copy(update={"api_ingest_rate_bytes": 1024, "api_ingest_burst_bytes": 1024})
    token = {"X-API-Key": local_token(limited) or ""}
    unlimited = api_settings.model_copy(update={"api_ingest_rate_bytes": 0, "api_ingest_burst_bytes": 1024})
    for settings, headers in ((unlimited, ACME), (limited, token)):
        with TestClient(create_app(settings, store)) as client:
            assert {client.post("/v1/events", json=flood, headers=headers).status_code for _ in range(2)} == {200}
