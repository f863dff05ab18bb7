"""The dashboard's pages and navigation.

Pages are functions registered with ``st.navigation`` under stable URL paths (``/task``,
``/groups`` …), so a page can be linked to with query parameters, e.g.
``/task?project=shop&task_id=t-42``. ``?view=<page>`` on the root URL opens that page
first (deep links and tests).
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from . import page_alerts, page_groups, page_model, page_overview, page_reports, page_task
from .source import DataSource, current

PAGE_OVERVIEW = "overview"
PAGE_TASK = "task"
PAGE_GROUPS = "groups"
PAGE_MODEL = "model"
PAGE_REPORTS = "reports"
PAGE_ALERTS = "alerts"

#: url path → (title, icon, renderer)
PAGES: dict[str, tuple[str, str, Callable[[DataSource], None]]] = {
    PAGE_OVERVIEW: ("Retry health", ":material/monitoring:", page_overview.render),
    PAGE_TASK: ("Task view", ":material/timeline:", page_task.render),
    PAGE_GROUPS: ("Failure groups", ":material/bug_report:", page_groups.render),
    PAGE_MODEL: ("Risk model", ":material/model_training:", page_model.render),
    PAGE_REPORTS: ("Shadow & policy reports", ":material/science:", page_reports.render),
    PAGE_ALERTS: ("Alerts", ":material/notifications:", page_alerts.render),
}


def _runner(name: str) -> Callable[[], None]:
    def run() -> None:
        PAGES[name][2](current())

    run.__name__ = f"page_{name}"
    return run


def page(name: str, *, default: bool = False) -> st.Page:
    title, icon, _ = PAGES[name]
    return st.Page(_runner(name), title=title, icon=icon, url_path=name, default=default)


def main() -> None:
    st.set_page_config(page_title="RetryLens", page_icon=":material/replay:", layout="wide")
    wanted = st.query_params.get("view", PAGE_OVERVIEW)
    wanted = wanted if wanted in PAGES else PAGE_OVERVIEW
    navigation = st.navigation([page(name, default=name == wanted) for name in PAGES])
    st.sidebar.caption("RetryLens · read-only operator dashboard")
    navigation.run()
