"""First screen: are retries helping or hurting, right now?

The alerts firing now (so an on-call engineer sees them without opening the alerts page),
headline rates, the retry trend, failure types, the cost of retries and the list of
human hand-offs, for the slice chosen in the sidebar. The body is a fragment that reruns
every few seconds while events arrive; everything it shows is read from the rollups
except the paginated hand-off list (a bounded raw read) and, on demand, the per-task costs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import streamlit as st

from retrylens.analytics.filters import Slice
from retrylens.sdk.core.budget import stopping_budget

from . import charts, filters
from .routes import PAGE_ALERTS, PAGE_TASK, page
from .source import DataSource
from .text import plain
from .widgets import count, ms, paginated, pct, table, task_link, usd

_LINK = st.column_config.LinkColumn("open", display_text="task view ↗")
#: The time to the second, without the "+00:00" that took the reason's room.
_TS = st.column_config.DatetimeColumn("ts (UTC)", format="YYYY-MM-DD HH:mm:ss")


def reason_column(reasons: list[str]) -> Any:
    """The reason is the sentence an operator reads: a column as wide as the longest one (the
    default width cut it after three words); the table scrolls sideways instead."""
    longest = max((len(r) for r in reasons), default=0)
    return st.column_config.TextColumn("reason", width=min(900, max(160, 8 * longest + 24)))


def render(source: DataSource) -> None:
    st.title("Retry health")
    chosen = filters.sidebar(source)
    st.fragment(run_every=chosen.refresh_s)(_body)(source, chosen)


def _body(source: DataSource, chosen: filters.Filters) -> None:
    now = datetime.now(UTC)
    where = chosen.slice(now)
    if where.project is None and not source.cross_project:
        st.info("Choose a project in the sidebar: the API reads one project at a time.")
        return
    refresh = f"refreshes every {chosen.refresh_s} s" if chosen.refresh_s else "auto-refresh off"
    st.caption(f"{plain(chosen.describe())} · updated {now:%H:%M:%S} UTC · {refresh} · source: {source.label}")
    try:
        summary = source.summary(where)
        bucket = chosen.trend_bucket()
        trend = source.trend(where, bucket)
        shares = source.failure_types(where)
    except Exception as exc:  # noqa: BLE001 - the page says what failed instead of a traceback
        st.error(f"Could not read metrics from the {source.label}: {plain(exc)}")
        return
    firing_alerts(source, where.project)
    if summary.calls == 0:
        st.info("No retry events in this slice yet. Events appear here as agents emit them "
                "(try `retrylens demo` to load a simulated fleet).")
    _headline(summary)
    left, right = st.columns([3, 2])
    left.plotly_chart(charts.retry_trend(trend, timedelta(seconds=bucket.seconds)), key="chart_trend")
    right.plotly_chart(charts.failure_types(shares), key="chart_failure_types")
    st.subheader("Human hand-offs")
    _handoffs(source, where)
    st.subheader("Cost of retries")
    st.plotly_chart(charts.retry_cost(trend, timedelta(seconds=bucket.seconds)), key="chart_cost")
    # Per-task costs are an exact raw aggregation: read on demand, not on every refresh.
    if st.toggle("Show the retried tasks that cost most", key="show_costs"):
        _costly_tasks(source, where)


def firing_alerts(source: DataSource, project: str | None) -> None:
    """One line per firing alert of ``project`` (all projects: ``None``) above the tiles, with a link
    to the alerts page; nothing when none fires (the tiles keep the first screen)."""
    try:
        names = {r.rule_id: r.name for r in source.alert_rules(project)}
        firing = [s for s in source.alert_states(project) if s.get("status") == "firing"]
    except Exception as exc:  # noqa: BLE001 - the figures below still show
        st.warning(f"Could not read alerts: {plain(exc)}")
        return
    if not firing:
        return
    lines = [firing_line(names.get(s.get("rule_id", ""), s.get("rule_id")), s) for s in firing]
    st.warning(f"**{len(firing)} alert{'s' if len(firing) > 1 else ''} firing** · "
               + " · ".join(plain(line) for line in lines), icon=":material/notifications_active:")
    st.page_link(page(PAGE_ALERTS), label="Open the alerts: the tasks behind each firing",
                 icon=":material/arrow_forward:")


def firing_line(rule: Any, state: dict[str, Any]) -> str:
    """``retry rate above 10% [agent-a]: 0.31 (threshold 0.1) since 2026-12-07 02:40 UTC``."""
    where = f" [{state['slice_value']}]" if state.get("slice_value") else ""
    value, threshold = state.get("value"), state.get("threshold")
    figures = f": {value:.4g}" if isinstance(value, int | float) else ""
    figures += f" (threshold {threshold:g})" if isinstance(threshold, int | float) else ""
    since = str(state.get("started_at") or "")[:16].replace("T", " ")
    return f"{rule}{where}{figures}" + (f" since {since} UTC" if since else "")


def _headline(m: Any) -> None:
    """Twelve tiles, four to a row: at 1280 px six to a row cut labels such as "Cost of failed a…"."""
    rows = (
        (("Retry rate", pct(m.retry_rate), "retries / calls (attempts ≥ 2 of all attempts)"),
         ("Retry success rate", pct(m.retry_success_rate), "retries that succeeded / retries"),
         ("Task recovery rate", pct(m.recovery_rate), "tasks that succeeded on a retry / tasks retried"),
         ("Hand-off rate", pct(m.handoff_rate), "attempts handed to a human / failed attempts")),
        (("Calls", count(m.calls), None), ("Retries", count(m.retries), None),
         ("Failed attempts", count(m.failures), None), ("Hand-offs", count(m.handoffs), None)),
        (("Degradation rate", pct(m.degradation_rate), "degrade decisions / failed attempts"),
         ("p95 retry duration", ms(m.p95_retry_duration_ms), f"mean {ms(m.mean_retry_duration_ms)}"),
         ("Cost of retries", usd(m.retry_cost_usd), "USD spent on retry attempts"),
         ("Cost of failed attempts", usd(m.failed_cost_usd),
          f"per retried task: {usd(m.retry_cost_per_retried_task_usd)}; budget exhaustions: {m.budget_exhaustions}")),
    )
    for row in rows:
        for col, (label, value, help_text) in zip(st.columns(len(row)), row, strict=True):
            col.metric(label, value, help=help_text)


def _handoffs(source: DataSource, where: Slice) -> None:
    rows, _ = paginated("handoffs", lambda limit, offset: source.handoffs(where, limit=limit, offset=offset),
                        empty="No hand-offs in this slice.")
    if not rows:
        return
    shown = handoff_rows(merge_handoffs(rows))
    config = {"open": _LINK, "ts": _TS, "reason": reason_column([r["reason"] or "" for r in shown])}
    picked = table(shown, key="handoff_table", column_config=config, selectable=True)
    if picked is not None:
        _open_task(shown[picked]["project"], shown[picked]["task_id"])


def handoff_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hand-off list's rows; ``stopped_by`` names the budget the reason says ran out."""
    return [{"ts": r["ts"], "project": r["project"], "task_id": r["task_id"], "reason": r["reason"],
             "stopped_by": stopping_budget(r["reason"] or "") or "", "agent": r["agent"],
             "phase": r["phase"], "error_type": r["error_type"],
             "policy_version": r["policy_version"], "open": task_link(r["project"], r["task_id"])}
            for r in rows]


def merge_handoffs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per hand-off: the ``handoff`` event and the attempt's ``handoff_human`` decision
    arrive as two rows (task and attempt correlation ids); keep the one that names the error."""
    merged: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["project"], row["task_id"], row["reason"])
        if key not in merged or (row.get("error_type") and not merged[key].get("error_type")):
            merged[key] = row
    return sorted(merged.values(), key=lambda r: (r["ts"], r["task_id"]), reverse=True)


def _costly_tasks(source: DataSource, where: Slice) -> None:
    st.caption("Retried tasks, most expensive retries first")
    rows, _ = paginated("costs", lambda limit, offset: source.task_costs(where, limit=limit, offset=offset),
                        empty="No retried tasks in this slice.")
    if rows:
        shown = [{"project": c.project, "task_id": c.task_id, "attempts": c.attempts, "failures": c.failures,
                  "retry_cost_usd": round(c.retry_cost_usd, 6), "failed_cost_usd": round(c.failed_cost_usd, 6),
                  "cost_usd": round(c.cost_usd, 6), "retry_tokens": c.retry_tokens, "outcome": c.outcome,
                  "open": task_link(c.project, c.task_id)} for c in rows]
        table(shown, key="cost_table", column_config={"open": _LINK})


def _open_task(project: str, task_id: str) -> None:
    st.session_state["task_pick"] = {"project": project, "task_id": task_id}
    st.switch_page(page(PAGE_TASK), query_params={"project": project, "task_id": task_id})
