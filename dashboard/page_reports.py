"""Shadow and policy reports: what candidate retry policies would have done, read from the
reports ``retrylens report policies --out DIR`` writes (JSON beside a self-contained HTML)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from . import charts
from . import report_view as view
from .filters import project_picker
from .source import DataSource, Report
from .text import plain
from .widgets import table


def render(source: DataSource) -> None:
    st.title("Shadow & policy reports")
    project = project_picker(source, key="reports_project", where=st) if not source.cross_project else None
    try:
        reports = source.reports(project)
    except Exception as exc:  # noqa: BLE001
        st.error(f"Could not read reports: {plain(exc)}")
        return
    if not reports:
        st.info("No reports yet. Run `retrylens report policies --candidates FILE… --out DIR` with DIR under "
                "the data directory's `reports/` folder (or set RETRYLENS_DASHBOARD_REPORTS_DIR); "
                "each report appears here.")
        return
    names = [r.name for r in reports]
    chosen = st.selectbox("Report", range(len(reports)), key="report_pick",
                          format_func=lambda i: f"{names[i]} ({reports[i].modified:%Y-%m-%d %H:%M})")
    _report(reports[chosen])


def _report(report: Report) -> None:
    data = report.data
    if view.is_policy_report(data):
        _policy_report(data)
    elif view.is_shadow_comparison(data):
        _shadow(data)
    else:
        st.subheader("Report fields")
        table(view.scalar_rows(data))
    if report.html_path is not None:
        with st.expander("Full HTML report"):
            html = report.html_path.read_text(errors="replace")
            st.download_button("Download HTML", html, file_name=report.html_path.name, mime="text/html",
                               key="report_download")
            st.iframe(report.html_path, height=800)


def _policy_report(data: dict[str, Any]) -> None:
    decision = data["recommendation"].get("decision")
    shown = st.success if decision == "adopt_candidate" else st.warning
    shown(f"Recommendation: {plain(view.headline(data))}")
    for warning in view.baseline_warnings(data):
        st.text(f"Warning: {warning}")
    margins = view.margins_text(data)
    if margins:
        st.caption(plain(margins))
    candidates = view.candidate_rows(data)
    if candidates:
        st.subheader("Candidates and what they change")
        table(candidates)
    if data.get("evidence") == "insufficient":
        st.info(f"Insufficient evidence: {plain(data.get('evidence_reason', ''))}. No estimates are shown.")
    estimates = view.estimate_rows(data)
    if estimates:
        st.subheader("Counterfactual replay: estimates with 95 % CIs")
        table(estimates)
        metrics = [m for m in data.get("metrics") or [] if view.interval_points(data, m)]
        if metrics:
            metric = st.selectbox("Chart", metrics, key="report_metric", format_func=lambda m: view.LABELS.get(m, m))
            st.plotly_chart(charts.policy_intervals(view.interval_points(data, metric), view.LABELS.get(metric, metric)),
                            key="report_chart")
    support = view.support_rows(data)
    if support:
        st.subheader("Not supported by the log")
        table(support)
    off = view.off_policy_rows(data)
    if off:
        st.subheader("Off-policy estimates (logged propensities)")
        table(off)
    _shadow(data.get("shadow"))
    history = view.history_rows(data)
    if history:
        st.subheader("History the report read")
        table(history)
    limitations = data.get("limitations") or []
    if limitations:
        with st.expander("What replay can and cannot know"):
            st.markdown("\n".join(f"- {plain(item)}" for item in limitations))


def _shadow(shadow: dict[str, Any] | None) -> None:
    st.subheader("Shadow comparison")
    sentence, matrix = view.shadow_rows(shadow)
    st.markdown(plain(sentence))
    if matrix:
        table(matrix)
