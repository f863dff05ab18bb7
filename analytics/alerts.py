"""Alert rules on any metric: a threshold over a trailing window, overall or per slice.

A rule watches one metric of :mod:`.metrics` (e.g. ``retry_rate > 0.3`` over 15 minutes,
per agent, in project ``shop``) or one loop/pollution signal of
:data:`~.pollution.SIGNAL_MEASURES` (e.g. ``max_trailing_errors >= 3``; read from the
events, exact). :func:`evaluate_alerts` computes it from the rollups
(window aligned to 5-minute buckets) and compares with the state stored in
``alert_state``: a breach that is not yet firing **fires** (one notification), a firing
slice that no longer breaches — or has no traffic left — **resolves** (one notification);
anything else is silent, so a long breach notifies once. A rule deleted or disabled while
firing **resolves** too (its incident must not stay open in the receiver). Every
notification goes to the log and is recorded in ``alert_log``; its page
(:mod:`.alert_payload`) is queued in the durable outbox (:mod:`.alert_outbox`) for the
rule's webhook, else the server's, and posted off this loop (:mod:`.alert_delivery`).
:func:`run_periodically` evaluates on an interval until stopped.
"""

from __future__ import annotations

import json
import logging
import math
import operator
import threading
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .alert_outbox import Outbox, dedup_key
from .alert_payload import Change, Reason, build_payload
from .filters import Slice, dimension_of
from .metrics import METRIC_NAMES, Metrics, TaskCost, metrics_by, metrics_summary, task_costs
from .pollution import SIGNAL_MEASURES, signal_measures
from .prechecks import PRECHECK_MEASURES, precheck_measures

log = logging.getLogger("retrylens.alerts")
Op = Literal[">", ">=", "<", "<="]
_OPS: dict[str, Callable[[float, float], bool]] = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_SLICE_FIELDS = ("project", "agent", "phase", "error_type", "policy_version")
#: What a rule may watch: the metrics, the loop and pollution signals, then the risk model on real
#: outcomes (pre-checks whose tasks ended in the window; ``calls`` = how many, for ``min_calls``).
RULE_METRICS: tuple[str, ...] = (*METRIC_NAMES, *SIGNAL_MEASURES, *PRECHECK_MEASURES)
#: Where pages link to when the operator has not set ``dashboard_url`` (`retrylens dashboard`'s default).
DEFAULT_DASHBOARD_URL = "http://127.0.0.1:8501"


@dataclass(frozen=True, kw_only=True)
class AlertRule:
    name: str
    metric: str
    op: Op
    threshold: float
    window_minutes: int = 15
    where: Slice = field(default_factory=Slice)
    per: str = ""
    min_calls: int = 0
    webhook_url: str = ""
    enabled: bool = True
    rule_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def __post_init__(self) -> None:
        if self.metric not in RULE_METRICS:
            raise ValueError(f"unknown metric {self.metric!r}; choose one of {', '.join(RULE_METRICS)}")
        if self.op not in _OPS:
            raise ValueError(f"unknown operator {self.op!r}; choose one of {', '.join(_OPS)}")
        if self.per:
            object.__setattr__(self, "per", dimension_of(self.per))
        if self.metric in PRECHECK_MEASURES and self.per not in ("", "agent_name"):
            raise ValueError(f"{self.metric} can be watched overall or per agent, not per {self.per}")
        if self.window_minutes < 1:
            raise ValueError("window_minutes must be at least 1")

    def breached(self, metrics: Metrics | dict[str, float]) -> tuple[bool, float | None]:
        """Whether ``metrics`` (a :class:`Metrics` or a :func:`signal_measures` row) breach."""
        if isinstance(metrics, dict):
            value, calls = metrics.get(self.metric), metrics.get("calls", 0)
        else:
            value, calls = getattr(metrics, self.metric), metrics.calls
        if value is None or calls < self.min_calls:
            return False, value
        return _OPS[self.op](float(value), self.threshold), float(value)


@dataclass(frozen=True)
class Notification:
    """One firing or resolution; ``body`` is the page posted to the receivers (:mod:`.alert_payload`)."""

    rule_id: str
    rule_name: str
    slice_value: str
    status: Literal["firing", "resolved"]
    value: float | None
    threshold: float
    at: datetime
    message: str
    body: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def payload(self) -> dict[str, Any]:
        return dict(self.body)


# --- rule storage -----------------------------------------------------------------------

_RULE_COLUMNS = ["rule_id", "name", "metric", "op", "threshold", "window_minutes", "filters", "per",
                 "min_calls", "webhook_url", "enabled", "deleted", "updated_at"]


def save_rule(store: EventStore, rule: AlertRule, *, deleted: bool = False) -> AlertRule:
    filters = {name: getattr(rule.where, name) for name in _SLICE_FIELDS if getattr(rule.where, name)}
    row = [rule.rule_id, rule.name, rule.metric, rule.op, float(rule.threshold), int(rule.window_minutes),
           json.dumps(filters), rule.per, int(rule.min_calls), rule.webhook_url, rule.enabled, deleted,
           datetime.now(UTC)]
    store.client.insert(f"{store.database}.alert_rules", [row], column_names=_RULE_COLUMNS)
    return rule


def delete_rule(store: EventStore, rule: AlertRule) -> None:
    save_rule(store, rule, deleted=True)


def _rule_of(r: dict[str, Any]) -> AlertRule:
    return AlertRule(rule_id=r["rule_id"], name=r["name"], metric=r["metric"], op=r["op"], threshold=r["threshold"],
                     window_minutes=r["window_minutes"], where=Slice(**json.loads(r["filters"] or "{}")), per=r["per"],
                     min_calls=r["min_calls"], webhook_url=r["webhook_url"], enabled=bool(r["enabled"]))


def list_rules(store: EventStore, *, include_disabled: bool = True) -> list[AlertRule]:
    rows = query_rows(store.client, store.sql("SELECT * FROM [[db]].alert_rules FINAL WHERE NOT deleted ORDER BY name"))
    rules = [_rule_of(r) for r in rows]
    return [r for r in rules if include_disabled or r.enabled]


def _stored_rules(store: EventStore) -> dict[str, tuple[AlertRule, bool]]:
    """Every rule ever saved, deleted ones too: ``rule_id -> (rule, deleted)``."""
    rows = query_rows(store.client, store.sql("SELECT * FROM [[db]].alert_rules FINAL"))
    return {r["rule_id"]: (_rule_of(r), bool(r["deleted"])) for r in rows}


def project_rule_ids(store: EventStore, project: str) -> set[str]:
    """Ids of the project's rules, deleted ones too (their history is the project's)."""
    rows = query_rows(store.client, store.sql(
        "SELECT rule_id FROM [[db]].alert_rules FINAL WHERE JSONExtractString(filters, 'project') = {p:String}"),
        {"p": project})
    return {r["rule_id"] for r in rows}


def check_rule_cap(store: EventStore, project: str | None, cap: int) -> None:
    """Refuse a new rule when ``project`` has ``cap`` rules (``ValueError`` naming the setting)."""
    have = sum(1 for r in list_rules(store) if r.where.project == project)
    if have >= cap:
        raise ValueError(f"project {project!r} has {have} alert rules, the most it may have "
                         f"(alert_rules_per_project = {cap}); delete one or raise the setting")


def get_rule(store: EventStore, rule_id: str) -> AlertRule | None:
    """The rule with this id, or ``None`` (also for a deleted one)."""
    return next((r for r in list_rules(store) if r.rule_id == rule_id), None)


# --- evaluation -------------------------------------------------------------------------

def alert_states(store: EventStore, rule_id: str | None = None) -> list[dict[str, Any]]:
    """Current state per (rule, slice): ``firing`` or ``resolved``, with the last value."""
    sql = "SELECT * FROM [[db]].alert_state FINAL"
    params: dict[str, Any] = {}
    if rule_id is not None:
        sql += " WHERE rule_id = {rule:String}"
        params["rule"] = rule_id
    return query_rows(store.client, store.sql(sql + " ORDER BY rule_id, slice_value"), params)


def alert_history(store: EventStore, *, limit: int = 100, rule_ids: Collection[str] | None = None) -> list[dict[str, Any]]:
    """Notifications sent, newest first; only those of ``rule_ids`` when given (filtered before the limit)."""
    sql = "SELECT * FROM [[db]].alert_log"
    params: dict[str, Any] = {"limit": max(0, int(limit))}
    if rule_ids is not None:
        sql += " WHERE rule_id IN {ids:Array(String)}"
        params["ids"] = sorted(rule_ids)
    sql += " ORDER BY ts DESC, rule_id, slice_value, status LIMIT {limit:UInt32}"
    return query_rows(store.client, store.sql(sql), params)


def _current(store: EventStore, rule: AlertRule, where: Slice) -> dict[str, tuple[Any, bool, float | None]]:
    if rule.metric in PRECHECK_MEASURES:
        assert where.start is not None and where.end is not None
        rows = precheck_measures(store, project=where.project, agent=where.agent, start=where.start,
                                 end=where.end, per=rule.per)
        return {value: (row, *rule.breached(row)) for value, row in rows.items()}
    if rule.metric in SIGNAL_MEASURES:
        signals = signal_measures(store, where, per=rule.per)
        return {value: (row, *rule.breached(row)) for value, row in signals.items()}
    if rule.per:
        results = [(s.value, s.metrics) for s in metrics_by(store, rule.per, where, limit=10_000)]
    else:
        results = [("", metrics_summary(store, where))]
    return {value: (m, *rule.breached(m)) for value, m in results}


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """Where evaluation hands its pages: the outbox (``None``: no receiver may be configured),
    the server's default webhook, and the dashboard the pages link to."""

    outbox: Outbox | None = None
    webhook_url: str = ""
    dashboard_url: str = DEFAULT_DASHBOARD_URL
    on_enqueue: Callable[[], None] = lambda: None


def receivers(rule: AlertRule, default_url: str) -> list[tuple[str, bool]]:
    """``(url, trusted)`` pairs a rule's pages go to: its own webhook (checked before each post),
    else the server's (the operator's, trusted), else none (the log only)."""
    targets: list[tuple[str, bool]] = []
    if rule.webhook_url:
        targets.append((rule.webhook_url, False))
    elif default_url:
        targets.append((default_url, True))
    return targets


def evaluate_rule(store: EventStore, rule: AlertRule, *, now: datetime, delivery: Delivery) -> list[Notification]:
    where = rule.where.with_(start=now - timedelta(minutes=rule.window_minutes), end=now)
    current = _current(store, rule, where)
    firing = {s["slice_value"]: s for s in alert_states(store, rule.rule_id) if s["status"] == "firing"}
    changes: list[Notification] = []
    for value, (_m, breached, number) in current.items():
        if breached and value not in firing:
            top = _top_tasks(store, rule, value, where)
            changes.append(_notification(rule, value, "breached", number, now, now, delivery, top))
    for value, state in firing.items():
        breached, number = current.get(value, (None, False, None))[1:]
        if not breached:
            reason: Reason = "no_data" if number is None else "cleared"
            changes.append(_notification(rule, value, reason, number, now, _utc(state["started_at"]), delivery, []))
    for change in changes:
        _record(store, change, rule, delivery)
    return changes


_SLICE_OF_DIMENSION = {"project": "project", "agent_name": "agent", "phase": "phase", "error_type": "error_type",
                       "policy_version": "policy_version"}


def _top_tasks(store: EventStore, rule: AlertRule, value: str, where: Slice) -> list[TaskCost]:
    """The three tasks behind a firing: most spent on retries, then most failures, then most attempts."""
    if rule.per in _SLICE_OF_DIMENSION:
        where = where.with_(**{_SLICE_OF_DIMENSION[rule.per]: value})
    tasks = task_costs(store, where, only_retried=False, limit=50)
    return sorted(tasks, key=lambda t: (-t.retry_cost_usd, -t.failures, -t.attempts, t.task_id))[:3]


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _incident_key(delivery: Delivery, rule: AlertRule, value: str, firing: bool, now: datetime,
                  started: datetime) -> str:
    if delivery.outbox is None:
        return dedup_key(rule.rule_id, value, started.timestamp())
    if firing:
        return delivery.outbox.open_incident(rule.rule_id, value, now=now.timestamp())
    return delivery.outbox.close_incident(rule.rule_id, value, opened_at=started.timestamp(), now=now.timestamp())


def _notification(rule: AlertRule, value: str, reason: Reason, number: float | None, now: datetime,
                  started: datetime, delivery: Delivery, top: list[TaskCost]) -> Notification:
    status: Literal["firing", "resolved"] = "firing" if reason == "breached" else "resolved"
    change = Change(
        project=rule.where.project or "", rule_id=rule.rule_id, rule_name=rule.name, metric=rule.metric, op=rule.op,
        threshold=rule.threshold, window_minutes=rule.window_minutes, per=rule.per,
        where={name: str(getattr(rule.where, name)) for name in _SLICE_FIELDS if getattr(rule.where, name)},
        slice_value=value, status=status, reason=reason, value=number, at=now, started_at=started,
        dedup_key=_incident_key(delivery, rule, value, status == "firing", now, started))
    body = build_payload(change, top_tasks=top, dashboard_url=delivery.dashboard_url)
    return Notification(rule.rule_id, rule.name, value, status, number, rule.threshold, now, body["summary"], body)


def _record(store: EventStore, change: Notification, rule: AlertRule, delivery: Delivery) -> None:
    """Queue the page for every receiver, then store the new state and the history row.

    The page is queued first: if the process dies before the state is stored, the next
    evaluation fires again and finds the incident open in the outbox (same key, nothing new
    to send) rather than a stored firing whose page was never queued."""
    level = logging.WARNING if change.status == "firing" else logging.INFO
    log.log(level, "alert %s: %s", change.status, change.message)
    targets = receivers(rule, delivery.webhook_url)
    if targets and delivery.outbox is None:
        raise ValueError(f"rule {rule.name!r} has a receiver but the evaluation was given no outbox to queue it in")
    for url, trusted in targets:
        assert delivery.outbox is not None
        # aged from now by the outbox's clock; the evaluation's time is the page's `at`
        delivery.outbox.enqueue(project=rule.where.project or "", receiver=url, trusted=trusted, payload=change.body)
    if targets:
        delivery.on_enqueue()
    value = float("nan") if change.value is None else change.value
    started = datetime.fromisoformat(change.body["fired_at"])
    store.client.insert(
        f"{store.database}.alert_state",
        [[change.rule_id, change.slice_value, change.status, value, change.threshold, started, change.at]],
        column_names=["rule_id", "slice_value", "status", "value", "threshold", "started_at", "updated_at"],
    )
    store.client.insert(
        f"{store.database}.alert_log",
        [[change.at, change.rule_id, change.rule_name, change.slice_value, change.status, value,
          change.threshold, change.message, not targets]],
        column_names=["ts", "rule_id", "rule_name", "slice_value", "status", "value", "threshold", "message", "delivered"],
    )


def _retire(store: EventStore, live: set[str], now: datetime, delivery: Delivery) -> list[Notification]:
    """Resolve what is still firing for rules deleted or disabled since (their incidents must close)."""
    stored = _stored_rules(store)
    changes: list[Notification] = []
    for state in alert_states(store):
        if state["status"] != "firing" or state["rule_id"] in live or state["rule_id"] not in stored:
            continue
        rule, deleted = stored[state["rule_id"]]
        number = None if math.isnan(state["value"]) else float(state["value"])
        change = _notification(rule, state["slice_value"], "rule_deleted" if deleted else "rule_disabled", number,
                               now, _utc(state["started_at"]), delivery, [])
        _record(store, change, rule, delivery)
        changes.append(change)
    return changes


def evaluate_alerts(
    store: EventStore, *, now: datetime | None = None, webhook_url: str = "", outbox: Outbox | None = None,
    dashboard_url: str = DEFAULT_DASHBOARD_URL, on_enqueue: Callable[[], None] = lambda: None,
) -> list[Notification]:
    """Evaluate every enabled rule once, and resolve what deleted or disabled rules left firing.

    Returns the notifications (fired or resolved); their pages are queued in ``outbox`` for
    :class:`~.alert_delivery.Dispatcher` to post — to the rule's own webhook, else to
    ``webhook_url`` (the server's default, the operator's); ``on_enqueue`` is called after.
    """
    now = (now or datetime.now(UTC)).astimezone(UTC)
    delivery = Delivery(outbox=outbox, webhook_url=webhook_url, dashboard_url=dashboard_url, on_enqueue=on_enqueue)
    sent: list[Notification] = []
    rules = list_rules(store, include_disabled=False)
    for rule in rules:
        sent.extend(evaluate_rule(store, rule, now=now, delivery=delivery))
    sent.extend(_retire(store, {r.rule_id for r in rules}, now, delivery))
    return sent


def run_periodically(
    store: EventStore, *, interval_s: float = 60.0, stop: threading.Event | None = None, webhook_url: str = "",
    clock: Callable[[], datetime] = lambda: datetime.now(UTC), outbox: Outbox | None = None,
    dashboard_url: str = DEFAULT_DASHBOARD_URL, on_enqueue: Callable[[], None] = lambda: None,
) -> None:
    """Evaluate every ``interval_s`` until ``stop`` is set; an evaluation error is logged, not fatal."""
    stop = stop or threading.Event()
    while not stop.is_set():
        try:
            evaluate_alerts(store, now=clock(), webhook_url=webhook_url, outbox=outbox, dashboard_url=dashboard_url,
                            on_enqueue=on_enqueue)
        except Exception:  # noqa: BLE001 - keep the loop alive; the error is logged with its traceback
            log.exception("alert evaluation failed")
        stop.wait(interval_s)
