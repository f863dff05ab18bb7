"""Hostile values in every filter parameter fail safely: no 500, nothing of another project."""

from __future__ import annotations

import pytest
from apitest_support import ACME

pytestmark = pytest.mark.clickhouse

HOSTILE = [
    "acme' OR '1'='1",
    "x'; DROP TABLE events; --",
    "globex\\' OR 1=1 --",
    "{project:String}",
    "[[db]]",
    "') UNION ALL SELECT * FROM system.tables --",
    "\\x00\x01",
    "😀' or ''='",
]
SLICED = ["metrics", "metrics/by/agent", "metrics/trend", "failure-types", "handoffs", "tasks", "patterns",
          "pollution/tasks", "pollution/report", "shadow-reports"]
SLICE_FILTERS = ["agent", "phase", "error_type", "policy_version"]


def _empty(body) -> bool:
    if isinstance(body, list):
        return body == []
    if "metrics" in body:
        return body["metrics"]["calls"] == 0
    if "tasks" in body:
        return body["tasks"] == 0
    return body.get("report") is None or body["report"]["decisions"] == 0


def test_every_slice_filter_of_every_endpoint_treats_sql_as_a_plain_string(client):
    """Each (endpoint, filter) gets hostile values in turn; the headline endpoint gets them all."""
    turn = 0
    for endpoint in SLICED:
        for name in SLICE_FILTERS:
            values = HOSTILE if endpoint == "metrics" else [HOSTILE[turn % len(HOSTILE)]]
            turn += 1
            for value in values:
                response = client.get(f"/v1/projects/acme/{endpoint}", params={name: value}, headers=ACME)
                assert response.status_code == 200, (endpoint, name, response.text)
                assert _empty(response.json()), (endpoint, name, value)


def test_other_parameters_treat_sql_as_a_plain_string(client, seeded):
    before = seeded.count_distinct_events()
    for value in HOSTILE:
        _other_parameters(client, value)
    assert seeded.count_distinct_events() == before


def _other_parameters(client, value):
    checks = [
        ("tasks/search", {"q": value}),
        ("failure-groups", {"error_type": value, "include_noise": "true"}),
        ("patterns", {"target_phase": value}),
    ]
    for endpoint, params in checks:
        response = client.get(f"/v1/projects/acme/{endpoint}", params=params, headers=ACME)
        assert response.status_code == 200 and response.json() == [], endpoint
    from urllib.parse import quote

    quoted = quote(value, safe="")
    assert client.get(f"/v1/projects/acme/fingerprints/{quoted}", headers=ACME).json()["attempts"] == 0
    assert client.get(f"/v1/projects/acme/tasks/{quoted}/events", headers=ACME).status_code == 404
    assert client.get(f"/v1/projects/{quoted}/metrics", headers=ACME).status_code in (404, 422)
    assert client.get(f"/v1/policies/acme/{quoted}", headers=ACME).status_code in (404, 422)


TYPED = [
    ("metrics", {"start": "2026-01-01'; DROP TABLE events; --"}, "query.start"),
    ("metrics", {"end": "0000-01-01T00:00:00"}, "query.end"),
    ("metrics", {"start": "9999-12-31T23:59:59"}, "query.start"),
    ("metrics/trend", {"bucket": "1h'); DROP TABLE events; --"}, "query.bucket"),
    ("metrics", {"source": "raw' OR 1=1"}, "query.source"),
    ("tasks", {"limit": "1; DROP TABLE events"}, "query.limit"),
    ("tasks", {"limit": "100000000"}, "query.limit"),
    ("failure-groups", {"since": "1900-01-01"}, "query.since"),
]


def test_typed_parameters_reject_hostile_values_with_a_422_naming_them(client):
    for endpoint, params, field in TYPED:
        response = client.get(f"/v1/projects/acme/{endpoint}", params=params, headers=ACME)
        assert response.status_code == 422, (endpoint, params, response.text)
        assert response.json()["message"].startswith(field), response.json()


def test_unknown_dimension_is_422_naming_the_choices(client):
    response = client.get("/v1/projects/acme/metrics/by/project;DROP", headers=ACME)
    assert response.status_code == 422
    assert "agent" in response.json()["message"]
