"""The policy configuration centre: validated PUTs, revisions, ETags, kill switches, a real SDK poller."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
import uvicorn
from apitest_support import ACME, KEYS

from retrylens.api.app import create_app
from retrylens.sdk.core.hot_reload import ApiPoller, PolicySource
from retrylens.sdk.core.policy import RetryPolicy, parse_policy

pytestmark = pytest.mark.clickhouse


def test_an_invalid_policy_is_a_422_that_names_the_field(client):
    response = client.put("/v1/policies/acme/planner", json={"budget": {"max_attempts": 0}}, headers=ACME)
    assert response.status_code == 422
    body = response.json()
    assert body["detail"][0]["loc"] == ["body", "budget", "max_attempts"]
    assert "budget.max_attempts" in body["message"]
    unknown = client.put("/v1/policies/acme/planner", json={"caps": {"timeout": -1}}, headers=ACME)
    assert unknown.status_code == 422 and "caps" in unknown.json()["message"]
    typo = client.put("/v1/policies/acme/planner", json={"degrade_aftr": 2}, headers=ACME)
    assert typo.status_code == 422 and typo.json()["detail"][0]["loc"] == ["body", "degrade_aftr"]
    assert client.get("/v1/policies/acme/planner", headers=ACME).status_code == 404


def test_every_put_is_a_new_revision_and_the_history_keeps_them(client):
    first = client.put("/v1/policies/acme/planner", json={"id": "shop", "caps": {"timeout": 2}}, headers=ACME).json()
    second = client.put("/v1/policies/acme/planner", json={"policy": {"id": "shop", "caps": {"timeout": 1}}},
                        headers=ACME).json()
    pinned = client.put("/v1/policies/acme/planner", json={"id": "shop", "version": "2026.1"}, headers=ACME).json()
    assert [first["revision"], second["revision"], pinned["revision"]] == [1, 2, 3]
    assert [first["policy_version"], second["policy_version"], pinned["policy_version"]] == ["1", "2", "2026.1"]
    history = client.get("/v1/policies/acme/planner/history", headers=ACME).json()
    assert [h["revision"] for h in history] == [3, 2, 1]
    assert history[1]["policy"]["caps"]["timeout"] == 1


def test_an_agent_gets_its_own_policy_else_the_project_default_with_etag_and_304(client):
    client.put("/v1/policies/acme", json={"id": "acme-default"}, headers=ACME)
    client.put("/v1/policies/acme/coder", json={"id": "coder-special"}, headers=ACME)
    planner = client.get("/v1/policies/acme/planner", headers=ACME)
    coder = client.get("/v1/policies/acme/coder", headers=ACME)
    assert planner.json()["id"] == "acme-default" and planner.headers["x-policy-source"] == "project"
    assert coder.json()["id"] == "coder-special" and coder.headers["x-policy-revision"] == "1"
    assert parse_policy(coder.json()) == RetryPolicy.model_validate(coder.json())
    again = client.get("/v1/policies/acme/coder", headers={**ACME, "If-None-Match": coder.headers["etag"]})
    assert again.status_code == 304 and again.headers["etag"] == coder.headers["etag"]
    overview = client.get("/v1/policies/acme", headers=ACME).json()
    assert overview["default"]["policy_id"] == "acme-default"
    assert [a["agent"] for a in overview["agents"]] == ["coder"]


def test_kill_switches_per_agent_and_per_project_reach_the_served_policy(client):
    client.put("/v1/policies/acme/planner", json={"id": "p"}, headers=ACME)
    before = client.get("/v1/policies/acme/planner", headers=ACME)
    client.put("/v1/kill-switch/acme/planner", json={"enabled": True, "reason": "runaway loop"}, headers=ACME)
    killed = client.get("/v1/policies/acme/planner", headers=ACME)
    assert killed.headers["etag"] != before.headers["etag"]
    policy = parse_policy(killed.json())
    assert policy.is_killed("planner") and not policy.is_killed("coder") and policy.version.endswith("+kill")
    unconfigured = client.get("/v1/policies/acme/coder", headers=ACME)
    assert unconfigured.status_code == 404
    client.put("/v1/kill-switch/acme", json={"enabled": True}, headers=ACME)
    coder = client.get("/v1/policies/acme/coder", headers=ACME)
    assert coder.status_code == 200 and parse_policy(coder.json()).kill_switch.project
    assert client.get("/v1/kill-switch/acme", headers=ACME).json() == {
        "project": True, "agents": ["planner"], "reasons": {"*": "", "planner": "runaway loop"}}
    client.put("/v1/kill-switch/acme", json={"enabled": False}, headers=ACME)
    client.put("/v1/kill-switch/acme/planner", json={"enabled": False}, headers=ACME)
    assert client.get("/v1/policies/acme/planner", headers=ACME).headers["etag"] == before.headers["etag"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def live_url(api_settings, seeded):
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(api_settings, seeded), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def test_the_sdk_api_poller_hot_reloads_policies_and_the_kill_switch(live_url):
    admin = httpx.Client(base_url=live_url, headers=ACME)
    source = PolicySource(RetryPolicy(id="local"))
    poller = ApiPoller(source, live_url, "acme", "planner",
                       client=httpx.Client(timeout=2, headers={"X-API-Key": KEYS["acme"]}))
    assert poller.poll() is False and source.current.id == "local"  # 404: nothing configured, keep local
    admin.put("/v1/policies/acme/planner", json={"id": "central", "caps": {"timeout": 1}})
    assert poller.poll() is True and source.current.id == "central" and source.current.version == "1"
    assert poller.poll() is False and source.reloads == 1  # 304 on the unchanged ETag
    admin.put("/v1/kill-switch/acme/planner", json={"enabled": True, "reason": "incident 42"})
    assert poller.poll() is True and source.current.is_killed("planner")
    admin.put("/v1/kill-switch/acme/planner", json={"enabled": False})
    admin.put("/v1/policies/acme/planner", json={"id": "central", "caps": {"timeout": 3}})
    assert poller.poll() is True and not source.current.is_killed("planner")
    assert source.current.version == "2" and source.last_error is None


def test_an_agent_name_with_a_slash_has_its_policy_history_and_kill_switch(client):
    """``team/planner`` travels as ``team%2Fplanner`` (the SDK client quotes every segment); the
    server decodes the path before routing, so the name used to be cut at its slash (404)."""
    from urllib.parse import quote

    name = quote("team/planner", safe="")
    put = client.put(f"/v1/policies/acme/{name}", json={"id": "team-planner"}, headers=ACME)
    assert put.status_code == 200 and put.json()["agent"] == "team/planner"
    served = client.get(f"/v1/policies/acme/{name}", headers=ACME)
    assert served.status_code == 200 and served.json()["id"] == "team-planner"
    assert [r["agent"] for r in client.get(f"/v1/policies/acme/{name}/history", headers=ACME).json()] == ["team/planner"]
    assert client.get("/v1/policies/acme/team", headers=ACME).status_code == 404  # not its prefix's
    killed = client.put(f"/v1/kill-switch/acme/{name}", json={"enabled": True, "reason": "loop"}, headers=ACME)
    assert killed.status_code == 200 and killed.json()["agents"] == ["team/planner"]
    assert parse_policy(client.get(f"/v1/policies/acme/{name}", headers=ACME).json()).is_killed("team/planner")


def test_a_history_route_refuses_a_write_with_405_not_as_a_policy_of_an_agent_named_history(client):
    """The agent routes take the rest of the path as the name, so ``PUT …/planner/history``
    matched the policy write of an agent called "planner/history" and answered 415/422;
    a history is read-only: 405 naming GET, and no policy is written."""
    put = client.put("/v1/policies/acme/planner/history", json={"id": "x"}, headers=ACME)
    assert put.status_code == 405 and put.headers["allow"] == "GET"
    assert client.put("/v1/policies/acme/planner/history", headers=ACME).status_code == 405  # no body either
    assert client.get("/v1/policies/acme", headers=ACME).json()["agents"] == []
