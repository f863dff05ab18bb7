"""Alert rules over the API: created, changed and deleted per project key; a firing reaches its webhook."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from apitest_support import ACME, GLOBEX, KEYS

from retrylens.api.auth import local_token
from retrylens.errors import ApiError
from retrylens.sdk.transport.client import RetryLensClient

pytestmark = pytest.mark.clickhouse
RULE = {"name": "busy", "metric": "calls", "op": ">", "threshold": 0, "window_minutes": 120}


@pytest.fixture
def api_settings(settings):
    """The receiver below listens on 127.0.0.1: allowed as an operator allows an internal relay."""
    return settings.model_copy(update={"api_keys": dict(KEYS), "alert_webhook_hosts": ["127.0.0.1:*"]})


@pytest.fixture
def acme(client) -> RetryLensClient:
    return RetryLensClient("http://testserver", KEYS["acme"], http=client)


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict]]]:
    """A local webhook receiver: its URL and the JSON bodies posted to it."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    server.shutdown()
    thread.join()


def test_a_rule_is_created_changed_and_deleted_by_the_projects_key(acme: RetryLensClient) -> None:
    created = acme.add_alert_rule("acme", {**RULE, "agent": "planner", "per": "phase"})
    assert created["where"] == {"project": "acme", "agent": "planner"} and created["per"] == "phase"
    listed = acme.alerts("acme")["rules"]
    assert [(r["rule_id"], r["name"]) for r in listed] == [(created["rule_id"], "busy")]
    changed = acme.update_alert_rule("acme", created["rule_id"], {**RULE, "threshold": 5, "enabled": False})
    assert changed["rule_id"] == created["rule_id"] and changed["threshold"] == 5 and changed["enabled"] is False
    assert [(r["threshold"], r["enabled"]) for r in acme.alerts("acme")["rules"]] == [(5, False)]
    assert acme.delete_alert_rule("acme", created["rule_id"]) == {"deleted": created["rule_id"]}
    assert acme.alerts("acme")["rules"] == []


def test_another_projects_rule_is_not_found_and_bad_rules_are_named(client, acme: RetryLensClient) -> None:
    globex = RetryLensClient("http://testserver", KEYS["globex"], http=client)
    theirs = globex.add_alert_rule("globex", RULE)
    path = f"/v1/projects/acme/alerts/rules/{theirs['rule_id']}"
    assert client.put(path, json=RULE, headers=ACME).status_code == 404  # not acme's rule
    assert client.delete(path, headers=ACME).status_code == 404
    assert client.post("/v1/projects/globex/alerts/rules", json=RULE, headers=ACME).status_code == 404
    assert client.delete(f"/v1/projects/globex/alerts/rules/{theirs['rule_id']}", headers=GLOBEX).status_code == 200
    with pytest.raises(ApiError) as bad:
        acme.add_alert_rule("acme", {**RULE, "metric": "no_such_metric"})
    assert bad.value.status == 422 and "metric" in str(bad.value.detail)
    wrong = client.post("/v1/projects/acme/alerts/rules", json={**RULE, "webhook_url": "ftp://x"}, headers=ACME)
    assert wrong.status_code == 422 and "webhook_url" in wrong.json()["message"]
    assert client.post("/v1/projects/acme/alerts/rules", json={**RULE, "threshold": "1"}, headers=ACME).status_code == 422


def test_a_firing_rule_is_posted_to_its_webhook(client, acme: RetryLensClient, api_settings, receiver) -> None:
    url, received = receiver
    rule = acme.add_alert_rule("acme", {**RULE, "webhook_url": url})
    # What the server's maintenance loop runs, asked for through its store-operation route.
    sent = client.post("/v1/ops/alerts.evaluate", json={}, headers={"X-API-Key": local_token(api_settings)})
    assert sent.status_code == 200, sent.text
    assert [n["rule_id"] for n in sent.json()] == [rule["rule_id"]]
    assert len(received) == 1
    assert received[0]["rule_id"] == rule["rule_id"] and received[0]["status"] == "firing"
    assert received[0]["rule_name"] == "busy" and received[0]["value"] > 0
    history = acme.alerts("acme")["history"]
    assert history[0]["rule_id"] == rule["rule_id"] and history[0]["delivered"] is True


def test_store_operations_refuse_a_project_key(client) -> None:
    answer = client.post("/v1/ops/store.stats", json={}, headers=ACME)
    assert answer.status_code == 403 and "local token" in answer.json()["detail"]


def test_a_rule_the_metric_refuses_to_split_answers_422_with_the_reason(client) -> None:
    """Pre-check metrics are watched overall or per agent only: per error type is refused, not a 500."""
    body = {**RULE, "metric": "precheck_brier", "per": "error_type"}
    answer = client.post("/v1/projects/acme/alerts/rules", json=body, headers=ACME)
    assert answer.status_code == 422, answer.text
    assert "per error_type" in answer.text


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",  # the cloud metadata service
    "http://10.0.0.7:8123/?query=DROP",  # a host inside the server's network
    "http://localhost:8787/v1/ops/store.stats",  # the server itself, by name
    "http://[::1]/hook",
    "http://0.0.0.0/",
])
def test_a_project_key_cannot_point_a_webhook_into_the_servers_network(client, url: str) -> None:
    answer = client.post("/v1/projects/acme/alerts/rules", json={**RULE, "webhook_url": url}, headers=ACME)
    assert answer.status_code == 422, answer.text
    assert "webhook_url" in answer.text and "RETRYLENS_ALERT_WEBHOOK_HOSTS" in answer.text
    created = client.post("/v1/projects/acme/alerts/rules", json=RULE, headers=ACME).json()
    changed = client.put(f"/v1/projects/acme/alerts/rules/{created['rule_id']}", json={**RULE, "webhook_url": url},
                         headers=ACME)
    assert changed.status_code == 422, changed.text
    assert [r["webhook_url"] for r in client.get("/v1/projects/acme/alerts", headers=ACME).json()["rules"]] == [""]


def test_a_project_has_at_most_its_cap_of_rules_and_another_project_is_not_held_by_it(
    api_settings, seeded, acme: RetryLensClient,
) -> None:
    from fastapi.testclient import TestClient

    from retrylens.api.app import create_app

    capped = create_app(api_settings.model_copy(update={"alert_rules_per_project": 2}), seeded)
    with TestClient(capped) as client:
        for n in range(2):
            assert client.post("/v1/projects/acme/alerts/rules", json={**RULE, "name": f"r{n}"},
                               headers=ACME).status_code == 201
        third = client.post("/v1/projects/acme/alerts/rules", json=RULE, headers=ACME)
        assert third.status_code == 409 and "alert_rules_per_project = 2" in third.text
        assert client.post("/v1/projects/globex/alerts/rules", json=RULE, headers=GLOBEX).status_code == 201


def test_a_cap_lowered_below_what_a_project_has_refuses_its_next_rule(api_settings, seeded) -> None:
    """Three rules made under a cap of 3 (beside another project's two, which do not count);
    the operator lowers it to 2: the next is refused too."""
    from fastapi.testclient import TestClient

    from retrylens.api.app import create_app

    steps = (("globex", GLOBEX, 3, ("g0", "g1"), 201), ("acme", ACME, 3, ("r0", "r1", "r2"), 201),
             ("acme", ACME, 2, ("r3",), 409))
    for project, headers, cap, names, status in steps:
        app = create_app(api_settings.model_copy(update={"alert_rules_per_project": cap}), seeded)
        with TestClient(app) as client:
            for name in names:
                answer = client.post(f"/v1/projects/{project}/alerts/rules", json={**RULE, "name": name},
                                     headers=headers)
                assert answer.status_code == status, answer.text
    assert "acme' has 3 alert rules" in answer.text and "alert_rules_per_project = 2" in answer.text


def test_a_projects_alert_history_is_filtered_before_the_newest_cut(client, seeded, acme: RetryLensClient) -> None:
    """A busy project's 1,001 newer notifications must not push a quiet project's out of its history."""
    from datetime import UTC, datetime, timedelta

    ours = acme.add_alert_rule("acme", RULE)
    theirs = RetryLensClient("http://testserver", KEYS["globex"], http=client).add_alert_rule("globex", RULE)
    old = datetime.now(UTC) - timedelta(days=1)
    columns = ["ts", "rule_id", "rule_name", "slice_value", "status", "value", "threshold", "message", "delivered"]
    rows = [[old, ours["rule_id"], "busy", "", "firing", 1.0, 0.0, "acme's page", True]]
    rows += [[old + timedelta(seconds=1 + n), theirs["rule_id"], "busy", "", "firing", 1.0, 0.0, "globex", True]
             for n in range(1_001)]
    seeded.client.insert(f"{seeded.database}.alert_log", rows, column_names=columns)
    history = acme.alerts("acme")["history"]
    assert [h["message"] for h in history] == ["acme's page"]
