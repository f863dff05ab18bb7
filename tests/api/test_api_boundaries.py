"""Clear answers at the API's boundaries: what was refused, why, and what to do instead."""

from __future__ import annotations

import json

import pytest
from apitest_support import ACME

from retrylens.analytics.synthetic import synthetic_events

pytestmark = pytest.mark.clickhouse


def _events(n: int, project: str = "acme") -> list[dict]:
    return [e.model_dump(mode="json") for e in synthetic_events(n, seed=4, project=project)]


def test_a_batch_whose_every_event_is_rejected_is_a_422_with_each_reason(client):
    good = _events(1)[0]
    response = client.post("/v1/events", json={"events": [{**good, "schema_version": 9}, "not an object"]},
                           headers=ACME)
    assert response.status_code == 422
    body = response.json()
    assert body["accepted"] == 0
    assert [(r["index"], r["reason"]) for r in body["rejected"]] == [(0, "unknown_schema_version"),
                                                                     (1, "not_an_object")]
    assert "every event" in body["detail"]


def test_a_partly_rejected_batch_stays_200_with_the_reasons(client):
    good = _events(1)[0]
    response = client.post("/v1/events", json={"events": [good, "not an object"]}, headers=ACME)
    assert response.status_code == 200
    assert response.json()["accepted"] == 1 and response.json()["rejected"][0]["reason"] == "not_an_object"


def test_an_oversized_batch_is_413_naming_the_limit_and_how_many_events_fit(client, api_settings):
    events = _events(400)
    body = json.dumps({"events": events}).encode()
    limit = api_settings.api_max_body_bytes
    assert len(body) > limit, "the batch must be over the limit"
    response = client.post("/v1/events", content=body, headers={**ACME, "content-type": "application/json"})
    assert response.status_code == 413
    answer = response.json()
    assert answer["limit_bytes"] == limit and answer["body_bytes"] == len(body)
    fit = answer["events_fit"]
    assert json.dumps({"events": events[:fit]}).encode().__len__() <= limit  # that many really fit
    assert fit >= 0.8 * len(events) * limit / len(body)  # and it is not a needlessly small guess
    assert f"{limit}" in answer["detail"] and f"about {fit} events" in answer["detail"]
    streamed = client.post("/v1/events", content=iter([body[i:i + 65536] for i in range(0, len(body), 65536)]),
                           headers={**ACME, "content-type": "application/json"})
    assert streamed.status_code == 413 and streamed.json()["events_fit"] == fit


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_json_endpoint_given_another_content_type_is_415(client, content_type):
    body = json.dumps({"project": "acme", "agent": "planner", "task_input": "refund"}).encode()
    headers = {**ACME, **({"content-type": content_type} if content_type else {})}
    for path in ("/v1/precheck", "/v1/events"):
        response = client.post(path, content=body, headers=headers)
        assert response.status_code == 415, (path, response.text)
        assert "application/json" in response.json()["detail"]


def test_json_with_a_charset_is_still_json(client):
    body = json.dumps({"project": "acme", "agent": "planner", "task_input": "refund"}).encode()
    response = client.post("/v1/precheck", content=body,
                           headers={**ACME, "content-type": "application/json; charset=utf-8"})
    assert response.status_code == 200


def test_the_document_declares_the_new_answers(client):
    spec = client.get("/openapi.json").json()
    events = spec["paths"]["/v1/events"]["post"]["responses"]
    assert "415" in events and "413" in events and "422" in events
    assert "415" in spec["paths"]["/v1/precheck"]["post"]["responses"]
