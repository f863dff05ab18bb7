"""Every page, on a store whose names, messages and reasons are hostile, shows them as text.

Streamlit reads titles, captions, alerts, expander, tab and widget labels and tooltips as
Markdown; each such string of every page is rendered here by a CommonMark renderer
(markdown-it, raw HTML on, as strict as a renderer can be) and must show no link, image,
HTML element, code span or emphasis made of stored data, and every hostile value's syntax as
the characters it has (``![zq1](`` stays those five characters). Plotly labels must carry
``<`` only as an entity. Chromium's own rendering is checked in
``test_dashboard_hostile_browser.py``; this is the fast walk of every page.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator

import pytest
from dashboard_runs import run_page
from hostile_seed import WITNESS
from markdown_it import MarkdownIt

from retrylens.dashboard.text import WORD_JOINER

pytestmark = pytest.mark.clickhouse

MARKER = re.compile(r"zq\d+")
#: Elements Markdown may produce from the pages' own wording; a stored value must make none.
ALLOWED_TAGS = {"p", "strong", "em", "code", "ul", "ol", "li", "br"}
_RENDER = MarkdownIt("commonmark", {"html": True}).enable(["strikethrough", "table"])


def markdown_strings(node) -> Iterator[tuple[str, str]]:
    """(where, string) of every string of the page that Streamlit renders as Markdown."""
    from streamlit.testing.v1 import element_tree as tree

    # PageLink is not in the element tree of every Streamlit the project allows (1.63 lacks it)
    kinds = tuple(getattr(tree, name) for name in ("Markdown", "HeadingBase", "AlertBase", "PageLink") if hasattr(tree, name))
    if isinstance(node, kinds):
        yield type(node).__name__, node.value
    for attribute in ("label", "help"):
        value = getattr(node, attribute, None) if not isinstance(node, tree.Block) or attribute == "label" else None
        if isinstance(value, str) and value:
            yield f"{type(node).__name__}.{attribute}", value
    for child in getattr(node, "children", {}).values():
        yield from markdown_strings(child)


def shown_as_text(where: str, markdown: str) -> list[str]:
    """What is wrong with how ``markdown`` shows its stored values (nothing: ``[]``)."""
    rendered = _RENDER.render(markdown)
    problems = [f"{where}: <{tag}> made of {markdown!r}" for tag in re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", rendered)
                if tag not in ALLOWED_TAGS]
    for tag in ("code", "em", "strong", "s", "del"):
        problems += [f"{where}: stored value inside <{tag}>: {inner!r}"
                     for inner in re.findall(rf"<{tag}>(.*?)</{tag}>", rendered, re.S) if MARKER.search(inner)]
    text = html.unescape(re.sub(r"<[^>]+>", "", rendered)).replace(WORD_JOINER, "")
    problems += [f"{where}: {WITNESS[m]!r} not shown as written in {text!r}"
                 for m in set(MARKER.findall(markdown)) if m in WITNESS and WITNESS[m] not in text]
    return problems


def chart_strings(app) -> Iterator[str]:
    def walk(value):
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    for chart in app.get("plotly_chart"):
        yield from walk(json.loads(chart.proto.spec))


def _runs(values: dict[str, str]):
    """One AppTest run per page and choice that shows stored words."""
    yield "overview (all projects)", run_page("overview", range="all")
    yield "overview (hostile project)", run_page("overview", range="all", project=values["project"])
    yield "task", run_page("task", project=values["project"], task_id=values["task_id"])
    groups = run_page("groups")
    yield "groups (all projects)", groups
    groups.selectbox(key="groups_project").select(values["project"]).run()
    yield "groups (hostile project)", groups
    yield "model", run_page("model")
    yield "reports", run_page("reports")
    yield "alerts", run_page("alerts")


def test_every_page_shows_stored_names_messages_and_reasons_as_text(hostile):
    problems: list[str] = []
    seen: set[str] = set()
    for page, app in _runs(hostile):
        assert not app.exception, (page, [e.value for e in app.exception])
        for where, markdown in markdown_strings(app._tree):
            seen.update(MARKER.findall(markdown))
            problems += [f"{page}: {p}" for p in shown_as_text(where, markdown)]
        problems += [f"{page}: chart label with raw '<': {s!r}" for s in chart_strings(app)
                     if MARKER.search(s) and "<" in s.replace("<extra>", "").replace("</extra>", "")]
    assert problems == []
    # The walk reached the stored words it is about: project, agent, task, phase, dependency,
    # message, code, reasons, summary, policy, rule, candidate, limitation.
    assert {"zq1", "zq2", "zq3", "zq4", "zq5", "zq6", "zq7", "zq8", "zq9", "zq10", "zq11", "zq12", "zq16",
            "zq17", "zq18", "zq19"} <= seen, sorted(seen)


@pytest.mark.parametrize("value", [
    "![x](http://h/p.png)", "[a](http://h) <script>x()</script>", "a`b` **c** _d_ ~~e~~", "# h\n    code\n- item",
    "<img src=x onerror=alert(1)>", "&lt;b&gt; &amp;", "\\![x](y)", "1. one", "<http://h/a>", "|a|b|\n|-|-|",
    "see http://h/a, www.h.com or a@h.com",
])
def test_plain_markdown_shows_exactly_the_characters_it_was_given(value):
    from retrylens.dashboard.text import plain

    rendered = _RENDER.render(plain(value))
    assert re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", rendered) == ["p"]
    text = html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()
    assert text.replace(WORD_JOINER, "") == re.sub(r"\s*\n\s*", " ", value)


def test_plain_markdown_breaks_every_autolink_of_github_flavoured_markdown():
    """GFM finds bare URLs and e-mail addresses in the text after escapes are read (Chromium
    linked ``http\\:\\/\\/host``): a word joiner sits where each would start."""
    from retrylens.dashboard.text import plain

    shown = plain("http://h/a https://h WWW.h.com a@h.com")
    assert re.search(r"https?\\:\\/\\/|www\\.|\w\\@", shown, re.IGNORECASE) is None
    assert shown.count(WORD_JOINER) == 4


def test_chart_labels_show_markup_as_text():
    from retrylens.dashboard.text import chart

    assert chart('<a href="http://h">x</a> & <br>') == '&lt;a href="http://h"&gt;x&lt;/a&gt; &amp; &lt;br&gt;'
