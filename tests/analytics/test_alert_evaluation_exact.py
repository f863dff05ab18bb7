"""What one evaluation of the alert rules stores and says, row by row (analytics/alerts.py:
``evaluate_rule``, ``_record``, ``_retire``): the state a firing leaves (its value, threshold and
start), the history row and whether its page went anywhere but the log, the log's level, the
resolution's reason (cleared, no data, rule deleted or disabled) with the value it resolved at
and the firing's start, and the dispatcher woken once per queued page, never without one.

On the shared fixed event set (tests/analytics/analytics_eventset.py): in the hour to
T0 + 55 min, planner's retry rate is 0.5 and alpha had 9 calls; three hours after T1 the window
holds no planner call.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from analytics_eventset import T0, T1, load

from retrylens.analytics.alert_outbox import Outbox
from retrylens.analytics.alerts import (
    AlertRule,
    alert_history,
    alert_states,
    delete_rule,
    evaluate_alerts,
    save_rule,
)
from retrylens.analytics.filters import Slice

pytestmark = pytest.mark.clickhouse
DURING = T0 + timedelta(minutes=55)
AFTER = T1 + timedelta(hours=3)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _state(store: Any, rule: AlertRule) -> list[tuple[Any, ...]]:
    return [(s["slice_value"], s["status"], s["value"], s["threshold"], _utc(s["started_at"]), _utc(s["updated_at"]))
            for s in alert_states(store, rule.rule_id)]


def _history(store: Any) -> list[tuple[Any, ...]]:
    return sorted((_utc(h["ts"]), h["rule_name"], h["slice_value"], h["status"], h["value"], h["threshold"],
                   h["delivered"]) for h in alert_history(store))


def planner(**changes: Any) -> AlertRule:
    rule = AlertRule(name="planner retries", metric="retry_rate", op=">", threshold=0.3, window_minutes=60,
                     where=Slice(project="alpha"), per="agent")
    return replace(rule, **changes)


def test_a_firing_then_its_resolution_for_lack_of_data_are_stored_logged_and_not_queued_without_a_receiver(
    store, caplog: pytest.LogCaptureFixture,
) -> None:
    load(store)
    rule = save_rule(store, planner())
    woken: list[int] = []
    with caplog.at_level(logging.DEBUG, logger="retrylens.alerts"):
        (fired,) = evaluate_alerts(store, now=DURING, on_enqueue=lambda: woken.append(1))
    assert (fired.slice_value, fired.status, fired.value, fired.threshold) == ("planner", "firing", 0.5, 0.3)
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert _state(store, rule) == [("planner", "firing", 0.5, 0.3, DURING, DURING)]
    # no receiver: the log is the page's only road, and the history says it went there
    assert _history(store) == [(DURING, "planner retries", "planner", "firing", 0.5, 0.3, True)]
    assert woken == []

    caplog.clear()
    assert evaluate_alerts(store, now=DURING + timedelta(minutes=1)) == []  # still breached: silent
    with caplog.at_level(logging.DEBUG, logger="retrylens.alerts"):
        (resolved,) = evaluate_alerts(store, now=AFTER)
    assert (resolved.status, resolved.value, resolved.payload()["reason"]) == ("resolved", None, "no_data")
    assert resolved.payload()["fired_at"] == DURING.isoformat()  # the incident's start, not this evaluation's
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    ((value, state),) = [(s[2], s[:2] + s[3:]) for s in _state(store, rule)]
    assert math.isnan(value) and state == ("planner", "resolved", 0.3, DURING, AFTER)
    assert evaluate_alerts(store, now=AFTER + timedelta(minutes=1)) == []  # resolved once


def test_a_breach_that_clears_with_data_left_resolves_as_cleared_at_its_value(store) -> None:
    load(store)
    rule = save_rule(store, AlertRule(name="alpha calls", metric="calls", op=">", threshold=5, window_minutes=3 * 60,
                                      where=Slice(project="alpha")))
    (fired,) = evaluate_alerts(store, now=T1 + timedelta(hours=1))
    assert (fired.slice_value, fired.status, fired.value) == ("", "firing", 9.0)
    save_rule(store, replace(rule, threshold=100))  # the same rule, raised above what it sees
    (resolved,) = evaluate_alerts(store, now=T1 + timedelta(hours=1, minutes=1))
    assert (resolved.status, resolved.value, resolved.payload()["reason"]) == ("resolved", 9.0, "cleared")
    assert [s[1:4] for s in _state(store, rule)] == [("resolved", 9.0, 100.0)]


def test_each_queued_page_wakes_the_dispatcher_once_and_its_history_row_awaits_delivery(store) -> None:
    load(store)
    save_rule(store, planner(webhook_url="http://127.0.0.1:9/own"))
    save_rule(store, planner(name="to the default"))
    outbox, woken = Outbox(), []
    fired = evaluate_alerts(store, now=DURING, outbox=outbox, webhook_url="http://127.0.0.1:9/default",
                            on_enqueue=lambda: woken.append(1))
    assert len(fired) == 2 and len(woken) == 2
    # each page in its rule's project's lane (one project's receivers never hold up another's)
    assert sorted((d.project, d.receiver, d.trusted) for d in outbox.deliveries()) == [
        ("alpha", "http://127.0.0.1:9/default", True), ("alpha", "http://127.0.0.1:9/own", False)]
    assert [h[-1] for h in _history(store)] == [False, False]  # queued, not yet delivered


def test_a_rule_deleted_or_disabled_while_firing_resolves_at_its_last_value_and_nothing_else_does(store) -> None:
    load(store)
    deleted = save_rule(store, planner(name="deleted later"))
    disabled = save_rule(store, planner(name="disabled later"))
    kept = save_rule(store, planner(name="kept"))
    quiet = save_rule(store, planner(name="never fired", threshold=0.9))
    assert len(evaluate_alerts(store, now=DURING)) == 3
    # a state whose rule was never saved (a rule from another store's history): left alone, not an error
    store.client.insert(f"{store.database}.alert_state", [["no-such-rule", "x", "firing", 1.0, 1.0, DURING, DURING]],
                        column_names=["rule_id", "slice_value", "status", "value", "threshold", "started_at",
                                      "updated_at"])
    delete_rule(store, deleted)
    delete_rule(store, quiet)
    save_rule(store, replace(disabled, enabled=False))
    later = DURING + timedelta(minutes=1)
    resolved = evaluate_alerts(store, now=later)
    assert sorted((n.rule_name, n.status, n.value, n.payload()["reason"], n.payload()["fired_at"]) for n in resolved) \
        == [("deleted later", "resolved", 0.5, "rule_deleted", DURING.isoformat()),
            ("disabled later", "resolved", 0.5, "rule_disabled", DURING.isoformat())]
    assert [s[1] for s in _state(store, kept)] == ["firing"] and _state(store, quiet) == []
    assert [s[:2] for s in _state(store, deleted)] == [("planner", "resolved")]
    assert evaluate_alerts(store, now=later + timedelta(minutes=1)) == []  # resolved once
