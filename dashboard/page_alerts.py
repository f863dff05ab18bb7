"""Alerts: the rules (added, changed and deleted here), what is firing and the tasks behind it,
what resolved, and every notification sent."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

import streamlit as st

from retrylens.analytics import alerts as alerting
from retrylens.analytics.filters import Slice

from .alert_forms import add_rule_form, change_rule_form, flash
from .filters import project_picker
from .source import DataSource
from .text import plain
from .widgets import table, task_link

_STATE_COLUMNS = ("rule", "slice_value", "status", "value", "threshold", "started_at", "updated_at")
_LINK = st.column_config.LinkColumn("open", display_text="task view ↗")
#: Tasks listed under each firing alert.
BEHIND = 20
#: The rule's slice field that a ``per`` dimension's value fills.
_PER_FIELD = {"agent_name": "agent", "phase": "phase", "error_type": "error_type",
              "policy_version": "policy_version", "project": "project"}


def render(source: DataSource) -> None:
    st.title("Alerts")
    project = project_picker(source, key="alerts_project", where=st)
    flash()
    try:
        rules = source.alert_rules(project)
        states = source.alert_states(project)
        history = source.alert_history(project, limit=200)
    except Exception as exc:  # noqa: BLE001
        st.error(f"Could not read alerts: {plain(exc)}")
        return
    by_id = {r.rule_id: r for r in rules}
    names = {r.rule_id: r.name for r in rules}
    firing = [s for s in states if s.get("status") == "firing"]
    resolved = [_state(s, names) for s in states if s.get("status") == "resolved"]
    cols = st.columns(3)
    cols[0].metric("Rules", len(rules))
    cols[1].metric("Firing", len(firing))
    cols[2].metric("Resolved", len(resolved))
    st.subheader("Firing")
    if firing:
        table([_state(s, names) for s in firing], key="alerts_firing")
        for state in firing:
            if state.get("rule_id") in by_id:
                _tasks_behind(source, by_id[state["rule_id"]], state, project)
    else:
        st.success("Nothing is firing.")
    st.subheader("Rules")
    if rules:
        table([_rule(r) for r in rules], key="alerts_rules")
    else:
        st.info("No alert rules yet. Add one below (or with `retrylens alerts add …`).")
    add_rule_form(source, project)
    change_rule_form(source, rules)
    st.subheader("Resolved")
    if resolved:
        table(resolved, key="alerts_resolved")
    else:
        st.caption("No resolved alerts.")
    st.subheader("Notifications")
    if history:
        table([{k: h.get(k) for k in ("ts", "rule_name", "slice_value", "status", "value", "threshold",
                                      "message", "delivered")} for h in history], key="alerts_log")
    else:
        st.caption("No notifications sent yet.")


def behind_slice(rule: alerting.AlertRule, state: dict[str, Any], project: str | None) -> Slice:
    """The slice and window the firing was computed on: the rule's slice, the slice value it fired
    for (``per``), the window that ended when it fired."""
    fired = _time(state.get("started_at")) or _time(state.get("updated_at"))
    changes: dict[str, Any] = {}
    if rule.per and state.get("slice_value"):
        changes[_PER_FIELD.get(rule.per, rule.per)] = state["slice_value"]
    if rule.where.project is None and project:
        changes.setdefault("project", project)
    if fired is not None:
        changes.update(start=fired - timedelta(minutes=rule.window_minutes), end=fired + timedelta(seconds=1))
    return rule.where.with_(**changes)


def _tasks_behind(source: DataSource, rule: alerting.AlertRule, state: dict[str, Any], project: str | None) -> None:
    value = state.get("slice_value")
    label = f"{rule.name} [{value}]" if value else rule.name
    with st.expander(f"Tasks behind '{plain(label)}'", expanded=True):
        where = behind_slice(rule, state, project)
        try:
            tasks = source.task_costs(where, limit=BEHIND, offset=0)
        except Exception as exc:  # noqa: BLE001
            st.error(f"Could not read the tasks: {plain(exc)}")
            return
        if not tasks:
            st.caption("No retried task in the alert's window.")
            return
        st.caption(f"Retried tasks in the window the rule fired on ({rule.window_minutes} min), most expensive first")
        table([{"project": t.project, "task_id": t.task_id, "attempts": t.attempts, "failures": t.failures,
                "outcome": t.outcome, "open": task_link(t.project, t.task_id)} for t in tasks],
              key=f"alerts_behind_{rule.rule_id}_{state.get('slice_value', '')}", column_config={"open": _LINK})


def _time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def _state(state: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    row = {**state, "rule": names.get(state.get("rule_id", ""), state.get("rule_id"))}
    return {k: row.get(k) for k in _STATE_COLUMNS}


def _slice_words(where: dict[str, Any]) -> str:
    """``project=shop, agent=triage`` (a list reads ``a|b``); ``all`` when the rule watches everything."""
    return ", ".join(f"{k}={'|'.join(map(str, v)) if isinstance(v, list | tuple) else v}"
                     for k, v in where.items()) or "all"


def _rule(rule: Any) -> dict[str, Any]:
    data = asdict(rule)
    where = {k: v for k, v in data.pop("where", {}).items() if v is not None}
    return {"name": data["name"], "condition": f"{data['metric']} {data['op']} {data['threshold']:g}",
            "window_min": data["window_minutes"], "per": data["per"] or "—", "slice": _slice_words(where),
            "min_calls": data["min_calls"], "enabled": data["enabled"], "webhook": bool(data["webhook_url"]),
            "rule_id": data["rule_id"]}
