"""The reports page embeds its HTML report without Streamlit's ``components.v1.html``
(deprecated, removed after 2026-06-01; Streamlit logs the deprecation on every run)."""

from __future__ import annotations

import logging

import pytest
from dashboard_runs import run_page

pytestmark = pytest.mark.clickhouse


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_reports_page_embeds_the_html_report_without_a_deprecated_streamlit_call(seeded, seeded_source) -> None:
    records = _Records()
    logger = logging.getLogger("streamlit.deprecation_util")
    logger.addHandler(records)
    try:
        app = run_page("reports")
    finally:
        logger.removeHandler(records)
    assert not app.exception and not app.error
    assert [m for m in records.messages if "will be removed" in m or "deprecat" in m.lower()] == []
    embedded = [str(e.proto) for e in _walk(app.main) if "srcdoc" in str(getattr(e, "proto", ""))]
    assert any("policy report" in html.lower() for html in embedded)  # the HTML is still shown


def _walk(node):
    """Every element under ``node``, inside expanders and columns too."""
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _walk(child)
