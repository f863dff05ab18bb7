"""The OpenAPI document states exactly what the server accepts, one class of parameter at a time.

Each test reads the constraint from ``/openapi.json`` (as a generated client would), then
sends values on both sides of it: what the schema admits is answered 200, what it refuses
is a 422 naming the parameter. schemathesis finds such mismatches by chance; these pin the
edges it found (numbers taken as Unix times, ranges the schema did not state, lax booleans,
extra body fields).
"""

from __future__ import annotations

import re
from datetime import date

import pytest
from apitest_support import ACME

from retrylens.api.iso_patterns import DATE_PATTERN, DATETIME_PATTERN

pytestmark = pytest.mark.clickhouse


def _parameter(spec: dict, path: str, name: str) -> dict:
    found = [p for p in spec["paths"][path]["get"]["parameters"] if p["name"] == name]
    assert len(found) == 1, (path, name)
    return found[0]


def _string_schema(parameter: dict) -> dict:
    schema = parameter["schema"]
    return next(s for s in schema.get("anyOf", [schema]) if s.get("type") == "string")


def test_the_patterns_admit_exactly_the_real_days_in_range():
    """Every (year, month, day) of 1900-2299, day 0-32: the pattern matches iff the day exists in range."""
    as_date, as_time = re.compile(DATE_PATTERN), re.compile(DATETIME_PATTERN)
    for year in range(1900, 2300):
        for month in range(0, 14):
            for day in range(0, 33):
                text = f"{year:04d}-{month:02d}-{day:02d}"
                try:
                    real = date(year, month, day)
                except ValueError:
                    real = None
                assert bool(as_date.match(text)) == (real is not None and date(1970, 1, 1) <= real <= date(2149, 6, 5)), text
                assert bool(as_time.match(text)) == (real is not None and 1970 <= year <= 2199), text


ADMITTED_TIMES = ["2026-01-31", "2026-01-31T12:00", "2026-01-31T12:00:00Z", "2024-02-29T00:00:00.5+01:00",
                  "1970-01-01T00:00:00+05:00", "2199-12-31T23:59:59.123456789-23:59", "2026-01-31T12:00:00"]
REFUSED_TIMES = ["0", "0.5", "1700000000", "2026-02-29", "2026-02-30T00:00:00Z", "1969-12-31T23:59:59Z",
                 "2200-01-01", "9999-12-31T23:59:59", "2026-01-31T24:00:00Z", "2026-01-31T12:00:00+24:00",
                 "2026-1-31", "2026-01-31 12:00:00", "2026-01-31T12:00:00.1234567890Z", "now"]


@pytest.mark.parametrize("name", ["start", "end"])
def test_time_parameters_declare_their_grammar_and_refuse_what_it_refuses(client, name):
    parameter = _parameter(client.get("/openapi.json").json(), "/v1/projects/{project}/metrics", name)
    declared = re.compile(_string_schema(parameter)["pattern"])
    assert "1970-2199" in parameter["description"]
    for value in ADMITTED_TIMES:
        assert declared.match(value), value
        response = client.get("/v1/projects/acme/metrics", params={name: value}, headers=ACME)
        assert response.status_code == 200, (value, response.text)
    for value in REFUSED_TIMES:
        assert not declared.match(value), value
        response = client.get("/v1/projects/acme/metrics", params={name: value}, headers=ACME)
        assert response.status_code == 422, (value, response.text)
        assert response.json()["message"].startswith(f"query.{name}: must be an ISO-8601 date-time"), response.json()


def test_an_offset_is_applied_and_no_offset_means_utc(client):
    shifted = client.get("/v1/projects/acme/metrics", params={"start": "1970-01-01T00:00:00+05:00"}, headers=ACME)
    assert shifted.json()["slice"]["start"] == "1969-12-31T19:00:00+00:00"
    naive = client.get("/v1/projects/acme/metrics", params={"start": "2026-01-31T12:00"}, headers=ACME)
    assert naive.json()["slice"]["start"] == "2026-01-31T12:00:00+00:00"


@pytest.mark.parametrize("path", ["/v1/projects/{project}/failure-groups", "/v1/projects/{project}/fingerprints",
                                  "/v1/projects/{project}/fingerprints/{fingerprint}"])
def test_since_declares_a_date_in_range_and_refuses_the_rest(client, path):
    parameter = _parameter(client.get("/openapi.json").json(), path, "since")
    schema = _string_schema(parameter) | {k: v for k, v in parameter["schema"].items() if k != "anyOf"}
    assert schema["format"] == "date"
    declared = re.compile(schema["pattern"])
    url = path.replace("{project}", "acme").replace("{fingerprint}", "abc123")
    for value in ["1970-01-01", "2024-02-29", "2149-06-05"]:
        assert declared.match(value)
        assert client.get(url, params={"since": value}, headers=ACME).status_code == 200, value
    for value in ["0", "20240229", "1969-12-31", "2023-02-29", "2149-06-06", "2026-01-31T00:00:00"]:
        assert not declared.match(value)
        response = client.get(url, params={"since": value}, headers=ACME)
        assert response.status_code == 422, (value, response.text)
        assert response.json()["message"].startswith("query.since: must be a date YYYY-MM-DD"), response.json()


@pytest.mark.parametrize("path", ["/v1/kill-switch/acme", "/v1/kill-switch/acme/planner"])
def test_the_kill_switch_takes_a_json_boolean_only(client, path):
    spec = client.get("/openapi.json").json()
    assert spec["components"]["schemas"]["KillSwitchChange"]["properties"]["enabled"]["type"] == "boolean"
    for value in [0, 1, "true", "false", "yes", None]:
        response = client.put(path, json={"enabled": value}, headers=ACME)
        assert response.status_code == 422, (value, response.text)
        assert response.json()["message"].startswith("body.enabled"), response.json()
    assert client.get(path.replace("/planner", ""), headers=ACME).json()["project"] is False  # nothing was set
    assert client.put(path, json={"enabled": True}, headers=ACME).status_code == 200
