"""Failure history by input fingerprint: the "same input failed ≥ 3 times" rule's memory.

In-process by default; :meth:`FailureHistory.load_from_store` seeds it from stored
``task_finished`` events, and the pre-flight API's ``known_bad_fingerprint`` marks one.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class FailureHistory:
    def __init__(self) -> None:
        self._failed: Counter[str] = Counter()
        self._lock = threading.Lock()

    def failures(self, fingerprint: str) -> int:
        with self._lock:
            return self._failed[fingerprint]

    def record(self, fingerprint: str, *, failed: bool) -> None:
        if not failed:
            return
        with self._lock:
            self._failed[fingerprint] += 1

    def mark_bad(self, fingerprint: str, count: int) -> None:
        with self._lock:
            self._failed[fingerprint] = max(self._failed[fingerprint], count)

    def load_from_store(self, store: Any, project: str, *, limit: int = 100_000) -> int:
        """Seed counts of failed/handed-off tasks per fingerprint from an ``EventStore``."""
        rows = store.client.query(
            store.sql(
                "SELECT input_fingerprint, count() FROM [[db]].events FINAL "
                "WHERE project = {project:String} AND kind = 'task_finished' "
                "AND outcome IN ('failed', 'handed_off') AND input_fingerprint != '' "
                "GROUP BY input_fingerprint LIMIT {limit:UInt32}"
            ),
            parameters={"project": project, "limit": limit},
        ).result_rows
        with self._lock:
            for fingerprint, count in rows:
                self._failed[str(fingerprint)] = max(self._failed[str(fingerprint)], int(count))
        return len(rows)
