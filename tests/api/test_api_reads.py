"""Read endpoints answer what the analytics layer computes, through the typed client."""

from __future__ import annotations

import pytest
from apitest_support import KEYS

from retrylens.analytics.failure_groups import failure_groups
from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import failure_type_distribution, metrics_summary
from retrylens.api.serialize import plain
from retrylens.sdk.transport.client import ApiError, RetryLensClient

pytestmark = pytest.mark.clickhouse


@pytest.fixture
def api(client) -> RetryLensClient:
    return RetryLensClient("http://testserver", KEYS["acme"], http=client)


def test_metrics_equal_the_analytics_layer(api, seeded):
    for source in ("rollup", "raw"):
        expected = plain(metrics_summary(seeded, Slice(project="acme"), source=source))
        assert api.metrics("acme", source=source) == expected
    planner = plain(metrics_summary(seeded, Slice(project="acme", agent="planner")))
    assert api.metrics("acme", agent="planner") == planner


def test_breakdowns_trend_and_failure_types(api, seeded):
    by_agent = api.metrics_by("acme", "agent")
    assert {row["value"] for row in by_agent} == {"planner", "coder", "researcher"}
    assert sum(row["metrics"]["tasks"] for row in by_agent) == 80
    trend = api.trend("acme", bucket="1h")
    assert sum(p["metrics"]["calls"] for p in trend) == api.metrics("acme")["calls"]
    assert trend[0]["bucket"].endswith("+00:00")
    assert api.failure_types("acme") == plain(failure_type_distribution(seeded, Slice(project="acme")))


def test_handoffs_and_tasks_paginate(api):
    handoffs = api.handoffs("acme", limit=100)
    assert handoffs and all(h["project"] == "acme" for h in handoffs)
    first, second = api.handoffs("acme", limit=2), api.handoffs("acme", limit=2, offset=2)
    assert first == handoffs[:2] and second == handoffs[2:4]
    tasks = api.tasks("acme", only_retried=True, limit=5)
    assert len(tasks) == 5 and tasks[0]["retry_cost_usd"] >= tasks[-1]["retry_cost_usd"]


def test_a_task_is_found_by_task_or_correlation_id_and_its_timeline_read(api):
    task = api.handoffs("acme", limit=1)[0]
    by_task = api.search_tasks("acme", task["task_id"])
    by_attempt = api.search_tasks("acme", task["correlation_id"])
    assert [t["task_id"] for t in by_task] == [t["task_id"] for t in by_attempt] == [task["task_id"]]
    events = api.task_events("acme", task["task_id"])
    assert events[0]["kind"] == "task_started" and isinstance(events[0]["input_features"], dict)
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    assert by_task[0]["events"] == len(events) and by_task[0]["outcome"] == "handed_off"
    assert api.task_events("acme", "no-such-task") == []


def test_failure_groups_fingerprints_patterns_and_pollution(api, seeded):
    groups = api.failure_groups("acme")
    assert [g["group_id"] for g in groups] == [g.group_id for g in failure_groups(seeded, "acme")]
    assert groups[0]["trend"] in {"new", "rising", "falling", "steady", "quiet"}
    top = api.fingerprints("acme", limit=3)
    one = api.fingerprint("acme", top[0]["fingerprint"])
    assert one["failures"] == top[0]["failures"] and one["known_bad"] == (one["failures"] >= 3)
    assert api.fingerprint("acme", "0" * 32)["attempts"] == 0
    patterns = api.patterns("acme", min_support=3)
    assert all(p["lift"] >= 1.2 and p["description"] for p in patterns)
    assert api.pollution_report("acme")["tasks"] == 80
    assert all(t["project"] == "acme" for t in api.pollution_tasks("acme", limit=10))


def test_alerts_show_only_the_projects_rules(api, seeded):
    from retrylens.analytics.alerts import AlertRule, evaluate_alerts, save_rule

    save_rule(seeded, AlertRule(name="acme retries", metric="retry_rate", op=">", threshold=0.0,
                                window_minutes=60 * 24 * 3, where=Slice(project="acme")))
    save_rule(seeded, AlertRule(name="globex retries", metric="retry_rate", op=">", threshold=0.0,
                                where=Slice(project="globex")))
    evaluate_alerts(seeded)
    alerts = api.alerts("acme")
    assert [r["name"] for r in alerts["rules"]] == ["acme retries"]
    assert [s["status"] for s in alerts["firing"]] == ["firing"]
    assert [h["rule_name"] for h in alerts["history"]] == ["acme retries"]


def test_shadow_reports_come_from_the_evaluation_area_or_a_registered_provider(app, api):
    live = api.shadow_reports("acme")
    assert live["available"] is True and live["report"]["decisions"] == 0
    app.state.shadow_reports = lambda store, where: {"project": where.project, "agent": where.agent}
    assert api.shadow_reports("acme", agent="planner") == {"available": True,
                                                           "report": {"project": "acme", "agent": "planner"}}


def test_errors_raise_api_error_with_status(api):
    with pytest.raises(ApiError) as raised:
        api.metrics("globex")
    assert raised.value.status == 404
    with pytest.raises(TypeError, match="unknown filter"):
        api.metrics("acme", agnet="planner")


def test_a_project_without_events_answers_empty_not_an_error(api_settings, store):
    from fastapi.testclient import TestClient

    from retrylens.api.app import create_app

    with TestClient(create_app(api_settings, store)) as test_client:
        api = RetryLensClient("http://testserver", KEYS["acme"], http=test_client)
        assert api.metrics("acme")["calls"] == 0 and api.metrics("acme")["retry_rate"] is None
        assert api.trend("acme") == [] and api.handoffs("acme") == [] and api.failure_groups("acme") == []
        assert api.pollution_report("acme")["tasks"] == 0 and api.patterns("acme") == []
        assert api.tasks("acme") == [] and api.fingerprints("acme") == [] and api.alerts("acme")["rules"] == []
