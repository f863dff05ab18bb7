"""Agents authenticate to the RetryLens API with their project's key."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from retrylens.sdk import ApiPoller, PolicySource, Preflight
from retrylens.sdk.core.preflight import PrecheckRequest


@pytest.fixture
def seen_keys() -> tuple[str, list[str | None]]:
    keys: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            keys.append(self.headers.get("X-API-Key"))
            self.send_response(404)
            self.end_headers()

        do_GET = do_POST = _answer  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", keys
    server.shutdown()


def test_policy_poller_and_preflight_send_the_given_key(seen_keys) -> None:
    url, keys = seen_keys
    ApiPoller(PolicySource(), url, "shop", "planner", api_key="k-shop").poll()
    Preflight(url, api_key="k-shop").check(
        PrecheckRequest(project="shop", agent="planner", task_input="x")
    )
    assert keys == ["k-shop", "k-shop"]


def test_key_comes_from_the_environment_when_not_given(
    seen_keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, keys = seen_keys
    monkeypatch.setenv("RETRYLENS_AGENT_API_KEY", "k-env")
    ApiPoller(PolicySource(), url, "shop", "planner").poll()
    monkeypatch.delenv("RETRYLENS_AGENT_API_KEY")
    ApiPoller(PolicySource(), url, "shop", "planner").poll()
    assert keys == ["k-env", None]
