"""``POST /v1/projects/{project}/policy-reports``: the CLI's policy report, per tenant, over HTTP.

The store holds a planted project (``evaluation.planted``: rate limits, validation
failures, logic errors that never recover) and another tenant's synthetic tasks. The
route must give the verdicts the CLI's report gives on the same history ("not supported
by the log" with the exploration that would tell, "worse" with its interval), refuse bad
candidates with a 422 that names the field, and answer another tenant's key with a 404.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from apitest_support import NOW, insert
from fastapi.testclient import TestClient

from retrylens.analytics.synthetic import synthetic_events
from retrylens.api.app import create_app
from retrylens.config import load_settings
from retrylens.evaluation.operations import policy_report
from retrylens.evaluation.planted import LIVE, SETUPS, scenario_of
from retrylens.schemas import RetryEvent
from retrylens.simulation import run_fleet

pytestmark = pytest.mark.clickhouse

KEYS = {"planted": "key-planted-0123456789", "acme": "key-acme-0123456789"}
PLANTED = {"X-API-Key": KEYS["planted"]}
ACME = {"X-API-Key": KEYS["acme"]}
URL = "/v1/projects/planted/policy-reports"
CANDIDATES = [{"name": "logic-cap-up", "changes": {"caps": {"logic": 2}}},
              {"name": "rate-limit-cap-down", "changes": {"caps": {"rate_limit": 0}}}]


@pytest.fixture(scope="module")
def served(tmp_path_factory, chdb_path) -> Iterator[tuple[TestClient, object]]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("reports"), clickhouse_dsn=f"chdb://{chdb_path}",
                             clickhouse_database=f"reports_{uuid.uuid4().hex[:8]}", kafka_bootstrap_servers="",
                             api_keys=KEYS)
    from retrylens.store import open_store

    store = open_store(settings)
    planted: list[RetryEvent] = []  # the last hours: the store keeps events event_ttl_days
    run_fleet(scenario_of(SETUPS["claims"]), tasks=150, seed=1, driver="governor", emit=planted.append,
              start=NOW - timedelta(hours=6), validate_events=False)
    insert(store, planted + synthetic_events(40, seed=2, project="acme", now=NOW))
    with TestClient(create_app(settings, store)) as client:
        # the live policy the events name, in the tenant's policy store: the report's baseline
        assert client.put("/v1/policies/planted", json=LIVE, headers=PLANTED).status_code == 200
        yield client, store
    store.client.command(f"DROP DATABASE IF EXISTS `{settings.clickhouse_database}`")


@pytest.fixture(scope="module")
def answer(served) -> dict:
    client, _ = served
    response = client.post(URL, json={"candidates": CANDIDATES, "replicates": 100, "seed": 7}, headers=PLANTED)
    assert response.status_code == 200, response.text
    return response.json()


def _verdict(answer: dict, name: str) -> dict:
    return next(v for v in answer["recommendation"]["candidates"] if v["name"] == name)


def test_a_retry_the_log_never_shows_is_not_supported_with_the_exploration_that_would_tell(answer) -> None:
    verdict = _verdict(answer, "logic-cap-up")
    assert verdict["verdict"] == "not_supported"
    assert verdict["why"].startswith("not supported by the log")
    assert "shadow.explore_stops 0.2 for about" in verdict["why"] and "canary" in verdict["why"]
    assert answer["recommendation"]["decision"] != "adopt_candidate"
    assert any("candidate logic-cap-up: caps.logic 0 → 2; not supported by the log" in line
               for line in answer["lines"])
    entry = next(p for p in answer["policies"] if p["name"] == "logic-cap-up")
    assert entry["support_gaps"] and {g["error_type"] for g in entry["support_gaps"]} == {"logic"}


def test_a_lower_cap_is_worse_with_its_interval(answer) -> None:
    assert _verdict(answer, "rate-limit-cap-down")["verdict"] == "worse"
    d = next(p for p in answer["policies"] if p["name"] == "rate-limit-cap-down")["diff_vs_live"]["success"]
    assert d["lo"] <= d["value"] <= d["hi"] < 0


def test_the_baseline_is_the_tenants_stored_live_policy(answer) -> None:
    assert answer["baseline"]["policy"] == "claims-live@1"
    assert answer["baseline"]["source"] == "policy store"
    assert answer["baseline"]["warnings"] == []


def test_the_answer_is_the_report_the_cli_builds_from_the_same_history(served, answer) -> None:
    _, store = served
    report = policy_report(store, live=None, candidates=[{**c, "source": f"candidates.{i}"}
                                                         for i, c in enumerate(CANDIDATES)],
                           project="planted", replicates=100, seed=7)
    assert answer["recommendation"] == report["recommendation"]
    assert answer["history"]["tasks"] == report["history"]["tasks"] == 150  # the other tenant's tasks left out


@pytest.mark.parametrize(("body", "where", "words"), [
    ({"candidates": [{"name": "x", "changes": {"caps": {"logic": -1}}}]},
     "body.candidates.0.changes.caps.logic", "greater than or equal to 0"),
    ({"candidates": [{"name": "x", "changes": {"retry_everything": True}}]},
     "body.candidates.0.changes.retry_everything", "Extra inputs are not permitted"),
    ({"candidates": [{"name": "x", "changes": {}}, {"name": "x", "changes": {}}]},
     "body.candidates", "candidate names must differ"),
    ({"candidates": []}, "body.candidates", "at least 1"),
    ({"candidates": [{"name": "x", "changes": {}}], "replicates": 5}, "body.replicates", "greater than or equal"),
    ({"candidates": [{"name": "x", "changes": {}}], "min_cost_saving": False}, "body.min_cost_saving",
     "valid number"),
    ({"candidates": [{"name": "x", "changes": {}}], "live": {"budget": {"max_attempts": "many"}}},
     "body.live.budget.max_attempts", "valid integer"),
])
def test_bad_input_is_a_422_naming_the_field(served, body, where, words) -> None:
    client, _ = served
    response = client.post(URL, json=body, headers=PLANTED)
    assert response.status_code == 422, response.text
    message = response.json()["message"]
    assert message.startswith(where) and words in message, message


def test_another_tenants_key_gets_404_as_if_the_project_did_not_exist(served) -> None:
    client, _ = served
    body = {"candidates": CANDIDATES, "replicates": 50}
    foreign = client.post(URL, json=body, headers=ACME)
    missing = client.post("/v1/projects/no-such-project/policy-reports", json=body, headers=ACME)
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json()["detail"].replace("planted", "X") == missing.json()["detail"].replace("no-such-project", "X")
    assert client.post(URL, json=body).status_code == 401
