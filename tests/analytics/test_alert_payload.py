"""The page an on-call engineer receives says what fired, where, how far past the threshold,
since when, and which tasks to open — planted in the fixed event set, so every field is known."""

from __future__ import annotations

from datetime import timedelta

import pytest
from alert_receiver import Receiver
from analytics_eventset import T0, T1, load

from retrylens.analytics.alert_delivery import Dispatcher
from retrylens.analytics.alert_outbox import Outbox
from retrylens.analytics.alerts import AlertRule, evaluate_alerts, save_rule
from retrylens.analytics.filters import Slice

pytestmark = pytest.mark.clickhouse
DURING = T0 + timedelta(minutes=55)
AFTER = T1 + timedelta(hours=3)


@pytest.fixture
def pages(store):
    """The firing and the resolution of planner's retry rate (0.5 > 0.3), as posted."""
    receiver = Receiver().start()
    load(store)
    save_rule(store, AlertRule(name="planner retries", metric="retry_rate", op=">", threshold=0.3, window_minutes=60,
                               where=Slice(project="alpha"), per="agent", webhook_url=receiver.url))
    outbox = Outbox()
    for now in (DURING, AFTER):
        evaluate_alerts(store, now=now, outbox=outbox, dashboard_url="https://dash.example/")
    Dispatcher(outbox, allowed_hosts=["127.0.0.1:*"]).run_once()  # pages are due when queued
    yield {page["status"]: page for page in receiver.received}
    receiver.stop()


def test_the_firing_page_names_project_rule_metric_value_threshold_and_window(pages) -> None:
    page = pages["firing"]
    assert page["project"] == "alpha" and page["rule"]["name"] == "planner retries"
    assert (page["metric"], page["value"], page["threshold"]) == ("retry_rate", pytest.approx(0.5), 0.3)
    assert page["rule"]["op"] == ">" and page["slice"] == {"dimension": "agent_name", "value": "planner"}
    assert page["window"] == {"minutes": 60, "start": (DURING - timedelta(hours=1)).isoformat(),
                              "end": DURING.isoformat()}
    assert page["fired_at"] == DURING.isoformat() and page["resolved_at"] is None
    assert page["summary"] == "FIRING alpha · planner retries (agent planner): retry_rate = 0.5, above 0.3 over the last 60 min"


def test_the_firing_page_lists_the_tasks_behind_it_with_links_to_their_page(pages) -> None:
    """Planner's tasks in the window are A (a retry that succeeded, $0.02 on it) and B (handed off)."""
    tasks = pages["firing"]["top_tasks"]
    assert [(t["task_id"], t["attempts"], t["failures"], t["outcome"]) for t in tasks] == [
        ("task-A", 2, 1, "succeeded"), ("task-B", 2, 2, "handed_off")]
    assert tasks[0]["url"] == "https://dash.example/task?project=alpha&task_id=task-A"


def test_the_text_field_reads_as_a_chat_message_with_the_links(pages) -> None:
    """Slack and Teams incoming webhooks show ``text``; plain lines with bare links render in both."""
    text = pages["firing"]["text"]
    assert text.splitlines()[0] == pages["firing"]["summary"]
    assert "https://dash.example/task?project=alpha&task_id=task-A" in text
    assert "https://dash.example/alerts?project=alpha" in text


def test_the_resolution_says_why_it_resolved_and_how_long_it_fired(pages) -> None:
    page = pages["resolved"]
    assert page["dedup_key"] == pages["firing"]["dedup_key"] and page["reason"] == "no_data"
    assert page["resolved_at"] == AFTER.isoformat() and page["fired_at"] == DURING.isoformat()
    lasted = round((AFTER - DURING).total_seconds() / 3600, 1)
    assert page["summary"] == (
        f"RESOLVED alpha · planner retries (agent planner): no traffic over the last 60 min, so retry_rate is no "
        f"longer above 0.3 (firing {lasted} h since {DURING:%Y-%m-%d %H:%M} UTC)")
    assert "back within" not in page["summary"]
