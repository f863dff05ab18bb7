"""Keys per project: no key → 401, another project's data → 404 exactly like a missing project."""

from __future__ import annotations

import pytest
from apitest_support import ACME, GLOBEX, KEYS, fill, project_routes

from retrylens.analytics.synthetic import synthetic_events

pytestmark = pytest.mark.clickhouse


def _call(client, method, path, headers=None):
    # a JSON body on every write: a body-less POST is refused with 415 whatever the key
    body = ({"enabled": True} if "kill-switch" in path else {"id": "p"} if method == "PUT"
            else {} if method == "POST" else None)
    return client.request(method, path, headers=headers or {}, json=body)


def test_every_project_route_needs_a_key(client, app):
    routes = project_routes(app)
    assert len(routes) >= 20
    for method, path in routes:
        response = _call(client, method, fill(path, "acme"))
        assert response.status_code == 401, (method, path)
        assert "API key" in response.json()["detail"]
        assert response.headers["www-authenticate"] == "Bearer"


def test_an_unknown_key_is_401(client):
    response = client.get("/v1/projects/acme/metrics", headers={"X-API-Key": "nope"})
    assert response.status_code == 401
    assert response.json()["detail"] == "invalid API key"


def test_bearer_token_is_accepted_like_the_header(client):
    response = client.get("/v1/projects/acme/metrics", headers={"Authorization": f"Bearer {KEYS['acme']}"})
    assert response.status_code == 200
    assert response.json()["metrics"]["tasks"] == 80


def test_another_projects_data_is_404_indistinguishable_from_a_missing_project(client, app):
    for method, path in project_routes(app):
        foreign = _call(client, method, fill(path, "globex"), ACME)
        missing = _call(client, method, fill(path, "no-such-project"), ACME)
        assert foreign.status_code == missing.status_code == 404, (method, path)
        assert foreign.json()["detail"].replace("globex", "X") == missing.json()["detail"].replace("no-such-project", "X")


def test_each_key_reads_its_own_project(client):
    acme = client.get("/v1/projects/acme/metrics", headers=ACME).json()["metrics"]
    globex = client.get("/v1/projects/globex/metrics", headers=GLOBEX).json()["metrics"]
    assert (acme["tasks"], globex["tasks"]) == (80, 20)


def test_precheck_for_another_project_is_404(client):
    body = {"project": "globex", "agent": "planner", "task_input": "refund the invoice"}
    assert client.post("/v1/precheck", json=body, headers=ACME).status_code == 404
    assert client.post("/v1/precheck", json=body).status_code == 401
    assert client.post("/v1/precheck", json=body, headers=GLOBEX).status_code == 200


def test_events_of_another_project_are_rejected_per_item(client):
    mine, theirs = (synthetic_events(1, seed=5, project=p)[0].model_dump(mode="json") for p in ("acme", "globex"))
    result = client.post("/v1/events", json={"events": [mine, theirs]}, headers=ACME).json()
    assert result["accepted"] == 1
    assert result["rejected"] == [{"index": 1, "reason": "project_not_found", "detail": "project 'globex' not found"}]


def test_model_info_and_project_list_need_a_key_and_list_only_own_projects(client):
    assert client.get("/v1/model").status_code == 401
    assert client.get("/v1/model", headers=ACME).json()["version"] == "none"
    assert client.get("/v1/projects", headers=ACME).json() == {"projects": ["acme"], "all_projects": False}


def test_ops_endpoints_are_public(client):
    assert client.get("/healthz").json()["status"] == "ok"
    assert client.get("/openapi.json").status_code == 200
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and "retrylens_api_requests_total" in metrics.text


def test_the_local_token_reads_every_project(client, api_settings):
    from retrylens.api.auth import local_token

    token = {"X-API-Key": local_token(api_settings, create=False)}
    assert (api_settings.data_dir / "api-token").stat().st_mode & 0o077 == 0
    for project in ("acme", "globex"):
        assert client.get(f"/v1/projects/{project}/metrics", headers=token).status_code == 200
