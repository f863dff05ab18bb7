"""Request validation: clear 422s naming the field, 413 for oversized bodies."""

from __future__ import annotations

import pytest
from apitest_support import ACME

pytestmark = pytest.mark.clickhouse


def test_a_missing_or_wrong_precheck_field_is_a_422_naming_it(client):
    response = client.post("/v1/precheck", json={"project": "acme", "agent": "planner"}, headers=ACME)
    assert response.status_code == 422
    body = response.json()
    assert body["message"] == "body.task_input: Field required"
    assert body["detail"] == [{"loc": ["body", "task_input"], "msg": "Field required", "type": "missing"}]
    extra = client.post("/v1/precheck", json={"project": "acme", "agent": "a", "task_input": "x", "colour": 1},
                        headers=ACME)
    assert extra.status_code == 422 and "body.colour" in extra.json()["message"]


def test_malformed_json_is_a_422_not_a_500(client):
    response = client.post("/v1/precheck", content=b"{not json", headers={**ACME, "content-type": "application/json"})
    assert response.status_code == 422
    assert "JSON" in response.json()["message"]


def test_a_body_over_the_limit_is_413_by_declared_length(client, api_settings):
    big = b'{"events": [' + b" " * api_settings.api_max_body_bytes + b"]}"
    response = client.post("/v1/events", content=big, headers={**ACME, "content-type": "application/json"})
    assert response.status_code == 413
    assert str(api_settings.api_max_body_bytes) in response.json()["detail"]


def test_a_streamed_body_over_the_limit_is_413(client, api_settings):
    def chunks():
        for _ in range(api_settings.api_max_body_bytes // 65536 + 2):
            yield b" " * 65536

    response = client.post("/v1/events", content=chunks(), headers={**ACME, "content-type": "application/json"})
    assert response.status_code == 413


def test_a_batch_over_the_item_limit_is_a_422(client):
    response = client.post("/v1/events", json={"events": [{}] * 5001}, headers=ACME)
    assert response.status_code == 422 and "body.events" in response.json()["message"]
