"""Alert rules on any metric: a threshold over a trailing window, overall or per slice.

A rule watches one metric of :mod:`.metrics` (e.g. ``retry_rate > 0.3`` over 15 minutes,
per agent, in project ``shop``) or one loop/pollution signal of
:data:`~.pollution.SIGNAL_MEASURES` (e.g. ``max_trailing_errors >= 3``; read from the
events, exact). :func:`evaluate_alerts` computes it from the rollups
(window aligned to 5-minute buckets) and compares with the state stored in
``alert_state``: a breach that is not yet firing **fires** (one notification), a firing
slice that no longer breaches — or has no traffic left — **resolves** (one notification);
anything else is silent, so a long breach notifies once. Every notification goes to the
log and, when configured, to a webhook (JSON POST), and is recorded in ``alert_log``.
:func:`run_periodically` evaluates on an interval until stopped.
"""

from __future__ import annotations

import json
import logging
import operator
import threading
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import httpx

from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .filters import Slice, dimension_of
from .metrics import METRIC_NAMES, Metrics, metrics_by, metrics_summary
from .pollution import SIGNAL_MEASURES, signal_measures
from .prechecks import PRECHECK_MEASURES, precheck_measures
from .webhook_targets import webhook_refusal

log = logging.getLogger("retrylens.alerts")
Op = Literal[">", ">=", "<", "<="]
_OPS: dict[str, Callable[[float, float], bool]] = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_SLICE_FIELDS = ("project", "agent", "phase", "error_type", "policy_version")
#: What a rule may watch: the metrics, the loop and pollution signals, then the risk model on real
#: outcomes (pre-checks whose tasks ended in the window; ``calls`` = how many, for ``min_calls``).
RULE_METRICS: tuple[str, ...] = (*METRIC_NAMES, *SIGNAL_MEASURES, *PRECHECK_MEASURES)


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
    rule_id: str
    rule_name: str
    slice_value: str
    status: Literal["firing", "resolved"]
    value: float | None
    threshold: float
    at: datetime
    message: str

    def payload(self) -> dict[str, Any]:
        data = asdict(self)
        data["at"] = self.at.isoformat()
        return data


Notifier = Callable[[Notification], bool]


def webhook_notifier(url: str, *, timeout_s: float = 3.0) -> Notifier:
    """POSTs the notification as JSON; a failed delivery is logged and reported, never raised."""

    def send(notification: Notification) -> bool:
        try:
            response = httpx.post(url, json=notification.payload(), timeout=timeout_s)
            response.raise_for_status()
            return True
        except httpx.HTTPError as exc:
            log.error("alert webhook %s failed for %s: %s", url, notification.rule_name, exc)
            return False

    return send


def refused_notifier(url: str, reason: str) -> Notifier:
    """Stands in for a webhook the server must not post to: each notification is logged as undelivered."""

    def refuse(notification: Notification) -> bool:
        log.error("alert webhook %s refused for %s: %s", url, notification.rule_name, reason)
        return False

    return refuse


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


def list_rules(store: EventStore, *, include_disabled: bool = True) -> list[AlertRule]:
    rows = query_rows(store.client, store.sql("SELECT * FROM [[db]].alert_rules FINAL WHERE NOT deleted ORDER BY name"))
    rules = [
        AlertRule(rule_id=r["rule_id"], name=r["name"], metric=r["metric"], op=r["op"], threshold=r["threshold"],
                  window_minutes=r["window_minutes"], where=Slice(**json.loads(r["filters"] or "{}")), per=r["per"],
                  min_calls=r["min_calls"], webhook_url=r["webhook_url"], enabled=bool(r["enabled"]))
        for r in rows
    ]
    return [r for r in rules if include_disabled or r.enabled]


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


def alert_history(store: EventStore, *, limit: int = 100) -> list[dict[str, Any]]:
    """Notifications sent, newest first."""
    sql = store.sql("SELECT * FROM [[db]].alert_log ORDER BY ts DESC, rule_id, slice_value, status LIMIT {limit:UInt32}")
    return query_rows(store.client, sql, {"limit": max(0, int(limit))})


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


def evaluate_rule(store: EventStore, rule: AlertRule, *, now: datetime, notifiers: list[Notifier]) -> list[Notification]:
    where = rule.where.with_(start=now - timedelta(minutes=rule.window_minutes), end=now)
    current = _current(store, rule, where)
    firing = {s["slice_value"]: s for s in alert_states(store, rule.rule_id) if s["status"] == "firing"}
    changes: list[Notification] = []
    for value, (_m, breached, number) in current.items():
        if breached and value not in firing:
            changes.append(_notification(rule, value, "firing", number, now))
    for value in firing:
        breached = current.get(value, (None, False, None))[1]
        if not breached:
            changes.append(_notification(rule, value, "resolved", current.get(value, (None, False, None))[2], now))
    for change in changes:
        _record(store, change, notifiers, started=now if change.status == "firing" else firing[change.slice_value]["started_at"])
    return changes


def _notification(rule: AlertRule, value: str, status: str, number: float | None, now: datetime) -> Notification:
    where = f" [{rule.per}={value}]" if rule.per else ""
    shown = "no data" if number is None else f"{number:.4g}"
    verb = "breached" if status == "firing" else "back within"
    message = (f"{rule.name}{where}: {rule.metric} = {shown} {verb} {rule.op} {rule.threshold:g} "
               f"over {rule.window_minutes} min")
    return Notification(rule.rule_id, rule.name, value, status, number, rule.threshold, now, message)  # type: ignore[arg-type]


def _record(store: EventStore, change: Notification, notifiers: list[Notifier], *, started: datetime) -> None:
    level = logging.WARNING if change.status == "firing" else logging.INFO
    log.log(level, "alert %s: %s", change.status, change.message)
    delivered = all([notify(change) for notify in notifiers]) if notifiers else True
    value = float("nan") if change.value is None else change.value
    store.client.insert(
        f"{store.database}.alert_state",
        [[change.rule_id, change.slice_value, change.status, value, change.threshold, started, change.at]],
        column_names=["rule_id", "slice_value", "status", "value", "threshold", "started_at", "updated_at"],
    )
    store.client.insert(
        f"{store.database}.alert_log",
        [[change.at, change.rule_id, change.rule_name, change.slice_value, change.status, value,
          change.threshold, change.message, delivered]],
        column_names=["ts", "rule_id", "rule_name", "slice_value", "status", "value", "threshold", "message", "delivered"],
    )


def evaluate_alerts(
    store: EventStore, *, now: datetime | None = None, webhook_url: str = "", notifiers: list[Notifier] | None = None,
    allowed_hosts: tuple[str, ...] | list[str] = (),
) -> list[Notification]:
    """Evaluate every enabled rule once; returns the notifications sent (fired or resolved).

    ``webhook_url`` (the server's default, the operator's) is posted to as is; a rule's own
    webhook only when :func:`webhook_refusal` lets it (``allowed_hosts``: the operator's list).
    """
    now = (now or datetime.now(UTC)).astimezone(UTC)
    sent: list[Notification] = []
    for rule in list_rules(store, include_disabled=False):
        targets = list(notifiers or [])
        if rule.webhook_url:
            reason = webhook_refusal(rule.webhook_url, allowed_hosts)
            targets.append(refused_notifier(rule.webhook_url, reason) if reason else webhook_notifier(rule.webhook_url))
        elif webhook_url:
            targets.append(webhook_notifier(webhook_url))
        sent.extend(evaluate_rule(store, rule, now=now, notifiers=targets))
    return sent


def run_periodically(
    store: EventStore, *, interval_s: float = 60.0, stop: threading.Event | None = None, webhook_url: str = "",
    clock: Callable[[], datetime] = lambda: datetime.now(UTC), allowed_hosts: tuple[str, ...] | list[str] = (),
) -> None:
    """Evaluate every ``interval_s`` until ``stop`` is set; an evaluation error is logged, not fatal."""
    stop = stop or threading.Event()
    while not stop.is_set():
        try:
            evaluate_alerts(store, now=clock(), webhook_url=webhook_url, allowed_hosts=allowed_hosts)
        except Exception:  # noqa: BLE001 - keep the loop alive; the error is logged with its traceback
            log.exception("alert evaluation failed")
        stop.wait(interval_s)
