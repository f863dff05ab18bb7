"""At most one background refresh per key at a time, the old value answering meanwhile.

Why: the pre-check's in-memory tables (fingerprint history, agents' failure rates) go
stale on a clock, and a request that finds one stale must not wait for ClickHouse nor
start a second read of what is already being read. A refresh that fails is logged and
the previous value keeps answering until the next try.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


class BackgroundRefresh:
    """Starts ``load(key)`` on a daemon thread unless one for ``key`` is still running."""

    def __init__(self, load: Callable[[str], object], *, thread_name: str, what: str,
                 log: logging.Logger) -> None:
        self._load = load
        self._thread_name = thread_name
        self._what = what
        self._log = log
        self._running: set[str] = set()
        self._lock = threading.Lock()

    def start(self, key: str) -> None:
        with self._lock:
            if key in self._running:
                return
            self._running.add(key)

        def refresh() -> None:
            try:
                self._load(key)
            except Exception:  # noqa: BLE001 - keep answering with the previous value
                self._log.exception("refreshing %s of %s failed", self._what, key)
            finally:
                with self._lock:
                    self._running.discard(key)

        threading.Thread(target=refresh, name=self._thread_name, daemon=True).start()
