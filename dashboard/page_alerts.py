"""Alerts: the rules, what is firing now, what resolved, and every notification sent."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import streamlit as st

from .filters import project_picker
from .source import DataSource
from .widgets import table

_STATE_COLUMNS = ("rule", "slice_value", "status", "value", "threshold", "started_at", "updated_at")


def render(source: DataSource) -> None:
    st.title("Alerts")
    project = project_picker(source, key="alerts_project", where=st)
    try:
        rules = source.alert_rules(project)
        states = source.alert_states(project)
        history = source.alert_history(project, limit=200)
    except Exception as exc:  # noqa: BLE001
        st.error(f"Could not read alerts: {exc}")
        return
    names = {r.rule_id: r.name for r in rules}
    firing = [_state(s, names) for s in states if s.get("status") == "firing"]
    resolved = [_state(s, names) for s in states if s.get("status") == "resolved"]
    cols = st.columns(3)
    cols[0].metric("Rules", len(rules))
    cols[1].metric("Firing", len(firing))
    cols[2].metric("Resolved", len(resolved))
    st.subheader("Firing")
    if firing:
        table(firing, key="alerts_firing")
    else:
        st.success("Nothing is firing.")
    st.subheader("Rules")
    if rules:
        table([_rule(r) for r in rules], key="alerts_rules")
    else:
        st.info("No alert rules. Add one with `retrylens alerts add …`.")
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


def _state(state: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    row = {**state, "rule": names.get(state.get("rule_id", ""), state.get("rule_id"))}
    return {k: row.get(k) for k in _STATE_COLUMNS}


def _rule(rule: Any) -> dict[str, Any]:
    data = asdict(rule)
    where = {k: v for k, v in data.pop("where", {}).items() if v is not None}
    return {"name": data["name"], "condition": f"{data['metric']} {data['op']} {data['threshold']:g}",
            "window_min": data["window_minutes"], "per": data["per"] or "—", "slice": str(where or "all"),
            "min_calls": data["min_calls"], "enabled": data["enabled"], "webhook": bool(data["webhook_url"]),
            "rule_id": data["rule_id"]}
