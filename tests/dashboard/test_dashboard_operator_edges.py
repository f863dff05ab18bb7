"""Issue 37's rough edges on the dashboard, as an operator meets them: alerts firing now head the
first screen, and the failure-groups page opens on "All projects" (each group naming its project).

On the small two-project store of ``hostile_seed`` (one project's words are hostile; its rule
fires). Expected values come from the analytics layer called directly.
"""

from __future__ import annotations

import pytest
from dashboard_runs import run_page, shown
from hostile_seed import CALM

from retrylens.analytics import alerts as alerting
from retrylens.analytics.failure_groups import failure_groups
from retrylens.dashboard.filters import ALL_PROJECTS

pytestmark = pytest.mark.clickhouse


def test_first_screen_heads_with_the_alerts_firing_now(hostile_store, hostile):
    store, _, values = hostile_store
    firing = [s for s in alerting.alert_states(store) if s["status"] == "firing"]
    assert len(firing) == 1  # planted: the hostile project's retry rate (2/3) is above 0.1
    app = run_page("overview", range="all")
    assert not app.exception
    said = [shown(w.value) for w in app.warning if "firing" in w.value]
    assert len(said) == 1, [w.value for w in app.warning]
    assert said[0].startswith("**1 alert firing** · ")
    assert f"{values['rule']}: {firing[0]['value']:.4g} (threshold 0.1)" in said[0]
    assert any(link.value.startswith("Open the alerts") for link in app.get("page_link"))


def test_first_screen_of_a_quiet_project_shows_no_alert_line(hostile_store, hostile):
    app = run_page("overview", range="all", project=CALM)
    assert not app.exception
    assert not [w.value for w in app.warning if "firing" in w.value]


def test_failure_groups_open_on_all_projects_with_each_groups_project(hostile_store, hostile):
    store, _, values = hostile_store
    expected = failure_groups(store, None, limit=25)
    assert {g.project for g in expected} == {values["project"], CALM}
    app = run_page("groups")
    assert not app.exception
    assert app.selectbox(key="groups_project").value == ALL_PROJECTS
    table = app.dataframe(key="groups_table").value
    assert list(zip(table["project"], table["pattern"], strict=True)) == [(g.project, g.pattern) for g in expected]
    assert any("Pick one project" in i.value for i in app.info)  # fingerprints are per project
