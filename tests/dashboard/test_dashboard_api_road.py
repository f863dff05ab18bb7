"""The API road: the same pages through ``retrylens serve``'s HTTP API (in-process app).

On an embedded store the dashboard process may not open chDB; it reads through the API
with the server's local token. The numbers must match the analytics layer exactly.
"""

from __future__ import annotations

import pytest
from dashboard_runs import run_page
from fastapi.testclient import TestClient

from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import metrics_summary, recent_handoffs
from retrylens.api.app import create_app
from retrylens.api.auth import local_token
from retrylens.dashboard import source as sources
from retrylens.dashboard.api_source import ApiSource
from retrylens.dashboard.widgets import pct
from retrylens.sdk.client import RetryLensClient

pytestmark = pytest.mark.clickhouse


@pytest.fixture
def api_source(seeded):
    store, settings = seeded
    with TestClient(create_app(settings, store)) as http:
        source = ApiSource(RetryLensClient("http://testserver", local_token(settings), http=http), settings=settings)
        sources.use(source)
        yield source
        sources.use(None)


def test_first_screen_over_the_api_matches_the_store(seeded, api_source):
    store, _ = seeded
    expected = metrics_summary(store, Slice(project="shop"))
    app = run_page("overview", range="all", project="shop")
    assert not app.exception and not app.error
    shown = {m.label: m.value for m in app.metric}
    assert shown["Retry success rate"] == pct(expected.retry_success_rate)
    assert shown["Hand-off rate"] == pct(expected.handoff_rate)
    assert len(app.get("plotly_chart")) == 3


def test_first_screen_over_the_api_opens_on_all_projects_with_the_fleet_totals(seeded, api_source):
    store, _ = seeded
    app = run_page("overview", range="all")
    assert not app.exception and not app.error
    projects = app.sidebar.selectbox(key="f_project")
    assert projects.value == "All projects" and len(projects.options) > 2
    expected = metrics_summary(store, Slice())
    shown = {m.label: m.value for m in app.metric}
    assert shown["Calls"] == f"{expected.calls:,}"
    assert shown["Hand-offs"] == f"{expected.handoffs:,}"
    assert shown["Retry success rate"] == pct(expected.retry_success_rate)
    frame = app.dataframe(key="handoff_table").value
    assert len(set(frame["project"])) > 1  # the hand-off list of every project


def test_task_view_over_the_api(seeded, api_source):
    store, _ = seeded
    handoff = recent_handoffs(store, Slice(project="shop"), limit=1)[0]
    app = run_page("task", project="shop", task_id=handoff["task_id"])
    assert not app.exception and not app.error
    assert any(handoff["task_id"] in h.value for h in app.subheader)
    assert any("Handed to a human" in i.value for i in app.info)


def test_model_page_over_the_api_on_all_projects_does_not_say_no_precheck_ended(seeded, api_source):
    """Over the API the pre-check monitor is per project; on "All projects" the page must not
    claim that no pre-checked task has finished when they have (it did, after a demo)."""
    app = run_page("model")
    assert not app.exception and not app.error
    assert app.selectbox(key="model_project").value == "All projects"
    assert len(app.dataframe) > 0  # the recent pre-checks of every project are listed
    infos = [i.value for i in app.info]
    assert not [i for i in infos if i.startswith("No pre-checked task has finished yet")], infos
    assert any(i.startswith("Pick one project") for i in infos), infos
