"""Helpers of the browser tests (tests/dashboard/test_dashboard_layout_browser.py): Debian's
Chromium and its flags, free ports, and waiting for `retrylens up` to serve.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(url: str, stack: subprocess.Popen, log: Path, timeout_s: float = 90.0) -> None:
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
