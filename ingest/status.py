"""Does ingest keep up? Throughput, lag and its trend, from what the commits report.

An operator's first question is not "how fast" but "is it falling behind". The consumer
records every committed batch here; :meth:`IngestStatus.snapshot` turns the recent ones
into a verdict: ingest keeps up when its lag is small (under ``keep_up_seconds`` of its
own throughput) or shrinking. ``retrylens consume --stats N`` prints one every N seconds.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class _Commit:
    at: float
    messages: int
    rows: int
    lag: int
    insert_s: float


class IngestStatus:
    def __init__(
        self, *, window_s: float = 30.0, keep_up_seconds: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._window_s = window_s
        self._keep_up_seconds = keep_up_seconds
        self._clock = clock
        self._commits: deque[_Commit] = deque()
        self._lock = threading.Lock()
        self._started = clock()
        self._messages = 0
        self._rows = 0

    def record(self, *, messages: int, rows: int, lag: int, insert_s: float) -> None:
        """One committed batch and the lag (messages behind the high watermark) after it."""
        now = self._clock()
        with self._lock:
            self._commits.append(_Commit(now, messages, rows, lag, insert_s))
            self._messages += messages
            self._rows += rows
            while self._commits and now - self._commits[0].at > self._window_s:
                self._commits.popleft()

    def snapshot(self) -> dict[str, float | int | bool | None]:
        now = self._clock()
        with self._lock:
            commits = [c for c in self._commits if now - c.at <= self._window_s]
            total_messages, total_rows = self._messages, self._rows
        span = min(self._window_s, now - self._started) or 1e-9
        eps = sum(c.messages for c in commits) / span
        lag = commits[-1].lag if commits else None
        lag_trend = commits[-1].lag - commits[0].lag if len(commits) > 1 else 0
        keeping_up = lag is None or lag <= max(1.0, eps * self._keep_up_seconds) or lag_trend < 0
        return {
            "messages": total_messages,
            "rows": total_rows,
            "eps": round(eps, 1),
            "lag": lag,
            "lag_trend": lag_trend,
            "batches_in_window": len(commits),
            "mean_batch_rows": round(sum(c.rows for c in commits) / len(commits), 1) if commits else 0,
            "last_insert_ms": round(commits[-1].insert_s * 1000, 1) if commits else None,
            "keeping_up": keeping_up,
        }


def combine_snapshots(snapshots: list[dict[str, float | int | bool | None]]) -> dict:
    """Several members' snapshots as one (a consumer group in one process), with each
    member's own under ``members``: counts, throughput and lag add up; the group keeps up
    only if every member does (one member falling behind is its partitions' lag growing)."""
    lags = [s["lag"] for s in snapshots if s["lag"] is not None]
    inserts = [s["last_insert_ms"] for s in snapshots if s["last_insert_ms"] is not None]
    batches = sum(int(s["batches_in_window"] or 0) for s in snapshots)
    rows_in_window = sum(float(s["mean_batch_rows"] or 0) * int(s["batches_in_window"] or 0) for s in snapshots)
    return {
        "messages": sum(int(s["messages"] or 0) for s in snapshots),
        "rows": sum(int(s["rows"] or 0) for s in snapshots),
        "eps": round(sum(float(s["eps"] or 0) for s in snapshots), 1),
        "lag": sum(lags) if lags else None,
        "lag_trend": sum(int(s["lag_trend"] or 0) for s in snapshots),
        "batches_in_window": batches,
        "mean_batch_rows": round(rows_in_window / batches, 1) if batches else 0,
        "last_insert_ms": max(inserts) if inserts else None,
        "keeping_up": all(bool(s["keeping_up"]) for s in snapshots),
        "members": snapshots,
    }
