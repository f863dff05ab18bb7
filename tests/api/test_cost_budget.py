"""Each project's ingest budget in CPU seconds: a project whose exports cost more than its budget
gets 429 + Retry-After while another project's export is accepted; the CPU measured is charged
to the project that caused it (a failed parse too), never to another."""

from __future__ import annotations

import time

import orjson
import pytest
from apitest_support import ACME, GLOBEX
from fastapi.testclient import TestClient
from manual_clock import ManualClock

from retrylens.api.app import create_app
from retrylens.api.cost_budget import CostBudget, payers
from retrylens.api.measured import measured
from retrylens.config import Settings
from retrylens.store import EventStore


def test_a_project_spends_only_its_own_bucket_and_repays_its_debt_at_the_rate() -> None:
    clock = ManualClock()
    budget = CostBudget(rate=0.25, burst=1.0, clock=clock)
    budget.charge({"shop"}, 1.5)  # one export may take the bucket into debt
    assert budget.wait_s({"shop"}) == pytest.approx(2.0)  # 0.5 s of debt at 0.25 s a second
    assert budget.wait_s({"finance"}) == 0
    assert budget.wait_s({"finance", "shop"}) == pytest.approx(2.0)
    budget.charge({"finance", "shop"}, 2.0)  # a cost no one project can be named for: equal parts
    assert budget.wait_s({"finance"}) == 0  # 1.0 taken from its 1.0
    assert budget.wait_s({"shop"}) == pytest.approx(6.0)
    clock.now += 6.0
    assert budget.wait_s({"shop"}) == 0


def test_who_pays_before_the_project_is_known() -> None:
    assert payers(frozenset({"shop"}), None) == {"shop"}
    assert payers(frozenset({"shop", "finance"}), "finance") == {"finance"}
    assert payers(frozenset({"shop", "finance"}), "elsewhere") == {"shop", "finance"}  # not its to name
    assert payers(None, "shop") == frozenset()  # the local token is never charged


def test_measured_keeps_the_value_or_the_error_and_counts_this_threads_cpu() -> None:
    spin = measured(sum, range(200_000))
    assert spin.result() == sum(range(200_000)) and spin.cpu_s > 0
    failed = measured(int, "x")
    assert failed.cpu_s >= 0 and isinstance(failed.error, ValueError)
    with pytest.raises(ValueError):
        failed.result()
    slept = measured(time.sleep, 0.05)  # waiting is not work
    assert slept.cpu_s < 0.05


def _export(trace: str, spans: int = 40) -> bytes:
    """An OTLP/JSON export of ``spans`` chat spans under one root, each with some attributes."""
    t0 = 1_760_000_000_000_000_000
    root = {"traceId": trace, "spanId": "b7ad6b7169203331", "name": "workflow", "startTimeUnixNano": str(t0),
            "endTimeUnixNano": str(t0 + 10**9), "status": {}}
    chats = [{"traceId": trace, "spanId": f"{i + 1:016x}", "parentSpanId": "b7ad6b7169203331", "name": "chat",
              "startTimeUnixNano": str(t0 + i), "endTimeUnixNano": str(t0 + i + 10**6), "status": {},
              "attributes": [{"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}}]
              + [{"key": f"junk.{k}", "value": {"stringValue": "v"}} for k in range(50)]}
             for i in range(spans)]
    return orjson.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [root, *chats]}]}]})


JSON = {"Content-Type": "application/json"}


@pytest.mark.clickhouse
def test_a_project_past_its_cpu_budget_gets_429_while_another_projects_export_is_accepted(
        api_settings: Settings, store: EventStore) -> None:
    # a budget any export overdraws (a microsecond of CPU), and no byte budget: what refuses is the CPU
    settings = api_settings.model_copy(update={"api_ingest_cpu_share": 1e-6, "api_ingest_cpu_burst_s": 1e-6,
                                               "api_ingest_rate_bytes": 0})
    with TestClient(create_app(settings, store)) as client:
        first = client.post("/v1/traces", content=_export("1" * 32), headers={**ACME, **JSON})
        assert first.status_code == 200 and first.json()["retrylens"]["events"] > 0  # let in: not yet in debt
        again = client.post("/v1/traces", content=_export("2" * 32), headers={**ACME, **JSON})
        assert again.status_code == 429
        assert int(again.headers["Retry-After"]) >= 1
        assert "api_ingest_cpu_share" in again.json()["detail"]
        # the same project's events are refused too (its budget, whichever route spent it) ...
        assert client.post("/v1/events", json={"events": []}, headers=ACME).status_code == 429
        # ... and another project's budget is its own: its export is accepted and stored
        other = client.post("/v1/traces", content=_export("3" * 32), headers={**GLOBEX, **JSON})
        assert other.status_code == 200 and other.json()["retrylens"]["events"] > 0


@pytest.mark.clickhouse
def test_a_body_refused_after_parsing_is_charged_to_its_project_and_the_local_token_is_never_limited(
        api_settings: Settings, store: EventStore) -> None:
    from retrylens.api.auth import local_token

    settings = api_settings.model_copy(update={"api_ingest_cpu_share": 1e-6, "api_ingest_cpu_burst_s": 1e-6,
                                               "api_ingest_rate_bytes": 0})
    garbage = {**ACME, "Content-Type": "application/x-protobuf"}
    with TestClient(create_app(settings, store)) as client:
        assert client.post("/v1/traces", content=b"\xff\xff\xff\xff garbage", headers=garbage).status_code == 400
        assert client.post("/v1/traces", content=_export("4" * 32), headers={**ACME, **JSON}).status_code == 429
        token = {"X-API-Key": local_token(settings) or "", "X-RetryLens-Project": "globex", **JSON}
        assert [client.post("/v1/traces", content=_export(f"{i + 5}" * 32), headers=token).status_code
                for i in range(2)] == [200, 200]
