"""``retrylens serve`` as a real process: owns its embedded store, ingests, stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from retrylens.analytics.synthetic import synthetic_events
from retrylens.sdk.transport.client import wait_until_healthy

pytestmark = [pytest.mark.clickhouse, pytest.mark.slow]
KEY = {"X-API-Key": "serve-key"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(data_dir: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETRYLENS_") and k != "KAFKA_BOOTSTRAP_SERVERS"}
    env.update({"RETRYLENS_DATA_DIR": str(data_dir), "RETRYLENS_API_KEYS": json.dumps({"acme": "serve-key"}),
                "RETRYLENS_API_PORT": str(port), "RETRYLENS_BATCH_MAX_SECONDS": "0.2",
                "PYTHONWARNINGS": "always::ResourceWarning"})  # an unclosed socket at stop must show
    return env


def _serve(data_dir: Path, port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "retrylens.cli.main", "serve", "--host", "127.0.0.1",
                             "--port", str(port)], env=_env(data_dir, port), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 60) -> None:
    if not wait_until_healthy(url, process, timeout_s=timeout_s):
        detail = process.communicate()[1][-2000:] if process.poll() is not None else "no answer"
        raise AssertionError(f"server did not become healthy: {detail}")


def test_serve_ingests_http_events_refuses_a_second_owner_and_exits_0_on_sigterm(tmp_path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = _serve(tmp_path, port)
    try:
        _wait_healthy(url, server)
        events = [e.model_dump(mode="json") for e in synthetic_events(10, seed=3, project="acme")]
        posted = httpx.post(f"{url}/v1/events", json={"events": events}, headers=KEY, timeout=10).json()
        assert posted["accepted"] == len(events)
        deadline = time.monotonic() + 30
        tasks = 0
        while tasks < 10 and time.monotonic() < deadline:
            time.sleep(0.3)
            metrics = httpx.get(f"{url}/v1/projects/acme/metrics", params={"source": "raw"}, headers=KEY).json()
            tasks = metrics["metrics"]["tasks"]
        assert tasks == 10

        other_port = _free_port()
        second = subprocess.run([sys.executable, "-m", "retrylens.cli.main", "serve", "--port", str(other_port)],
                                env=_env(tmp_path, other_port), capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        said = " ".join(second.stderr.split())  # rich wraps long lines
        assert "owned by another process" in said and "RETRYLENS_API_URL" in said
        assert f"API at {url}" in said and str(other_port) not in said  # the running server's address

        again = subprocess.run([sys.executable, "-m", "retrylens.cli.main", "up", "--port", str(_free_port())],
                               env=_env(tmp_path, port), capture_output=True, text=True, timeout=60)
        said = " ".join(again.stderr.split())
        assert again.returncode == 1 and f"already runs on this data directory at {url}" in said
        assert "API on" not in again.stdout + said  # it does not announce that server as its own

        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
        stopped = server.stderr.read()
        assert "Application shutdown complete" in stopped
        assert "shutdown already in progress" not in stopped and "ResourceWarning" not in stopped
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
