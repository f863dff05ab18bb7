"""What a page says: enough for the engineer on call to act without opening anything else.

One JSON body per firing or resolution (documented with an example in the README's
"Alerts" section): the project, the rule and its metric, the value against the threshold,
the window, when it fired and resolved, the tasks behind it with links to their page in
the dashboard, one human ``summary`` line, and a ``text`` field that Slack and Microsoft
Teams incoming webhooks show as the message (plain text with bare links, which both render).
``dedup_key`` names the incident (PagerDuty's field of the same name): a firing and its
resolution carry the same key. The older flat fields (``rule_id``, ``rule_name``,
``slice_value``, ``message`` …) are kept for receivers written against them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlencode

from .metrics import TaskCost

Reason = Literal["breached", "cleared", "no_data", "rule_deleted", "rule_disabled"]
PAYLOAD_VERSION = "retrylens.alert/1"
_OP_WORDS = {">": "above", ">=": "at or above", "<": "below", "<=": "at or below"}
_SLICE_NAMES = {"agent_name": "agent", "phase": "phase", "error_type": "error type", "policy_version": "policy"}


@dataclass(frozen=True, kw_only=True)
class Change:
    """One firing or resolution of a rule's slice, as the evaluation saw it."""

    project: str
    rule_id: str
    rule_name: str
    metric: str
    op: str
    threshold: float
    window_minutes: int
    per: str
    where: dict[str, str]
    slice_value: str
    status: Literal["firing", "resolved"]
    reason: Reason
    value: float | None
    at: datetime
    started_at: datetime
    dedup_key: str


def _number(value: float | None) -> str:
    return "no data" if value is None else f"{value:.4g}"


def _duration(start: datetime, end: datetime) -> str:
    minutes = max(0, round((end - start).total_seconds() / 60))
    return f"{minutes} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def summary(change: Change) -> str:
    """One line: status, project · rule (slice): what is true, against what, over which window."""
    where = f" ({_SLICE_NAMES.get(change.per, change.per)} {change.slice_value})" if change.per else ""
    head = f"{change.status.upper()} {change.project} · {change.rule_name}{where}: "
    limit = f"{_OP_WORDS[change.op]} {change.threshold:g}"
    window = f"over the last {change.window_minutes} min"
    if change.status == "firing":
        return f"{head}{change.metric} = {_number(change.value)}, {limit} {window}"
    lasted = f"firing {_duration(change.started_at, change.at)} since {change.started_at:%Y-%m-%d %H:%M} UTC"
    if change.reason == "rule_deleted":
        return f"{head}the rule was deleted while firing ({lasted})"
    if change.reason == "rule_disabled":
        return f"{head}the rule was disabled while firing ({lasted})"
    if change.value is None:
        return f"{head}no traffic {window}, so {change.metric} is no longer {limit} ({lasted})"
    return f"{head}{change.metric} = {_number(change.value)}, no longer {limit} {window} ({lasted})"


def task_link(dashboard_url: str, project: str, task_id: str) -> str:
    """The dashboard's task page for one task (its timeline)."""
    return f"{dashboard_url.rstrip('/')}/task?{urlencode({'project': project, 'task_id': task_id})}"


def _task(task: TaskCost, dashboard_url: str) -> dict[str, Any]:
    return {"task_id": task.task_id, "attempts": task.attempts, "failures": task.failures, "outcome": task.outcome,
            "retry_cost_usd": round(task.retry_cost_usd, 6), "url": task_link(dashboard_url, task.project, task.task_id)}


def _text(change: Change, line: str, tasks: list[dict[str, Any]], alerts_url: str) -> str:
    lines = [line, f"Rule: {change.rule_name} — {change.metric} {change.op} {change.threshold:g} over "
                   f"{change.window_minutes} min" + (f", per {change.per}" if change.per else "")]
    if tasks:
        lines.append("Top tasks:")
        lines += [f"• {t['task_id']} — {t['attempts']} attempts, {t['failures']} failed, outcome "
                  f"{t['outcome'] or 'open'}: {t['url']}" for t in tasks]
    lines.append(f"Alerts: {alerts_url}")
    return "\n".join(lines)


def build_payload(change: Change, *, top_tasks: list[TaskCost], dashboard_url: str) -> dict[str, Any]:
    """The JSON body posted for ``change`` (see the module doc and the README's example)."""
    line = summary(change)
    tasks = [_task(t, dashboard_url) for t in top_tasks]
    alerts_url = f"{dashboard_url.rstrip('/')}/alerts?{urlencode({'project': change.project})}"
    return {
        "version": PAYLOAD_VERSION,
        "dedup_key": change.dedup_key,
        "status": change.status,
        "reason": change.reason,
        "summary": line,
        "text": _text(change, line, tasks, alerts_url),
        "project": change.project,
        "rule": {"id": change.rule_id, "name": change.rule_name, "metric": change.metric, "op": change.op,
                 "threshold": change.threshold, "window_minutes": change.window_minutes, "per": change.per,
                 "where": change.where},
        "slice": {"dimension": change.per, "value": change.slice_value} if change.per else None,
        "metric": change.metric,
        "value": change.value,
        "threshold": change.threshold,
        "window": {"minutes": change.window_minutes,
                   "start": (change.at - timedelta(minutes=change.window_minutes)).isoformat(),
                   "end": change.at.isoformat()},
        "fired_at": change.started_at.isoformat(),
        "resolved_at": change.at.isoformat() if change.status == "resolved" else None,
        "top_tasks": tasks,
        "dashboard_url": alerts_url,
        # the flat fields of the first payload, kept for receivers written against them
        "rule_id": change.rule_id, "rule_name": change.rule_name, "slice_value": change.slice_value,
        "at": change.at.isoformat(), "message": line,
    }
