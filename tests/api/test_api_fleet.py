"""The fleet reads: one answer over every project the caller's key may read.

``/v1/fleet/…`` mirrors the first screen's project reads (metrics, metrics by dimension,
trend, failure types, hand-offs, tasks). The local token reads every project; a project key
reads its own projects and nothing else, as on the per-project routes.
"""

from __future__ import annotations

import pytest
from apitest_support import ACME, GLOBEX

from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import metrics_summary
from retrylens.api.auth import local_token
from retrylens.sdk.transport.client import RetryLensClient

pytestmark = pytest.mark.clickhouse


def _local(api_settings) -> dict[str, str]:
    return {"X-API-Key": local_token(api_settings)}


def test_fleet_metrics_with_the_local_token_count_every_project(client, api_settings, seeded):
    answer = client.get("/v1/fleet/metrics", headers=_local(api_settings))
    assert answer.status_code == 200, answer.text
    acme = metrics_summary(seeded, Slice(project="acme"))
    globex = metrics_summary(seeded, Slice(project="globex"))
    assert answer.json()["metrics"]["calls"] == acme.calls + globex.calls > acme.calls
    assert answer.json()["metrics"]["handoffs"] == acme.handoffs + globex.handoffs
    assert answer.json()["slice"]["projects"] == ["acme", "globex"]


def test_fleet_metrics_with_a_project_key_count_only_its_project(client, seeded):
    for headers, project in ((ACME, "acme"), (GLOBEX, "globex")):
        answer = client.get("/v1/fleet/metrics", headers=headers).json()
        assert answer["metrics"]["calls"] == metrics_summary(seeded, Slice(project=project)).calls
        assert answer["slice"]["projects"] == [project]


def test_fleet_handoffs_and_tasks_list_rows_of_every_project(client, api_settings):
    handoffs = client.get("/v1/fleet/handoffs", params={"limit": 500}, headers=_local(api_settings)).json()
    assert {r["project"] for r in handoffs} == {"acme", "globex"}
    only_acme = client.get("/v1/fleet/handoffs", params={"limit": 500}, headers=ACME).json()
    assert only_acme and {r["project"] for r in only_acme} == {"acme"}
    tasks = client.get("/v1/fleet/tasks", params={"limit": 500}, headers=_local(api_settings)).json()
    assert {r["project"] for r in tasks} == {"acme", "globex"}


def test_fleet_trend_failure_types_and_dimensions_answer_like_a_project(client, api_settings, seeded):
    headers = _local(api_settings)
    trend = client.get("/v1/fleet/metrics/trend", params={"bucket": "1d"}, headers=headers).json()
    assert sum(p["metrics"]["calls"] for p in trend) == metrics_summary(seeded, Slice()).calls
    types = client.get("/v1/fleet/failure-types", headers=headers).json()
    assert types and sum(t["share"] for t in types) == pytest.approx(1.0)
    projects = client.get("/v1/fleet/metrics/by/project", headers=headers).json()
    assert {r["value"] for r in projects} == {"acme", "globex"}


def test_fleet_reads_refuse_an_unknown_key_and_bad_filters(client, api_settings):
    assert client.get("/v1/fleet/metrics", headers={"X-API-Key": "nope"}).status_code == 401
    assert client.get("/v1/fleet/metrics").status_code == 401
    bad = client.get("/v1/fleet/metrics", params={"start": "yesterday"}, headers=_local(api_settings))
    assert bad.status_code == 422 and "start" in bad.text


def test_the_client_reads_the_fleet_when_no_project_is_named(client, api_settings, seeded):
    api = RetryLensClient("http://testserver", local_token(api_settings), http=client)
    assert api.metrics(None)["calls"] == metrics_summary(seeded, Slice()).calls
    assert {r["project"] for r in api.handoffs(None, limit=500)} == {"acme", "globex"}


def test_a_slice_of_several_projects_counts_each_once(seeded):
    both = metrics_summary(seeded, Slice(projects=("acme", "globex")))
    assert both.calls == metrics_summary(seeded, Slice()).calls
    assert metrics_summary(seeded, Slice(projects=("acme",))).calls == metrics_summary(seeded, Slice(project="acme")).calls
    assert metrics_summary(seeded, Slice(projects=())).calls == 0
