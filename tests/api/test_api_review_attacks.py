"""Attacks a security review tried that held, kept in the suite so they keep holding: bodies
nested deeper than any parser should follow, OTLP attributes nested as deep as JSON allows,
rule webhooks to other schemes and to the cloud metadata address, OTLP naming another project."""

from __future__ import annotations

import pytest
from apitest_support import ACME

pytestmark = pytest.mark.clickhouse


DEEP = 100_000


@pytest.mark.parametrize("path", ["/v1/events", "/v1/precheck", "/v1/traces",
                                  "/v1/projects/acme/alerts/rules", "/v1/policies/acme"])
def test_a_body_nested_a_hundred_thousand_deep_is_a_4xx_not_a_crash(bare_client, path):
    body = b'{"events": ' + b"[" * DEEP + b"]" * DEEP + b"}"
    method = "PUT" if path.startswith("/v1/policies") else "POST"
    response = bare_client.request(method, path, content=body, headers={**ACME, "Content-Type": "application/json"})
    assert 400 <= response.status_code < 500, (path, response.status_code, response.text[:200])


def _nested_otlp(levels: int) -> bytes:
    inner = '{"stringValue": "x"}'
    for _ in range(levels):
        inner = '{"kvlistValue": {"values": [{"key": "k", "value": ' + inner + "}]}}"
    span = '{"traceId": "' + "1" * 32 + '", "spanId": "' + "2" * 16 + '", "attributes": [{"key": "a", "value": '
    return ('{"resourceSpans": [{"scopeSpans": [{"spans": [' + span + inner + "}]}]}]}]}").encode()


@pytest.mark.parametrize("levels", [250, 5_000])
def test_otlp_attributes_nested_to_the_json_depth_limit_and_past_it_never_crash(bare_client, levels):
    response = bare_client.post("/v1/traces", content=_nested_otlp(levels),
                           headers={**ACME, "Content-Type": "application/json"})
    assert response.status_code in (200, 400), response.text[:200]


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://127.0.0.1:6379/_INFO", "ftp://example.com/x",
                                 "http://169.254.169.254/latest/meta-data/", "http://[::127.0.0.1]:8787/v1/ops/x",
                                 "http://0x7f000001/", "http://[::ffff:a9fe:a9fe]/"])
def test_a_rule_webhook_to_another_scheme_or_an_inward_address_is_refused_when_saved(bare_client, url):
    rule = {"name": "busy", "metric": "calls", "op": ">", "threshold": 0, "window_minutes": 120, "webhook_url": url}
    response = bare_client.post("/v1/projects/acme/alerts/rules", json=rule, headers=ACME)
    assert response.status_code == 422, (url, response.text)


def test_otlp_naming_another_project_in_its_resource_is_404(bare_client):
    body = (b'{"resourceSpans": [{"resource": {"attributes": [{"key": "retrylens.project", "value": '
            b'{"stringValue": "globex"}}]}, "scopeSpans": [{"spans": [{"traceId": "' + b"1" * 32
            + b'", "spanId": "' + b"2" * 16 + b'"}]}]}]}')
    response = bare_client.post("/v1/traces", content=body, headers={**ACME, "Content-Type": "application/json"})
    assert response.status_code == 404 and "globex" in response.json()["detail"]
