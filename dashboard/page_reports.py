"""Shadow and policy reports: what candidate retry policies would have done, read from the
reports ``retrylens report policies --out DIR`` writes (JSON beside a self-contained HTML)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from .filters import project_picker
from .source import DataSource, Report
from .widgets import table


def render(source: DataSource) -> None:
    st.title("Shadow & policy reports")
    project = project_picker(source, key="reports_project", where=st) if not source.cross_project else None
    try:
        reports = source.reports(project)
    except Exception as exc:  # noqa: BLE001
        st.error(f"Could not read reports: {exc}")
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
    recommendation = data.get("recommendation")
    if recommendation:
        text = recommendation if isinstance(recommendation, str) else (
            recommendation.get("summary") or recommendation.get("text") or str(recommendation))
        st.success(f"Recommendation: {text}")
    for key, value in data.items():
        if key == "recommendation":
            continue
        _section(key, value)
    if report.html_path is not None:
        with st.expander("Full HTML report"):
            html = report.html_path.read_text(errors="replace")
            st.download_button("Download HTML", html, file_name=report.html_path.name, mime="text/html",
                               key="report_download")
            st.iframe(report.html_path, height=800)


def _section(key: str, value: Any) -> None:
    title = key.replace("_", " ").capitalize()
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        st.subheader(title)
        table([{k: v if isinstance(v, str | int | float | bool) or v is None else str(v) for k, v in row.items()}
               for row in value])
    elif isinstance(value, dict):
        with st.expander(title):
            st.json(value)
    else:
        st.markdown(f"**{title}:** {value}")
