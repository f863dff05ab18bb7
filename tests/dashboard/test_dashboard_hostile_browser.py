"""Hostile stored words in a real browser: `retrylens up` on a store whose project, agent, task,
phase, dependency, messages, reasons, policy, rule and report names are Markdown images and
links pointing at a local listener, ``<script>``, raw HTML and backticks (``hostile_seed``),
every page opened in headless Chromium (Debian's package via Playwright).

On every page: the listener receives no request (no image or link was made of the data), no
``<a href>`` leads off the dashboard, no stored script ran, the hostile text is on screen as
the characters it has, and the page asks nothing of any host but the dashboard's own (the tab
icon was fetched from fonts.gstatic.com). The task timeline is also looked at, at 1280 and
1600 px: no label runs past the plot or is turned on its side (screenshots in ``artifacts/``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from browser_support import CHROMIUM, CHROMIUM_FLAGS, free_port, wait_until_serving
from hostile_seed import WITNESS

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
SCRIPT_MARKS = "() => [window.zq4, window.zq6, window.zq8, window.zq18].filter(Boolean).length"
#: Whether the page's own text (tables apart: they never read Markdown) shows ``w`` as written.
SHOWN_AS_WRITTEN = """w => {
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    let text = '', node;
    while ((node = walker.nextNode())) {
        if (!node.parentElement.closest('[data-testid="stDataFrame"], script, style')) text += node.textContent;
    }
    return text.replaceAll('\\u2060', '').includes(w);
}"""
#: Every marker id (zq1, zq19: not zq1 inside zq19) is somewhere in the page's HTML.
ALL_DRAWN = """ids => ids.every(id => new RegExp(id + '(?!\\\\d)').test(document.body.innerHTML))"""
OFFSITE_LINKS = """() => [...document.querySelectorAll('a[href]')]
    .map(a => a.href).filter(h => new URL(h, location.href).host !== location.host)"""
#: Text of the timeline that runs past its plot, or is turned (plotly turned short labels 90°).
TIMELINE_FAULTS = """() => {
    const plot = document.querySelector('.js-plotly-plot');
    const area = plot.querySelector('.main-svg').getBoundingClientRect();
    return [...plot.querySelectorAll('.barlayer text, .textpoint text')]
        .filter(t => t.textContent.trim())
        .flatMap(t => {
            const box = t.getBoundingClientRect();
            const turned = /rotate\\((?!0[ ,)])/.test(t.getAttribute('transform') || '')
                || /rotate\\((?!0[ ,)])/.test(t.parentNode.getAttribute('transform') || '');
            const out = box.right > area.right + 0.5 || box.left < area.left - 0.5;
            return (turned || out) ? [`${t.textContent} turned=${turned} right=${box.right} edge=${area.right}`] : [];
        });
}"""


class _Listener(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
        _Listener.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.end_headers()

    def log_message(self, *_args) -> None:
        return


@pytest.fixture(scope="module")
def listener() -> Iterator[tuple[str, list[str]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Listener.hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def stack(listener, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """`retrylens up` on a hostile store; yields (dashboard url, the hostile values)."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: run `bash infra/browser.sh` (infra/test.sh does)")
    base, _ = listener
    tmp = tmp_path_factory.mktemp("hostile")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETRYLENS_", "KAFKA_"))}
    env.update({"RETRYLENS_DATA_DIR": str(tmp / "data"), "RETRYLENS_API_PORT": str(free_port())})
    seeded = subprocess.run([sys.executable, str(Path(__file__).parent / "hostile_seed.py"), str(tmp / "data"), base],
                            env=env, capture_output=True, text=True, timeout=300, check=True)
    values = json.loads(seeded.stdout.strip().splitlines()[-1])
    port = free_port()
    log = (tmp / "up.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "retrylens.cli.main", "up", "--port", str(port)], env=env,
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, process, tmp / "up.log", timeout_s=180)
        yield url, values
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1280, "height": 2000},
        )
        try:
            yield context
        finally:
            context.close()


def _pages(values: dict[str, str]) -> list[tuple[str, str, list[str]]]:
    """(name, path and query, markers that page must show as written)."""
    project, task = quote(values["project"], safe=""), quote(values["task_id"], safe="")
    return [
        ("overview", "/?range=all", ["zq16"]),
        ("overview-project", f"/overview?range=all&project={project}", ["zq1", "zq16"]),
        ("task", f"/task?project={project}&task_id={task}", ["zq1", "zq2", "zq3", "zq6", "zq9", "zq10"]),
        ("groups", "/groups", []),
        ("model", "/model", []),
        ("reports", "/reports", ["zq17", "zq19"]),
        ("alerts", "/alerts", ["zq16"]),
    ]


def test_every_page_shows_hostile_words_as_text_and_fetches_nothing_else(stack, browser, listener):
    from playwright.sync_api import expect

    url, values = stack
    _, hits = listener
    requested: list[str] = []
    problems: list[str] = []
    for name, path, markers in _pages(values):
        page = browser.new_page()
        page.on("request", lambda request: requested.append(request.url))
        try:
            page.goto(url + path, wait_until="domcontentloaded", timeout=90_000)
            expect(page.locator("h1").first).to_be_visible(timeout=90_000)
            if markers:  # the page has drawn every stored word it shows (in any form: a table, a caption,
                # an image's alt text); a loaded machine's Streamlit draws the page's end seconds after its start
                page.wait_for_function(ALL_DRAWN, arg=markers, timeout=90_000)
            page.wait_for_timeout(2000)  # images, iframes and scripts a page would load have had their chance
            problems += [f"{name}: {WITNESS[m]!r} not shown as written" for m in markers  # (closed expanders too)
                         if not page.evaluate(SHOWN_AS_WRITTEN, WITNESS[m])]
            if page.evaluate(SCRIPT_MARKS):
                problems.append(f"{name}: a stored <script> ran")
            problems += [f"{name}: link off the dashboard: {href}" for href in page.evaluate(OFFSITE_LINKS)]
        finally:
            page.close()
    assert problems == []
    assert hits == [], f"the listener was asked for {hits}: stored Markdown became an image or a link"
    foreign = sorted({u for u in requested if urlsplit(u).hostname not in ("127.0.0.1", "localhost")
                      and urlsplit(u).scheme in ("http", "https", "ws", "wss")})
    assert foreign == [], f"the dashboard fetched from other hosts: {foreign}"


@pytest.mark.parametrize("width", [1280, 1600])
def test_task_timeline_labels_fit_and_stay_level(stack, browser, width):
    from playwright.sync_api import expect

    url, values = stack
    project, task = quote(values["project"], safe=""), quote(values["task_id"], safe="")
    page = browser.new_page()
    try:
        page.set_viewport_size({"width": width, "height": 1400})
        page.goto(f"{url}/task?project={project}&task_id={task}", wait_until="domcontentloaded", timeout=90_000)
        chart = page.locator(".js-plotly-plot").first
        expect(chart).to_be_visible(timeout=90_000)
        expect(chart.locator(".barlayer text").first).to_be_visible(timeout=30_000)
        page.wait_for_timeout(1500)
        ARTIFACTS.mkdir(exist_ok=True)
        chart.screenshot(path=str(ARTIFACTS / f"timeline-{width}.png"))
        assert page.evaluate(TIMELINE_FAULTS) == []
        labels = chart.locator(".barlayer text").all_text_contents()
        assert any("after backoff 151 ms" in t for t in labels), labels  # too short a gap to name inside
    finally:
        page.close()
