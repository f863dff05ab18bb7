"""The dashboard's URL paths and how a page is opened by name.

Pages link to each other (the overview opens a task), and :mod:`.nav` imports every page
to register it: so names, titles and the ``st.Page`` builder live here, and each renderer
is registered by :mod:`.nav` at start-up. A page module imports this, never :mod:`.nav`.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from .source import DataSource, current

PAGE_OVERVIEW = "overview"
PAGE_TASK = "task"
PAGE_GROUPS = "groups"
PAGE_MODEL = "model"
PAGE_REPORTS = "reports"
PAGE_ALERTS = "alerts"

#: url path → (title, icon), in the order the sidebar shows them
TITLES: dict[str, tuple[str, str]] = {
    PAGE_OVERVIEW: ("Retry health", ":material/monitoring:"),
    PAGE_TASK: ("Task view", ":material/timeline:"),
    PAGE_GROUPS: ("Failure groups", ":material/bug_report:"),
    PAGE_MODEL: ("Risk model", ":material/model_training:"),
    PAGE_REPORTS: ("Shadow & policy reports", ":material/science:"),
    PAGE_ALERTS: ("Alerts", ":material/notifications:"),
}

_renderers: dict[str, Callable[[DataSource], None]] = {}


def register(name: str, render: Callable[[DataSource], None]) -> None:
    """Make ``render`` the page at ``/<name>`` (a name of :data:`TITLES`)."""
    if name not in TITLES:
        raise KeyError(f"unknown dashboard page {name!r}; known: {', '.join(TITLES)}")
    _renderers[name] = render


def _runner(name: str) -> Callable[[], None]:
    def run() -> None:
        _renderers[name](current())

    run.__name__ = f"page_{name}"
    return run


def page(name: str) -> st.Page:
    """The ``st.Page`` of a registered page at ``/<name>``: for ``st.navigation`` and ``st.switch_page``."""
    title, icon = TITLES[name]
    return st.Page(_runner(name), title=title, icon=icon, url_path=name)


def home(name: str) -> st.Page:
    """The root URL's page: page ``name`` shown at ``/``, hidden from the sidebar (where the
    page is listed under its own path)."""
    title, icon = TITLES[name]
    return st.Page(_runner(name), title=title, icon=icon, url_path="home", default=True, visibility="hidden")
