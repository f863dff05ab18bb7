"""Failure groups (one per normalised error message) with trends and example tasks, and the
input-fingerprint lookup; each group and input shows its class: transient or permanent,
caused by a dependency or by the input (:mod:`retrylens.analytics.failure_classes`).

"All projects" (the first choice where there are several) lists every project's groups in one
table, each row naming its project; input fingerprints are looked up in one project."""

from __future__ import annotations

import streamlit as st

from retrylens.analytics.failure_groups import FailureGroup

from . import charts
from .filters import ALL_PROJECTS, options, project_choices
from .source import DataSource
from .text import plain
from .widgets import paginated, pct, table, task_link

_LINK = st.column_config.LinkColumn("open", display_text="task view ↗")
ANY_TYPE = "(all types)"


def render(source: DataSource) -> None:
    st.title("Failure groups")
    projects = options(source).get("project", [])
    if not projects:
        st.info("No projects have stored events yet, so there are no failure groups.")
        return
    cols = st.columns([2, 2, 2])  # the checkbox label was cut to "Include rate-limit / …" at 1280 px
    picked = cols[0].selectbox("Project", project_choices(source, projects), key="groups_project")
    project = None if picked == ALL_PROJECTS else picked
    error_type = cols[1].text_input("Error type (optional)", key="groups_error_type").strip() or None
    include_noise = cols[2].checkbox("Include rate-limit / quota noise", key="groups_noise")
    groups_tab, fingerprints_tab = st.tabs(["Groups", "Input fingerprints"])
    with groups_tab:
        _groups(source, project, include_noise, error_type)
    with fingerprints_tab:
        _fingerprints(source, project)


def _groups(source: DataSource, project: str | None, include_noise: bool, error_type: str | None) -> None:
    def fetch(limit: int, offset: int) -> list[FailureGroup]:
        return source.failure_groups(project, include_noise=include_noise, error_type=error_type,
                                     limit=limit, offset=offset)

    try:
        groups, _ = paginated(f"groups_{project or 'all'}", fetch,
                              empty="No failure groups for this project." if project else "No failure groups.")
    except Exception as exc:  # noqa: BLE001
        st.error(f"Could not read failure groups: {plain(exc)}")
        return
    if not groups:
        return
    rows = [{**({} if project else {"project": g.project}), "pattern": g.pattern, "error_type": g.error_type, "failures": g.failures, "tasks": g.tasks,
             "trend": g.trend, "last 24 h": g.recent_failures, "persistence": g.persistence,
             "cause": g.cause, "noise": g.is_noise,
             "first_seen": g.first_seen, "last_seen": g.last_seen, "group": g.group_id} for g in groups]
    picked = table(rows, key="groups_table", selectable=True)
    st.plotly_chart(charts.group_trends({g.pattern: g.daily for g in groups[:8]}), key="chart_groups")
    group = groups[picked if picked is not None else 0]
    st.subheader(f"{plain(group.error_type)}: {plain(group.pattern)}")
    st.caption(f"group {plain(group.group_id)} · {group.persistence}, caused by the {group.cause}"
               f" · example message: {plain(group.example_message)}")
    table([{"task_id": t, "open": task_link(group.project, t)} for t in group.example_tasks],
          key="group_examples", column_config={"open": _LINK})


def _fingerprints(source: DataSource, project: str | None) -> None:
    if project is None:
        st.info("Pick one project above: an input fingerprint is looked up within its project.")
        return
    text = st.text_input("Input fingerprint", key="fp_query", placeholder="hash of the normalised task input")
    if text.strip():
        try:
            stats = source.fingerprint(project, text.strip())
        except Exception as exc:  # noqa: BLE001
            st.error(f"Lookup failed: {plain(exc)}")
            return
        if not stats.attempts:
            st.info(f"Fingerprint {plain(text.strip())} has no recorded attempts in {plain(project)}.")
        else:
            cols = st.columns(5)
            cols[0].metric("Attempts", stats.attempts)
            cols[1].metric("Failed attempts", stats.failures)
            cols[2].metric("Failure rate", pct(stats.failure_rate))
            cols[3].metric("Tasks failed", f"{stats.tasks_failed} / {stats.tasks}")
            cols[4].metric("Known bad", "yes" if stats.known_bad() else "no")
            st.caption(f"{stats.persistence}, caused by the {stats.cause} · failed on"
                       f" {stats.failed_dependencies} dependencies · first seen {stats.first_seen}"
                       f" · last seen {stats.last_seen} · recent error types: "
                       f"{plain(', '.join(stats.recent_error_types)) or '—'}")
    st.markdown("**Most-failing inputs**")
    try:
        top = source.top_fingerprints(project, limit=50)
    except Exception as exc:  # noqa: BLE001
        st.error(f"Could not read fingerprints: {plain(exc)}")
        return
    if not top:
        st.info("No failing input fingerprints recorded for this project.")
        return
    table([{"fingerprint": s.fingerprint, "failures": s.failures, "attempts": s.attempts,
            "failure_rate": pct(s.failure_rate), "persistence": s.persistence, "cause": s.cause,
            "tasks_failed": s.tasks_failed, "tasks": s.tasks,
            "recent_error_types": ", ".join(s.recent_error_types), "last_seen": s.last_seen} for s in top],
          key="fp_table")
