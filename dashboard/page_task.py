"""Task view: one task's attempts, what each was given, what was decided and why.

Reached from the hand-off and cost lists (``/task?project=…&task_id=…``) or by searching a
task id, a correlation id (one attempt) or a trace id.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from . import charts
from .filters import options
from .source import DataSource
from .story import Attempt, HandoffPackage, TaskStory, attempt_rows, build_story
from .text import plain
from .widgets import ms, table, usd

ANY_PROJECT = "(any project)"


def render(source: DataSource) -> None:
    st.title("Task view")
    target = _target(source)
    if target is None:
        return
    project, task_id = target
    try:
        rows = source.task_events(project, task_id)
    except Exception as exc:  # noqa: BLE001
        st.error(f"Could not read task {plain(task_id)}: {plain(exc)}")
        return
    if not rows:
        st.warning(f"No events for task {plain(task_id)} in project {plain(project)}.")
        return
    _story(build_story(project, task_id, rows))


def _target(source: DataSource) -> tuple[str, str] | None:
    """The task to show: from the URL, a pick on another page, or the search box."""
    params = st.query_params
    picked = st.session_state.pop("task_pick", None)
    if picked:
        st.session_state["task_q"] = picked["task_id"]
        st.session_state["task_project"] = picked["project"]
    elif "task_q" not in st.session_state and params.get("task_id"):
        st.session_state["task_q"] = params.get("task_id")
        st.session_state["task_project"] = params.get("project", ANY_PROJECT)
    known = options(source).get("project", [])
    linked = params.get("project")
    if linked and linked not in known and not source.cross_project:
        known = [*known, linked]  # the API lists only projects with keys; a linked one is still readable
    projects = [ANY_PROJECT, *known] if source.cross_project or not known else known
    if st.session_state.get("task_project") not in projects:
        st.session_state["task_project"] = ANY_PROJECT
    left, right = st.columns([3, 1])
    text = left.text_input("Task id, correlation id or trace id", key="task_q",
                           placeholder="e.g. sim-3-000031 or a 32-hex trace id").strip()
    project = right.selectbox("Project", projects, key="task_project")
    if not text:
        st.info("Search for a task, or open one from the hand-off list on the first screen.")
        return None
    try:
        matches = source.find_tasks(text, project=None if project == ANY_PROJECT else project)
    except Exception as exc:  # noqa: BLE001
        st.error(f"Search failed: {plain(exc)}")
        return None
    if not matches:
        st.warning(f"No task, attempt or trace matches {plain(repr(text))}.")
        return None
    if len(matches) > 1:
        labels = [f"{m['project']} / {m['task_id']} ({m['attempts']} attempts, last {m['last_ts']:%Y-%m-%d %H:%M})"
                  for m in matches]
        chosen = st.selectbox(f"{len(matches)} tasks match", range(len(matches)), format_func=labels.__getitem__,
                              key="task_match")
        match = matches[chosen]
    else:
        match = matches[0]
    return match["project"], match["task_id"]


#: A recovered task is shown apart from a clean success (the resilience4j outcome kinds).
OUTCOME_LABELS = {"successful_without_retry": "succeeded first try", "successful_with_retry": "recovered after retries"}
_OUTCOME_COLOURS = {"succeeded": "green", "failed": "red", "handed_off": "orange", "cancelled": "gray"}


def _story(story: TaskStory) -> None:
    st.subheader(f"{plain(story.project)} / {plain(story.task_id)}")
    # Names and outcomes are words, not figures: as metric tiles they were cut ("hande…").
    outcome = OUTCOME_LABELS.get(story.outcome_kind, story.outcome or "running")
    st.markdown(f"**Agent** {plain(story.agent) or '—'} · **Outcome** :{_OUTCOME_COLOURS.get(story.outcome, 'gray')}"
                f"-badge[{plain(outcome)}]" + (f" ({plain(story.outcome_kind)})" if story.outcome_kind else ""))
    cols = st.columns(4)
    cols[0].metric("Attempts", len(story.attempts))
    cols[1].metric("Cost", usd(story.cost_usd))
    cols[2].metric("Tokens", f"{story.tokens:,}")
    cols[3].metric("Hand-offs", len(story.handoffs))
    st.caption(f"trace {plain(story.trace_id) or '—'} · {story.events} events · {plain(story.summary)}")
    st.plotly_chart(charts.task_waterfall(story), key="chart_task_timeline")  # the story first, details below
    warnings = [(a, w) for a in story.attempts for w in a.warnings]
    for attempt, warning in warnings:
        st.warning(f"{attempt.label}: {plain(warning)}", icon=":material/warning:")
    for number, package in enumerate(story.handoff_packages, start=1):
        _handoff(number, package)
    table(attempt_rows(story), key="attempt_table")
    for attempt in story.attempts:
        _attempt(attempt)


def _handoff(number: int, package: HandoffPackage) -> None:
    st.info(f"Handed to a human: {plain(package.reason) or 'no reason recorded'}", icon=":material/support_agent:")
    with st.expander(f"Hand-off package {number}: what the person picking it up sees", expanded=True):
        st.markdown("**Input**")
        st.code(package.input or "—", language=None)
        st.markdown("**Failed output**")
        st.code(package.failed_output or "—", language=None)
        if package.error:
            st.markdown("**Last error**")
            st.json(package.error, expanded=True)
        if package.errors:
            st.markdown("**Errors of every attempt**")
            table(package.errors, key=f"handoff_errors_{number}")
        if package.context:
            st.markdown("**Last context messages**")
            table(package.context, key=f"handoff_context_{number}")
        for part, text in package.raw.items():
            st.markdown(f"**{plain(part)}** (cut to the stored size)")
            st.code(text, language=None)


def _attempt(a: Attempt) -> None:
    marks = " ⚠" if a.warnings else ""
    title = plain(f"{a.label} · {a.phase} · {a.status}{' · ' + a.error_type if a.error_type else ''}") + marks
    with st.expander(title, expanded=bool(a.warnings)):
        cols = st.columns(5)
        cols[0].metric("Latency", ms(a.latency_ms) if a.ended else "—")
        cols[1].metric("Backoff", ms(a.backoff_ms) if a.backoff_ms else "—")
        cols[2].metric("Context msgs", a.message_count)
        cols[3].metric("Context tokens", f"{a.token_count:,}")
        cols[4].metric("Pollution score", f"{a.pollution_score:.2f}")
        loops = st.columns(3)
        loops[0].metric("Trailing errors", a.trailing_errors)
        loops[1].metric("Error share, last msgs", f"{a.recent_error_share:.0%}")
        loops[2].metric("Repeated tool calls", a.repeated_tool_calls)
        if a.error_message:
            st.markdown(f"**Error** {plain(a.error_type)} {plain(a.error_code)}: {plain(a.error_message)}")
        if a.decision:
            shadow = f" (shadow policy would: {plain(a.shadow_decision)})" if a.shadow_decision else ""
            st.markdown(f"**Decision** {plain(a.decision)} — {plain(a.decision_reason) or 'no reason recorded'}{shadow}")
        st.caption(f"correlation id {plain(a.correlation_id)} · dependency {plain(a.dependency) or '—'}"
                   f" · policy {plain(a.policy) or '—'}")
        if a.side_effects:
            st.markdown("**Side effects**")
            table([{k: e.get(k) for k in ("ts", "tool", "idempotency_key", "status", "rollback")}
                   for e in a.side_effects])
        if a.digests:
            st.markdown("**Message digests** (what this attempt was given)")
            table(pd.DataFrame({"digest": a.digests,
                                "echo": ["⚠ same as previous" if i in a.echoed_digests else ""
                                         for i in range(len(a.digests))]}))
        if a.last_messages:
            st.markdown("**Last messages**")
            for index, message in enumerate(a.last_messages):
                flag = " ⚠ echoed" if index in a.echoed_messages else ""
                content = str(message.get("content", ""))
                st.text(f"[{message.get('role', '?')}]{flag} {content}")
