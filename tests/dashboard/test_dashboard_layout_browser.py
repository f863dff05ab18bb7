"""The dashboard end to end in a real browser, as a new user meets it: `retrylens up` (API
server owning an embedded store + the dashboard) on a seeded fleet with a trained model,
opened in headless Chromium (Debian's package via Playwright). One seeded stack serves the
module (a seed and a `retrylens up` start cost ~25 s of CPU each time).

The first screen shows the figures the analytics layer computes from the seeded store (in
the seeding child process, before the server starts: chDB allows one process per data
directory); a screenshot is saved to ``artifacts/dashboard.png``. Every page answers at its
own URL (``/overview`` was Streamlit's "Page not found"), and at 1280 px no tile's value or
label is cut with an ellipsis: the test reads each rendered metric tile and compares the
text's full width with the width it is given.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import CHROMIUM, CHROMIUM_FLAGS, free_port, wait_until_serving

from retrylens.dashboard.routes import TITLES
from retrylens.dashboard.widgets import pct

pytestmark = pytest.mark.browser

WIDTH = 1280
REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "artifacts" / "dashboard.png"
PROJECT = "shop"
SEED = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
import json
from dashboard_seed import seed_fleet
from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import failure_type_distribution, metrics_summary, recent_handoffs
from retrylens.analytics.model_store import ModelStore, models_dir
from retrylens.analytics.training import train_from_store
from retrylens.config import load_settings
from retrylens.store import open_store

settings = load_settings(data_dir=Path(sys.argv[1]), clickhouse_dsn="", kafka_bootstrap_servers="")
store = open_store(settings)
seed_fleet(store)
train_from_store(store, model_store=ModelStore(models_dir(settings)))
handoff = recent_handoffs(store, Slice(), limit=1)[0]
print(f"project={handoff['project']}&task_id={handoff['task_id']}")
shares = failure_type_distribution(store, Slice(project=sys.argv[3]))
print(json.dumps({"metrics": metrics_summary(store, Slice(project=sys.argv[3])).as_dict(),
                  "top_error_type": shares[0].error_type if shares else None}))
"""
#: Elements of a metric tile whose text is wider than the box it is shown in (cut by an ellipsis).
CUT_TEXT = """() => [...document.querySelectorAll('[data-testid="stMetricValue"], [data-testid="stMetricLabel"]')]
    .flatMap(tile => [tile, ...tile.querySelectorAll('*')])
    .filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => e.textContent.trim())"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, dict, subprocess.Popen]]:
    """`retrylens up` on a seeded data dir; yields (dashboard url, query of a handed-off task,
    the first screen's expected figures for ``PROJECT``, the `retrylens up` process)."""
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        pytest.fail("Chromium is missing: run `bash infra/browser.sh` (infra/test.sh does)")
    tmp = tmp_path_factory.mktemp("layout")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETRYLENS_", "KAFKA_"))}
    env.update({"RETRYLENS_DATA_DIR": str(tmp / "data"), "RETRYLENS_API_PORT": str(free_port())})
    seeded = subprocess.run([sys.executable, "-c", SEED, str(tmp / "data"), str(Path(__file__).parent), PROJECT],
                            env=env, capture_output=True, text=True, timeout=300, check=True)
    task_query, expected = seeded.stdout.strip().splitlines()[-2:]
    port = free_port()
    log = (tmp / "up.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "retrylens.cli.main", "up", "--port", str(port)], env=env,
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, process, tmp / "up.log", timeout_s=180)
        yield url, task_query, json.loads(expected), process
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
            args=CHROMIUM_FLAGS, viewport={"width": WIDTH, "height": 2400},
        )
        try:
            yield context
        finally:
            context.close()


def _open(browser, url: str):
    page = browser.new_page()
    page.goto(url, wait_until="domcontentloaded", timeout=90_000)
    return page


def test_first_screen_in_chromium_shows_the_seeded_figures(stack, browser):
    from playwright.sync_api import expect

    url, _, expected, process = stack
    success_rate = pct(expected["metrics"]["retry_success_rate"])
    page = browser.new_page()
    try:
        page.set_viewport_size({"width": 1600, "height": 1200})
        page.goto(f"{url}/?range=all&project={PROJECT}", wait_until="domcontentloaded", timeout=60_000)
        charts = page.locator(".js-plotly-plot")
        expect(charts).to_have_count(3, timeout=60_000)
        values = page.locator('[data-testid="stMetricValue"]')
        expect(values.nth(1)).to_have_text(success_rate, timeout=30_000)
        expect(charts.nth(1)).to_contain_text(expected["top_error_type"])
        expect(page.get_by_text("Retry success rate").first).to_be_visible()
        page.wait_for_timeout(1000)  # let the charts finish their transitions
        SCREENSHOT.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), full_page=True)
    finally:
        page.close()
    assert process.poll() is None, "`retrylens up` exited while the page was open"
    assert SCREENSHOT.stat().st_size > 10_000


@pytest.mark.parametrize("name", list(TITLES))
def test_every_page_answers_at_its_own_url(stack, browser, name):
    from playwright.sync_api import expect

    url, *_ = stack
    page = _open(browser, f"{url}/{name}")
    try:
        expect(page.locator("h1").first).to_have_text(TITLES[name][0], timeout=90_000)
        assert page.get_by_text("Page not found").count() == 0
        assert page.url.rstrip("/").endswith(f"/{name}")
    finally:
        page.close()


def _cut_text(page, tiles: int) -> list[str]:
    from playwright.sync_api import expect

    values = page.locator('[data-testid="stMetricValue"]')
    expect(values.nth(tiles - 1)).to_be_visible(timeout=90_000)
    page.wait_for_timeout(1500)  # fonts and column widths settle
    return page.evaluate(CUT_TEXT)


def test_first_screen_tiles_are_not_cut_at_1280_px(stack, browser):
    url, *_ = stack
    page = _open(browser, f"{url}/overview?range=all")
    try:
        assert _cut_text(page, 12) == []
    finally:
        page.close()


def test_task_view_tiles_are_not_cut_at_1280_px(stack, browser):
    url, task_query, *_ = stack
    page = _open(browser, f"{url}/task?{task_query}")
    try:
        assert _cut_text(page, 4) == []
    finally:
        page.close()


def test_model_page_tiles_are_not_cut_at_1280_px(stack, browser):
    url, *_ = stack
    page = _open(browser, f"{url}/model")
    try:
        assert _cut_text(page, 4) == []
    finally:
        page.close()
