"""End to end in a real browser: `retrylens up` (API server owning an embedded store + the
dashboard), opened in headless Chromium (Debian's package, driven by Playwright).

The store is seeded, and the expected figures computed with the analytics layer, in a child
process before the server starts (chDB allows one process per data directory). The page
must show those figures; a screenshot is saved to ``artifacts/dashboard.png``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from retrylens.dashboard.widgets import pct

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "artifacts" / "dashboard.png"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PROJECT = "shop"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_serving(url: str, stack: subprocess.Popen, log: Path, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if stack.poll() is not None:
            pytest.fail(f"`retrylens up` exited with {stack.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/_stcore/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail(f"the dashboard did not answer at {url}:\n{log.read_text()[-3000:]}")


@pytest.fixture
def running_stack(tmp_path: Path):
    """Seeded data dir → `retrylens up` on free ports; yields (dashboard url, expected figures)."""
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        pytest.fail("Chromium is missing: run `bash infra/browser.sh` (infra/test.sh does)")
    data_dir = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RETRYLENS_", "KAFKA_"))}
    env.update({"RETRYLENS_DATA_DIR": str(data_dir), "RETRYLENS_API_PORT": str(_free_port())})
    seed = subprocess.run([sys.executable, str(Path(__file__).with_name("dashboard_seed.py")), str(data_dir),
                           PROJECT], env=env, capture_output=True, text=True, timeout=120, check=True)
    expected = json.loads(seed.stdout.strip().splitlines()[-1])
    port = _free_port()
    log = (tmp_path / "up.log").open("wb")
    stack = subprocess.Popen([sys.executable, "-m", "retrylens.cli.main", "up", "--port", str(port)],
                             env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_serving(url, stack, tmp_path / "up.log")
        yield url, expected, stack
    finally:
        stack.send_signal(signal.SIGTERM)
        try:
            stack.wait(timeout=30)
        except subprocess.TimeoutExpired:
            stack.kill()
        log.close()


def test_first_screen_in_chromium_shows_the_seeded_figures(running_stack, tmp_path: Path):
    from playwright.sync_api import expect, sync_playwright

    url, expected, stack = running_stack
    success_rate = pct(expected["metrics"]["retry_success_rate"])
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1600, "height": 1200},
        )
        try:
            page = browser.new_page()
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
            browser.close()
    assert stack.poll() is None, "`retrylens up` exited while the page was open"
    assert SCREENSHOT.stat().st_size > 10_000
