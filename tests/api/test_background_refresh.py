"""The pre-check tables' background refresh: one at a time per key, a failure logged and retried."""

from __future__ import annotations

import logging
import threading
import time

from retrylens.api.background_refresh import BackgroundRefresh


def _wait(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert condition()


def test_a_key_being_refreshed_is_not_refreshed_twice_at_once() -> None:
    release, calls = threading.Event(), []

    def load(key: str) -> None:
        calls.append(key)
        release.wait(10)

    refresh = BackgroundRefresh(load, thread_name="t", what="x", log=logging.getLogger("t"))
    refresh.start("a")
    refresh.start("a")
    refresh.start("b")
    _wait(lambda: sorted(calls) == ["a", "b"])
    release.set()
    _wait(lambda: not refresh._running)
    refresh.start("a")
    _wait(lambda: calls.count("a") == 2)


def test_a_failed_refresh_is_logged_and_the_next_one_runs(caplog) -> None:
    attempts = []

    def load(key: str) -> None:
        attempts.append(key)
        raise RuntimeError("store down")

    refresh = BackgroundRefresh(load, thread_name="t", what="the failure rates", log=logging.getLogger("t"))
    with caplog.at_level(logging.ERROR, logger="t"):
        refresh.start("acme")
        _wait(lambda: not refresh._running and attempts)
        assert "refreshing the failure rates of acme failed" in caplog.text
    refresh.start("acme")
    _wait(lambda: len(attempts) == 2)
