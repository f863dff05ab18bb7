"""Every dashboard page through Streamlit's AppTest: on a seeded store and on an empty one.

The expected numbers come from the analytics layer called directly, so these tests check
what the operator sees against what the store holds.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from dashboard_runs import run_page, shown

from retrylens.analytics import prechecks
from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import metrics_summary, metrics_trend, recent_handoffs
from retrylens.dashboard import charts as charts_module
from retrylens.dashboard.filters import Filters
from retrylens.dashboard.page_overview import merge_handoffs
from retrylens.dashboard.widgets import pct, usd
from retrylens.store.sql import query_rows

pytestmark = pytest.mark.clickhouse


def _metrics(app) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


def _charts(app) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]


def _frame(app, column: str):
    """The first table showing ``column`` (plain tables carry no key in AppTest)."""
    return next(f.value for f in app.dataframe if column in f.value.columns)


def _no_errors(app) -> None:
    assert not app.exception, [e.value for e in app.exception]
    assert not app.error, [e.value for e in app.error]


# --- first screen -----------------------------------------------------------------------------

def test_first_screen_shows_the_stores_headline_rates(seeded, seeded_source):
    store, _ = seeded
    expected = metrics_summary(store)
    app = run_page("overview", range="all")
    _no_errors(app)
    shown = _metrics(app)
    assert shown["Retry rate"] == pct(expected.retry_rate)
    assert shown["Retry success rate"] == pct(expected.retry_success_rate)
    assert shown["Degradation rate"] == pct(expected.degradation_rate)
    assert shown["Hand-off rate"] == pct(expected.handoff_rate)
    assert shown["Cost of retries"] == usd(expected.retry_cost_usd)
    assert shown["Calls"] == f"{expected.calls:,}"


def test_first_screen_opens_on_all_projects_when_there_are_several(seeded, seeded_source):
    store, _ = seeded
    app = run_page("overview", range="all")
    projects = app.sidebar.selectbox(key="f_project")
    assert projects.value == "All projects" and projects.options[0] == "All projects"
    assert len(projects.options) > 2
    assert _metrics(app)["Hand-offs"] == f"{metrics_summary(store).handoffs:,}"


def test_first_screen_charts_plot_the_trend_and_failure_types(seeded, seeded_source):
    store, _ = seeded
    trend = metrics_trend(store, bucket=Filters(range_key="all").trend_bucket())
    charts = _charts(run_page("overview", range="all"))
    assert len(charts) == 3
    trend_chart, types_chart, _cost = charts
    retry_rate = next(t for t in trend_chart["data"] if t["name"] == "retry rate")
    plotted = charts_module.pooled_rate(trend, "retries", "calls", "calls")
    assert len(retry_rate["x"]) == len(plotted) > 0  # tiny buckets merged (MIN_CASES calls a point)
    assert sum(int(t.split(" of ")[1].split()[0].replace(",", "")) for t in retry_rate["text"]) == \
        sum(p.metrics.calls for p in trend)  # every call of the range is behind some point
    assert "validation" in types_chart["data"][0]["y"]


def test_first_screen_filters_by_project_from_the_url(seeded, seeded_source):
    store, _ = seeded
    expected = metrics_summary(store, Slice(project="shop"))
    app = run_page("overview", range="all", project="shop")
    _no_errors(app)
    assert app.sidebar.selectbox(key="f_project").value == "shop"
    assert _metrics(app)["Retry success rate"] == pct(expected.retry_success_rate)


def test_handoff_list_links_each_row_to_its_task_view(seeded, seeded_source):
    store, _ = seeded
    newest = recent_handoffs(store, limit=1)[0]
    app = run_page("overview", range="all")
    frame = app.dataframe(key="handoff_table").value
    first_page = merge_handoffs(recent_handoffs(store, limit=25))
    assert list(frame["task_id"]) == [r["task_id"] for r in first_page]
    assert frame.iloc[0]["task_id"] == newest["task_id"]
    assert frame.iloc[0]["open"] == f"task?project={newest['project']}&task_id={newest['task_id']}"


def test_handoff_list_pages_forward(seeded, seeded_source):
    store, _ = seeded
    second = merge_handoffs(recent_handoffs(store, limit=25, offset=25))
    app = run_page("overview", range="all")
    app.button(key="handoffs_next").click().run()
    frame = app.dataframe(key="handoff_table").value
    assert list(frame["task_id"]) == [r["task_id"] for r in second]
    assert any("Page 2" in c.value for c in app.caption)


def test_first_screen_on_an_empty_store_says_so(empty_source):
    app = run_page("overview")
    _no_errors(app)
    assert any("No retry events" in i.value for i in app.info)
    assert _metrics(app)["Retry rate"] == "—"
    assert any("No hand-offs" in i.value for i in app.info)


def test_unknown_filter_values_in_the_url_are_ignored(seeded, seeded_source):
    app = run_page("overview", range="all", project="shop' OR 1=1 --")
    _no_errors(app)
    assert app.sidebar.selectbox(key="f_project").value == "All projects"


# --- task view ----------------------------------------------------------------------------------

def _carried_error_task(store) -> tuple[str, str]:
    from retrylens.dashboard.story import build_story
    from retrylens.store.sql import query_rows

    for row in query_rows(store.client, store.sql(
            "SELECT project, task_id FROM [[db]].events WHERE kind = 'attempt_failed' AND attempt = 1 "
            "GROUP BY project, task_id ORDER BY task_id LIMIT 200")):
        story = build_story(row["project"], row["task_id"], store.task_events(row["project"], row["task_id"]))
        if any(a.carried_from for a in story.attempts):
            return row["project"], row["task_id"]
    raise AssertionError("the seeded fleet has no task with a carried error")


def test_task_view_from_a_link_shows_attempts_and_carried_errors(seeded, seeded_source):
    store, _ = seeded
    project, task_id = _carried_error_task(store)
    app = run_page("task", project=project, task_id=task_id)
    _no_errors(app)
    attempts = _frame(app, "context_tokens")
    assert list(attempts["attempt"]) == sorted(attempts["attempt"])
    assert {"decision", "reason", "backoff_ms", "context_tokens", "pollution", "side_effects"} <= set(attempts.columns)
    assert any("carries the error of attempt 1" in w.value for w in app.warning)
    assert len(app.get("plotly_chart")) == 1


def test_task_view_finds_a_task_by_trace_or_correlation_id(seeded, seeded_source):
    store, _ = seeded
    handoff = recent_handoffs(store, limit=1)[0]
    for text in (handoff["trace_id"], handoff["correlation_id"]):
        app = run_page("task")
        app.text_input(key="task_q").input(text).run()
        _no_errors(app)
        assert any(handoff["task_id"] in shown(h.value) for h in app.subheader)


def test_task_view_shows_side_effects_with_idempotency_keys(seeded, seeded_source):
    store, _ = seeded
    from retrylens.store.sql import query_rows

    row = query_rows(store.client, store.sql(
        "SELECT project, task_id, any(side_effect_keys[1]) AS k FROM [[db]].events WHERE kind = 'side_effect' "
        "GROUP BY project, task_id ORDER BY task_id LIMIT 1"))[0]
    app = run_page("task", project=row["project"], task_id=row["task_id"])
    keys = [k for frame in app.dataframe for k in frame.value.get("idempotency_key", [])]
    assert row["k"] in keys


def test_task_search_without_match_warns(seeded, seeded_source):
    app = run_page("task")
    app.text_input(key="task_q").input("no-such-task' OR '1'='1").run()
    _no_errors(app)
    assert any("No task, attempt or trace matches" in w.value for w in app.warning)


def test_task_view_on_an_empty_store(empty_source):
    app = run_page("task", project="acme", task_id="t-1")
    _no_errors(app)
    assert any("No task, attempt or trace matches" in w.value for w in app.warning)


# --- failure groups and fingerprints ------------------------------------------------------------

def test_failure_groups_list_trend_and_example_tasks(seeded, seeded_source):
    store, _ = seeded
    from retrylens.analytics.failure_groups import failure_groups

    expected = failure_groups(store, "shop", limit=25)
    app = run_page("groups")
    app.selectbox(key="groups_project").select("shop").run()
    _no_errors(app)
    groups = app.dataframe(key="groups_table").value
    assert list(groups["pattern"]) == [g.pattern for g in expected]
    examples = _frame(app, "task_id")
    assert list(examples["task_id"]) == expected[0].example_tasks
    assert len(app.get("plotly_chart")) == 1


def test_fingerprint_lookup_shows_its_failure_history(seeded, seeded_source):
    store, _ = seeded
    from retrylens.analytics.fingerprints import top_failing_fingerprints

    worst = top_failing_fingerprints(store, "shop", limit=1)[0]
    app = run_page("groups")
    app.selectbox(key="groups_project").select("shop").run()
    app.text_input(key="fp_query").input(worst.fingerprint).run()
    _no_errors(app)
    shown = _metrics(app)
    assert shown["Failed attempts"] == str(worst.failures)
    assert shown["Known bad"] == ("yes" if worst.known_bad() else "no")


def test_failure_groups_on_an_empty_store(empty_source):
    app = run_page("groups")
    _no_errors(app)
    assert any("no failure groups" in i.value for i in app.info)


# --- risk model ---------------------------------------------------------------------------------

def test_model_page_shows_version_metrics_baselines_and_calibration(seeded, seeded_source):
    _, settings = seeded
    from retrylens.analytics.model_store import ModelStore, models_dir

    version = ModelStore(models_dir(settings)).current_version()
    app = run_page("model")
    _no_errors(app)
    assert _metrics(app)["Version"] == version
    trained_at = ModelStore(models_dir(settings)).meta(version)["trained_at"]
    assert _metrics(app)["Trained"] == trained_at[:10]  # the day fits the tile; the time is in the caption
    assert any(f"trained {trained_at[:10]} {trained_at[11:16]} UTC" in shown(c.value) for c in app.caption)
    table = _frame(app, "roc_auc")
    assert list(table["model"]) == ["model", "base_rate", "input_length"]
    charts = _charts(app)
    assert charts[0]["layout"]["title"]["text"].startswith("Calibration")
    assert charts[2]["layout"]["title"]["text"] == "Risk model on real outcomes over time"
    assert len(charts) == 3  # calibration, feature weights, the model on real outcomes
    recent = _frame(app, "applied")
    assert len(recent) > 0 and set(recent["applied"]) == {"no"}  # asked through the API, no SDK applied it
    assert set(recent["outcome"]) <= {"succeeded", "failed", "handed_off"}
    advice = _frame(app, "followed")
    assert set(advice["followed"]) == {"no"} and (advice["tasks"] >= 1).all()


def test_model_page_explains_a_precheck_and_words_the_strongest_features(seeded, seeded_source):
    app = run_page("model")
    _no_errors(app)
    words = _frame(app, "in words")
    assert len(words) > 0 and set(words["effect"]) <= {"raises failure odds", "lowers failure odds"}
    assert not [w for w in words["in words"] if w.startswith(("tok:", "kw:", "size_z:"))], list(words["in words"])
    # a pre-check whose input is like earlier failed ones (the fleet repeats its templates)
    project, rows, near = next(
        (project, rows, i) for project in app.selectbox(key="model_project").options
        for rows in [seeded_source.recent_prechecks(project, limit=50) or []]
        for i, r in enumerate(rows) if r["explanation"].get("similar_failures"))
    app = app.selectbox(key="model_project").set_value(project).run()
    app = app.selectbox(key="explain_precheck").set_value(near).run()
    _no_errors(app)
    chosen = rows[near]
    reasons = _frame(app, "reason")
    assert list(reasons["reason"]) == [f["words"] for f in chosen["explanation"]["top_features"]]
    assert all(r.endswith(f"failure odds for {chosen['agent']}") for r in reasons["reason"])
    similar = _frame(app, "shared words")
    expected = chosen["explanation"]["similar_failures"]
    assert list(similar["task"]) == [n["task_id"] for n in expected]
    assert all(link.startswith(f"task?project={project}&task_id=") for link in similar["task link"])
    advice = chosen["explanation"]["advice"]
    if advice:
        assert list(_frame(app, "evidence")["evidence"]) == [a["evidence"] for a in advice]
    else:
        assert any(i.value.startswith("No advice was given") for i in app.info)


def _task_starts(store, task_ids: list[str]) -> dict[str, datetime]:
    """When each task started (its first stored event), read from the events, not the monitor."""
    rows = query_rows(store.client, store.sql("SELECT task_id, min(ts) AS started FROM [[db]].events"
                                              " WHERE task_id IN {ids:Array(String)} GROUP BY task_id"), {"ids": task_ids})
    return {r["task_id"]: r["started"].replace(tzinfo=UTC) for r in rows}


def test_precheck_drift_is_placed_at_the_hours_the_prechecked_tasks_ran(seeded):
    """The fixture pre-checks a simulated fleet in one burst, as the demo does: every answer is
    stamped within seconds, while the tasks ran over hours of the simulated clock. The monitor
    judges each pre-check at its task's start, so drift shows over those hours."""
    store, _ = seeded
    judged = [r for r in prechecks.joined_prechecks(store) if r["failed"] is not None]
    answered = [r["ts"] for r in judged]
    assert max(answered) - min(answered) < timedelta(minutes=10)  # one burst of answers
    started = _task_starts(store, [r["task_id"] for r in judged])
    points = prechecks.calibration_over_time(store, None)
    size = timedelta(hours=points[0]["bucket_hours"])
    origin = datetime(1970, 1, 1, tzinfo=UTC)
    expected = Counter(origin + size * ((started[r["task_id"]] - origin) // size) for r in judged)
    assert {p["bucket"]: p["judged"] for p in points} == dict(expected)
    assert len(points) >= 3 and points[-1]["bucket"] - points[0]["bucket"] >= 2 * size
    for p in points:  # each bucket judged on its own tasks only
        own = [r for r in judged if origin + size * ((started[r["task_id"]] - origin) // size) == p["bucket"]]
        assert p["observed"] == pytest.approx(sum(bool(r["failed"]) for r in own) / len(own))


def test_precheck_drift_reads_the_same_over_the_api_and_on_the_model_page(seeded, seeded_source):
    from fastapi.testclient import TestClient

    from retrylens.api.app import create_app
    from retrylens.api.auth import local_token

    store, settings = seeded
    direct = prechecks.calibration_over_time(store, "shop")
    assert len(direct) >= 2
    with TestClient(create_app(settings, store), headers={"X-API-Key": local_token(settings)}) as http:
        over_api = http.get("/v1/projects/shop/prechecks/monitor").json()["over_time"]
    assert [(datetime.fromisoformat(p["bucket"]), p["judged"]) for p in over_api] == [
        (p["bucket"], p["judged"]) for p in direct]
    app = run_page("model")
    _no_errors(app)
    drift = _charts(app)[2]
    assert drift["layout"]["title"]["text"] == "Risk model on real outcomes over time"
    shown = {x for trace in drift["data"] for x in trace["x"]}
    assert len(shown) == len(prechecks.calibration_over_time(store, None)) >= 3


def test_model_page_without_a_model(empty_source):
    app = run_page("model")
    _no_errors(app)
    assert any("No risk model trained yet" in i.value for i in app.info)


# --- reports and alerts -------------------------------------------------------------------------

def test_reports_page_shows_the_recommendation_and_tables(seeded, seeded_source):
    app = run_page("reports")
    _no_errors(app)
    said = [m.value for m in [*app.success, *app.warning] if m.value.startswith("Recommendation: ")]
    assert len(said) == 1 and ("adopt " in said[0] or "no clear winner" in said[0])
    candidates = _frame(app, "candidate")
    assert list(candidates["candidate"]) == ["cap-2", "patient"]
    assert "caps.timeout: 3 → 2" in candidates["changed fields (live → candidate)"][0]
    assert "budget.max_attempts: 5 → 8" in candidates["changed fields (live → candidate)"][1]
    estimates = _frame(app, "policy")
    assert list(estimates["policy"]) == ["live", "cap-2", "patient"]
    assert re.fullmatch(r"\d+\.\d% \[\d+\.\d%, \d+\.\d%\]", estimates["success rate"][0])
    assert _charts(app)[0]["layout"]["title"]["text"].startswith("success rate: estimate and 95 % CI")
    for frame in app.dataframe:  # words and numbers, never a Python literal
        cells = [str(c) for c in frame.value.to_numpy().ravel()]
        assert not [c for c in cells if "{" in c or "'" in c or "None" in c], cells


def test_reports_page_without_reports(empty_source):
    app = run_page("reports")
    _no_errors(app)
    assert any("No reports yet" in i.value for i in app.info)


def test_alerts_page_shows_rules_and_what_fires(seeded, seeded_source):
    app = run_page("alerts")
    _no_errors(app)
    shown = _metrics(app)
    assert (shown["Rules"], shown["Firing"]) == ("2", "1")
    firing = _frame(app, "rule")
    assert list(firing["rule"]) == ["retry rate above 10%"]
    assert len(_frame(app, "message")) == 1


def test_alerts_page_on_an_empty_store(empty_source):
    app = run_page("alerts")
    _no_errors(app)
    assert any("Nothing is firing" in s.value for s in app.success)
    assert any("No alert rules" in i.value for i in app.info)


def test_task_view_shows_the_stored_handoff_package(seeded, seeded_source):
    from test_dashboard_story import _handed_off_task

    store, _ = seeded
    _handed_off_task(store, "pages-handoff", "t-handoff")
    app = run_page("task", project="pages-handoff", task_id="t-handoff")
    _no_errors(app)
    assert any("unclassified failure" in i.value for i in app.info)
    [expander] = [e for e in app.expander if e.label.startswith("Hand-off package 1")]
    shown = [c.value for c in expander.code]
    assert shown[0].startswith("refund order 42") and "sk-proj-" not in shown[0]
    errors = next(f.value for f in expander.dataframe if "error_type" in f.value.columns)
    assert list(errors["attempt"]) == [1]
    assert "inconsistent balance" in expander.json[0].value


def test_task_view_draws_the_task_as_a_waterfall(seeded, seeded_source):
    from retrylens.dashboard.story import build_story

    store, _ = seeded
    stories = (build_story(h["project"], h["task_id"], store.task_events(h["project"], h["task_id"]))
               for h in recent_handoffs(store, limit=50))
    story = next(s for s in stories if len(s.attempts) >= 2)
    app = run_page("task", project=story.project, task_id=story.task_id)
    _no_errors(app)
    traces = {t["name"]: t for t in _charts(app)[0]["data"]}
    assert traces["attempts"]["type"] == "bar" and traces["attempts"]["y"] == [a.label for a in story.attempts]
    durations = [(a.ended - a.started).total_seconds() * 1000 for a in story.attempts]
    assert traces["attempts"]["x"] == pytest.approx([max(d, 1) for d in durations])  # each attempt's duration
    assert len(traces["hand-off"]["x"]) == 1
    assert "backoff" in traces and "side effects" in traces
