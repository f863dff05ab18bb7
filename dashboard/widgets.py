"""Small display helpers shared by the pages: number formats, paginated tables, task links."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

PAGE_SIZES = (25, 50, 100)
NO_VALUE = "—"


def pct(value: float | None, digits: int = 1) -> str:
    """``0.4906`` → ``49.1%``; ``None`` (a ratio with nothing to divide by) → ``—``."""
    return NO_VALUE if value is None else f"{value * 100:.{digits}f}%"


def usd(value: float | None) -> str:
    if value is None:
        return NO_VALUE
    return f"${value:,.4f}" if abs(value) < 1 else f"${value:,.2f}"


def ms(value: float | None) -> str:
    if value is None:
        return NO_VALUE
    return f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"


def count(value: int | None) -> str:
    return NO_VALUE if value is None else f"{value:,}"


def task_link(project: str, task_id: str) -> str:
    """Relative URL of the task view for one task (the task page reads these query params)."""
    return "task?" + urlencode({"project": project, "task_id": task_id})


def paginated(
    key: str,
    fetch: Callable[[int, int], Sequence[Any]],
    *,
    page_size: int = 25,
    empty: str = "Nothing to show.",
) -> tuple[list[Any], int]:
    """Rows of the current page (``fetch(limit, offset)``) and the page number.

    One row more than a page is fetched to know whether a next page exists, so no count
    query runs over a large table.
    """
    page = int(st.session_state.get(f"{key}_page", 1))
    rows = list(fetch(page_size + 1, (page - 1) * page_size))
    has_next = len(rows) > page_size
    rows = rows[:page_size]
    if not rows and page == 1:
        st.info(empty)
        return [], page
    left, middle, right = st.columns([1, 2, 1])
    if left.button("◀ Previous", key=f"{key}_prev", disabled=page <= 1):
        st.session_state[f"{key}_page"] = page - 1
        st.rerun()
    middle.caption(f"Page {page} · rows {(page - 1) * page_size + 1}–{(page - 1) * page_size + len(rows)}")
    if right.button("Next ▶", key=f"{key}_next", disabled=not has_next):
        st.session_state[f"{key}_page"] = page + 1
        st.rerun()
    return rows, page


def table(rows: Sequence[dict[str, Any]] | pd.DataFrame, *, key: str | None = None,
          column_config: dict[str, Any] | None = None, selectable: bool = False) -> Any:
    """A full-width dataframe; with ``selectable`` the single selected row index is returned."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if selectable:
        event = st.dataframe(frame, key=key, hide_index=True, width="stretch", column_config=column_config,
                             on_select="rerun", selection_mode="single-row")
        selected = event.selection.rows if event is not None else []
        return selected[0] if selected else None
    st.dataframe(frame, key=key, hide_index=True, width="stretch", column_config=column_config)
    return None
