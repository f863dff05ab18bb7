"""The API road: the same pages through ``retrylens serve``'s HTTP API (in-process app).

On an embedded store the dashboard process may not open chDB; it reads through the API
with the server's local token. The numbers must match the analytics layer exactly.
"""

from __future__ import annotations

import pytest
from dashboard_runs import run_page, shown
from fastapi.testclient import TestClient

from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import metrics_summary, recent_handoffs
from retrylens.api.app import create_app
from retrylens.api.auth import local_token
from retrylens.dashboard import source as sources
from retrylens.dashboard.api_source import ApiSource
from retrylens.dashboard.widgets import pct
from retrylens.sdk.transport.client import RetryLensClient

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
    assert any(handoff["task_id"] in shown(h.value) for h in app.subheader)
    assert any("Handed to a human" in i.value for i in app.info)


def test_model_page_over_the_api_on_all_projects_plots_the_fleets_drift(seeded, api_source):
    """On "All projects" (where `retrylens up` opens) the page shows the risk model on every
    project's outcomes, read from the server's fleet route, as the store road does; it said
    "Pick one project" and showed no chart."""
    import json

    from retrylens.analytics import prechecks

    store, _ = seeded
    app = run_page("model")
    assert not app.exception and not app.error
    assert app.selectbox(key="model_project").value == "All projects"
    assert len(app.dataframe) > 0  # the recent pre-checks of every project are listed
    infos = [i.value for i in app.info]
    assert not [i for i in infos if i.startswith(("No pre-checked task has finished yet", "Pick one project"))], infos
    drift = json.loads(app.get("plotly_chart")[2].proto.spec)
    expected = [p for p in prechecks.calibration_over_time(store, None) if p["judged"]]
    assert len(drift["data"][1]["y"]) == len(expected) >= 3
    assert drift["data"][1]["y"] == pytest.approx([p["observed"] for p in expected])  # observed failure rate
    advice = next(f.value for f in app.dataframe if "followed" in f.value.columns)
    assert advice["tasks"].sum() == sum(a["tasks"] for a in prechecks.advice_vs_outcome(store, None))


def test_model_page_over_the_api_plots_drift_in_the_buckets_the_store_gives(seeded, api_source):
    """The API road sizes the monitor's buckets as the store road does (the pre-checked tasks
    ran over hours of the simulated clock), not per day, which showed one point."""
    import json

    from retrylens.analytics import prechecks

    store, _ = seeded
    expected = prechecks.calibration_over_time(store, "shop")
    app = run_page("model", project="shop")
    assert not app.exception and not app.error
    assert app.selectbox(key="model_project").value == "shop"
    drift = json.loads(app.get("plotly_chart")[2].proto.spec)
    assert drift["layout"]["title"]["text"] == "Risk model on real outcomes over time"
    assert len(drift["data"][0]["x"]) == len([p for p in expected if p["judged"]]) >= 2


def test_reports_page_over_the_api_opens_on_the_policy_report_not_a_shadow_comparison(seeded, api_source):
    """After `retrylens demo`, `retrylens up` showed one project's live shadow comparison first;
    the recommendation (the page's point) sat behind the report picker."""
    reports = api_source.reports()
    assert any(r.name.startswith("shadow comparison: ") for r in reports)  # the live ones are offered too
    app = run_page("reports")
    assert not app.exception and not app.error
    said = [m.value for m in [*app.success, *app.warning] if m.value.startswith("Recommendation: ")]
    assert len(said) == 1, [m.value for m in [*app.success, *app.warning, *app.info]]
    assert not app.selectbox(key="report_pick").format_func(app.selectbox(key="report_pick").value).startswith(
        "shadow comparison")
