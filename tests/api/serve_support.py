"""A real ``retrylens serve`` process for end-to-end tests (OTLP, curl, schemathesis).

``shared_server`` is a session fixture (registered in ``conftest.py``).

The server owns a fresh embedded store under the test's folder, knows the ``acme`` and
``globex`` keys of :mod:`apitest_support` and listens on a free port; extra environment
(``RETRYLENS_*`` settings) is passed through.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from apitest_support import KEYS

from retrylens.sdk.transport.client import wait_until_healthy


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running_server(data_dir: Path, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """Start ``retrylens serve``, yield its URL once healthy, stop it (SIGTERM) afterwards."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETRYLENS_") and k != "KAFKA_BOOTSTRAP_SERVERS"}
    env.update({"RETRYLENS_DATA_DIR": str(data_dir), "RETRYLENS_API_KEYS": json.dumps(KEYS),
                "RETRYLENS_API_PORT": str(port), "RETRYLENS_BATCH_MAX_SECONDS": "0.2", **(extra_env or {})})
    process = subprocess.Popen([sys.executable, "-m", "retrylens.cli.main", "serve", "--host", "127.0.0.1",
                                "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_until_healthy(url, process, timeout_s=180):  # a loaded CI machine starts it slowly
            detail = process.communicate(timeout=10)[1][-2000:] if process.poll() is not None else "no answer"
            raise AssertionError(f"server did not become healthy: {detail}")
        yield url
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


#: What the shared server is started with: the OTLP test's price table.
SHARED_ENV = {"RETRYLENS_OTLP_PRICES": json.dumps({"gpt-4o": [2.5, 10.0]})}


@pytest.fixture(scope="session", name="shared_server")
def shared_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One embedded ``retrylens serve`` for the end-to-end tests that can share it (saves a start-up).

    Its users must not assume an empty store: each reads back only what it sent.
    """
    with running_server(tmp_path_factory.mktemp("shared-serve"), SHARED_ENV) as url:
        yield url
