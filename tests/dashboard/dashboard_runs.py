"""AppTest runs of the dashboard's pages, for every dashboard test module.

A helper module of its own, not ``conftest``: every test folder has a ``conftest.py`` and
pytest imports them all under that one name, so ``from conftest import`` finds whichever
was loaded last (tests/foundation/test_test_helpers.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from retrylens.dashboard import source as sources

APP = Path(sources.__file__).resolve().parent / "app.py"


def run_page(view: str, **query: str) -> AppTest:
    """One run of the dashboard's entry script opened on ``view`` with URL query ``query``."""
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.query_params.update({"view": view, **query})
    return app.run()


def shown(markdown: str) -> str:
    """The text a Markdown string of a page shows: the backslash escapes and invisible word joiners
    that keep stored words from being read as Markdown (:func:`retrylens.dashboard.text.plain`) undone."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown).replace("\u2060", "")
