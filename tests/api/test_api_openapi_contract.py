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


def _policy_schemas(client) -> tuple[dict, dict]:
    """(the policy, the ``{"policy": …}`` envelope) as the PUT's request body declares them."""
    put = client.get("/openapi.json").json()["paths"]["/v1/policies/{project}/{agent}"]["put"]
    body = put["requestBody"]["content"]["application/json"]["schema"]
    policy, envelope = body["anyOf"]
    assert envelope["properties"]["policy"] == policy and envelope["additionalProperties"] is False
    return policy, envelope


def _integer_branch(field: dict) -> dict:
    """The integer form of a field that may also be null (``budget.max_attempts``, issue 24)."""
    return next(option for option in [field, *field.get("anyOf", [])] if option.get("type") == "integer")


def _put_policy(client, body: dict):
    return client.put("/v1/policies/acme/planner", json=body, headers=ACME)


def test_the_policy_body_declares_its_fields_and_refuses_others(client):
    policy, _ = _policy_schemas(client)
    assert policy["additionalProperties"] is False
    assert policy["properties"]["budget"]["additionalProperties"] is False
    for body, field in [({"unknown": 1}, "body.unknown"), ({"policy": {"id": "x"}, "id": "y"}, "body.policy"),
                        ({"budget": {"max_atempts": 3}}, "body.budget.max_atempts"),
                        ({"policy": {"id": 5}}, "body.policy.id"), ({"policy": 3}, "body.policy")]:
        response = _put_policy(client, body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["message"].startswith(field), response.json()
    assert _put_policy(client, {"policy": {"id": "shop"}}).json()["policy"]["id"] == "shop"


def test_the_policy_body_takes_json_types_exactly(client):
    policy, _ = _policy_schemas(client)
    assert _integer_branch(policy["properties"]["budget"]["properties"]["max_attempts"])["type"] == "integer"
    assert policy["properties"]["budget"]["properties"]["retries_per_step"]["type"] == "number"
    assert policy["properties"]["backoff"]["properties"]["full_jitter"]["type"] == "boolean"
    for body, field in [({"budget": {"max_attempts": "3"}}, "body.budget.max_attempts"),
                        ({"budget": {"max_attempts": True}}, "body.budget.max_attempts"),
                        ({"budget": {"max_attempts": 3.5}}, "body.budget.max_attempts"),
                        ({"backoff": {"jitter": "0.5"}}, "body.backoff.jitter"),
                        ({"backoff": {"full_jitter": 1}}, "body.backoff.full_jitter"),
                        ({"id": 5}, "body.id")]:
        response = _put_policy(client, body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["message"].startswith(field), response.json()
    stored = _put_policy(client, {"budget": {"max_attempts": 4}, "backoff": {"jitter": 0, "full_jitter": True}})
    assert stored.status_code == 200 and stored.json()["policy"]["budget"]["max_attempts"] == 4
    # JSON Schema counts 2.0 as an integer, so the server does too (schemathesis sends such values)
    integral = _put_policy(client, {"policy": {"backoff": {"cap_ms": 1897804.0}, "caps": {"timeout": 2.0},
                                               "budget": {"max_cost_usd": 1e300},
                                               "shadow": {"candidate": {"degrade_after": 3.0}}}})
    assert integral.status_code == 200, integral.text
    assert integral.json()["policy"]["backoff"]["cap_ms"] == 1897804
    assert integral.json()["policy"]["shadow"]["candidate"] == {"degrade_after": 3}


def test_the_policy_body_states_its_ranges(client):
    """Caps are ≥ 0 and every integer fits in 64 bits (one past it was a 500: the stored JSON could not hold it)."""
    policy, _ = _policy_schemas(client)
    assert policy["properties"]["caps"]["additionalProperties"]["minimum"] == 0
    assert _integer_branch(policy["properties"]["budget"]["properties"]["max_attempts"])["maximum"] == 2**63 - 1
    assert policy["properties"]["budget"]["properties"]["max_retries"]["maximum"] == 2**63 - 1
    for body, field in [({"caps": {"timeout": -1}}, "body.caps.timeout"),
                        ({"phase_caps": {"planning": -1}}, "body.phase_caps.planning"),
                        ({"budget": {"max_attempts": 2**63}}, "body.budget.max_attempts"),
                        ({"roles": {"coder": {"caps": {"timeout": 2**64}}}}, "body.roles.coder.caps.timeout")]:
        response = _put_policy(client, body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["message"].startswith(field), response.json()
    assert _put_policy(client, {"budget": {"max_attempts": 2**63 - 1}, "caps": {"timeout": 0}}).status_code == 200


def test_sets_take_duplicates_and_the_schema_does_not_claim_unique_items(client):
    policy, _ = _policy_schemas(client)
    assert "uniqueItems" not in policy["properties"]["retryable"]
    assert "uniqueItems" not in policy["properties"]["kill_switch"]["properties"]["agents"]
    stored = _put_policy(client, {"retryable": ["timeout", "timeout"], "kill_switch": {"agents": ["a", "a"]}})
    assert stored.status_code == 200, stored.text
    assert stored.json()["policy"]["retryable"] == ["timeout"]


def test_the_shadow_candidate_is_a_declared_partial_policy(client):
    policy, _ = _policy_schemas(client)
    candidate = policy["properties"]["shadow"]["properties"]["candidate"]["anyOf"][0]
    assert candidate["additionalProperties"] is False and "shadow" not in candidate["properties"]
    assert candidate["properties"]["caps"] == policy["properties"]["caps"]
    for body, field in [({"shadow": {"candidate": {"zzz": 1}}}, "body.shadow.candidate.zzz"),
                        ({"shadow": {"candidate": {"budget": {"max_attempts": "2"}}}},
                         "body.shadow.candidate.budget.max_attempts"),
                        ({"shadow": {"candidate": {"shadow": {}}}}, "body.shadow.candidate.shadow"),
                        ({"policy": {"shadow": {"candidate": {"zzz": 1}}}}, "body.policy.shadow.candidate.zzz")]:
        response = _put_policy(client, body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["message"].startswith(field), response.json()
    stored = _put_policy(client, {"shadow": {"candidate": {"caps": {"timeout": 0}}}})
    assert stored.status_code == 200 and stored.json()["policy"]["shadow"]["candidate"] == {"caps": {"timeout": 0}}


def test_the_policy_body_takes_the_step_retry_allowance(client):
    """Issue 24: the allowance's fields are stored as sent; a ceiling below the base is a 422."""
    stored = _put_policy(client, {"budget": {"retries": 2, "retries_per_step": 0.5, "max_retries": 12}})
    assert stored.status_code == 200, stored.text
    budget = stored.json()["policy"]["budget"]
    assert (budget["retries"], budget["retries_per_step"], budget["max_retries"]) == (2, 0.5, 12)
    refused = _put_policy(client, {"budget": {"retries": 8, "max_retries": 6}})
    assert refused.status_code == 422
    assert refused.json()["message"].startswith("body.budget"), refused.json()
    assert "max_retries" in refused.json()["message"]
