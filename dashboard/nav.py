"""The dashboard's pages and navigation.

Pages are functions registered with ``st.navigation`` under stable URL paths (``/task``,
``/groups`` …, named in :mod:`.routes`), so a page can be linked to with query parameters,
e.g. ``/task?project=shop&task_id=t-42``. Streamlit serves its default page at ``/`` only
(its own path would answer "Page not found"), so every named page is an ordinary page and
the default is a hidden one at ``/`` that shows the first screen, or the page ``?view=<page>``
names (deep links and tests).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from . import page_alerts, page_groups, page_model, page_overview, page_reports, page_task
from .routes import (
    PAGE_ALERTS,
    PAGE_GROUPS,
    PAGE_MODEL,
    PAGE_OVERVIEW,
    PAGE_REPORTS,
    PAGE_TASK,
    TITLES,
    home,
    page,
    register,
)

#: The tab's icon, served by the dashboard itself: Streamlit fetches a ``:material/…:`` or emoji
#: page icon from a public CDN (fonts.gstatic.com), which fails offline and leaks the visit.
FAVICON = Path(__file__).resolve().parent / "static" / "favicon.png"

register(PAGE_OVERVIEW, page_overview.render)
register(PAGE_TASK, page_task.render)
register(PAGE_GROUPS, page_groups.render)
register(PAGE_MODEL, page_model.render)
register(PAGE_REPORTS, page_reports.render)
register(PAGE_ALERTS, page_alerts.render)


def main() -> None:
    st.set_page_config(page_title="RetryLens", page_icon=str(FAVICON), layout="wide")
    wanted = st.query_params.get("view", PAGE_OVERVIEW)
    wanted = wanted if wanted in TITLES else PAGE_OVERVIEW
    navigation = st.navigation([home(wanted), *(page(name) for name in TITLES)])
    st.sidebar.caption("RetryLens · operator dashboard")
    navigation.run()
