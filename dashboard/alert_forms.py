"""The alerts page's forms: add a rule, change or delete one.

Each form builds an :class:`~retrylens.analytics.alerts.AlertRule` (whose own checks name a
bad metric or operator) and hands it to the data source, which stores it directly or sends
it to the API (``POST``/``PUT``/``DELETE /v1/projects/{project}/alerts/rules``). A message
for the next run is left in the session, then the page reruns so its tables show the change.
"""

from __future__ import annotations

import re

import streamlit as st

from retrylens.analytics import alerts as alerting
from retrylens.analytics.filters import Slice

from .source import DataSource
from .text import plain

FLASH = "alerts_flash"
OPS = (">", ">=", "<", "<=")
PER = ("", "agent", "phase", "error_type", "policy_version")
_WEBHOOK = re.compile(r"^(https?://\S+)?$")


def flash() -> None:
    """Show the message the last form left, once."""
    message = st.session_state.pop(FLASH, None)
    if message:
        st.success(message)


def add_rule_form(source: DataSource, project: str | None) -> None:
    """A form that creates a rule on ``project`` (the picked one; all projects on a direct store)."""
    with st.form("alert_add", clear_on_submit=False):
        st.markdown(f"**Add a rule** on {f'project {plain(project)}' if project else 'every project'}")
        left, middle, right = st.columns(3)
        name = left.text_input("Name", key="alert_add_name")
        metric = middle.selectbox("Metric", alerting.RULE_METRICS, key="alert_add_metric",
                                  index=alerting.RULE_METRICS.index("retry_rate"))
        op = right.selectbox("Condition", OPS, key="alert_add_op")
        threshold = left.number_input("Threshold", value=0.3, format="%g", key="alert_add_threshold")
        window = middle.number_input("Window (minutes)", min_value=1, max_value=525_600, value=15, step=5,
                                     key="alert_add_window")
        per = right.selectbox("Per", PER, format_func=lambda p: p or "(the slice as a whole)", key="alert_add_per")
        agent = left.text_input("Only agent (optional)", key="alert_add_agent")
        min_calls = middle.number_input("Ignore windows with fewer calls than", min_value=0, value=0,
                                        key="alert_add_min_calls")
        webhook = right.text_input("Webhook URL (optional)", key="alert_add_webhook",
                                   help="Firings and resolutions are POSTed here as JSON.")
        if not st.form_submit_button("Add rule"):
            return
    if not project and not source.cross_project:
        st.error("Pick a project first: through the API a rule belongs to one project.")
        return
    if not name.strip():
        st.error("Give the rule a name.")
        return
    rule = _build(name=name.strip(), metric=metric, op=op, threshold=threshold, window_minutes=int(window),
                  per=per, min_calls=int(min_calls), webhook_url=webhook.strip(),
                  where=Slice(project=project, agent=agent.strip() or None))
    if rule is not None and _saved(lambda: source.add_alert_rule(rule)):
        _done(f"Rule '{plain(rule.name)}' added ({rule.metric} {plain(rule.op)} {rule.threshold:g}"
              f" over {rule.window_minutes} min).")


def change_rule_form(source: DataSource, rules: list[alerting.AlertRule]) -> None:
    """Pick a rule; change its condition, window, webhook or switch; or delete it."""
    if not rules:
        return
    by_id = {r.rule_id: r for r in rules}
    picked = st.selectbox("Change or delete a rule", list(by_id), key="alert_edit_pick",
                          format_func=lambda rule_id: f"{by_id[rule_id].name} ({rule_id})")
    rule = by_id[picked]
    with st.form(f"alert_edit_{rule.rule_id}"):
        left, middle, right = st.columns(3)
        op = left.selectbox("Condition", OPS, index=OPS.index(rule.op), key=f"alert_edit_op_{rule.rule_id}")
        threshold = middle.number_input("Threshold", value=float(rule.threshold), format="%g",
                                        key=f"alert_edit_threshold_{rule.rule_id}")
        window = right.number_input("Window (minutes)", min_value=1, max_value=525_600,
                                    value=int(rule.window_minutes), key=f"alert_edit_window_{rule.rule_id}")
        webhook = left.text_input("Webhook URL", value=rule.webhook_url, key=f"alert_edit_webhook_{rule.rule_id}")
        enabled = middle.checkbox("Enabled", value=rule.enabled, key=f"alert_edit_enabled_{rule.rule_id}")
        save = st.form_submit_button("Save changes")
        delete = st.form_submit_button("Delete rule", type="secondary")
    if delete:
        if _saved(lambda: source.delete_alert_rule(rule)):
            _done(f"Rule '{plain(rule.name)}' deleted.")
    elif save:
        changed = _build(**{**_fields(rule), "op": op, "threshold": threshold, "window_minutes": int(window),
                            "webhook_url": webhook.strip(), "enabled": enabled})
        if changed is not None and _saved(lambda: source.update_alert_rule(changed)):
            _done(f"Rule '{plain(rule.name)}' saved.")


def _fields(rule: alerting.AlertRule) -> dict[str, object]:
    per = "agent" if rule.per == "agent_name" else rule.per
    return {"name": rule.name, "metric": rule.metric, "op": rule.op, "threshold": rule.threshold,
            "window_minutes": rule.window_minutes, "per": per, "min_calls": rule.min_calls,
            "webhook_url": rule.webhook_url, "enabled": rule.enabled, "where": rule.where, "rule_id": rule.rule_id}


def _build(**fields: object) -> alerting.AlertRule | None:
    if not _WEBHOOK.match(str(fields.get("webhook_url", ""))):
        st.error("The webhook URL must start with http:// or https://.")
        return None
    try:
        return alerting.AlertRule(**fields)  # type: ignore[arg-type]
    except ValueError as exc:
        st.error(plain(exc))
        return None


def _saved(action: object) -> bool:
    try:
        action()  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - the store's or the API's refusal, shown to the operator
        st.error(f"Could not save: {plain(exc)}")
        return False
    return True


def _done(message: str) -> None:
    st.session_state[FLASH] = message
    st.rerun()

