"""Fingerprint history for pre-checks, held in memory per project and refreshed in the background.

A pre-check needs the input fingerprint's record (known-bad flag, and the model's
``fp_seen``/``fp_failure_rate`` features). One ClickHouse lookup costs milliseconds, more
than the rest of the pre-check together, so each project's fingerprints are loaded from
the ``fingerprint_daily`` rollup (via
:func:`~retrylens.analytics.fingerprints.top_failing_fingerprints`) into a dict, reloaded
on a background thread once older than ``refresh_s``. A fingerprint absent from a
complete index has never been seen; when a project has more than ``max_fingerprints``
the index is partial and misses fall back to a direct lookup (cached for ``refresh_s``).

History is therefore up to ``refresh_s`` (default 10 s) behind the store; ``refresh_s=0``
turns the index off and every lookup reads the store.

The same load also reads the project's recent failed tasks into a
:class:`~retrylens.analytics.similar_failures.SimilarFailures` (the nearest past failures
a pre-check answer lists); :meth:`FingerprintIndex.similar` answers from it, and
remembers each input's answer until the next refresh (agents retry the same inputs).
That read is heavier (every failed task's features), so it is redone at most every
``similar_refresh_s`` (default 60 s); the fingerprint counts keep their own pace.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from retrylens.analytics.fingerprints import (
    FingerprintStats,
    fingerprint_stats,
    top_failing_fingerprints,
)
from retrylens.analytics.similar_failures import SimilarFailures
from retrylens.store import EventStore

from .background_refresh import BackgroundRefresh

log = logging.getLogger("retrylens.api.fingerprints")
MAX_PROJECTS = 1_000
#: per project, the fingerprints read one by one that are remembered
MAX_MISSES = 50_000


@dataclass
class _ProjectIndex:
    stats: dict[str, FingerprintStats]
    complete: bool
    loaded_at: float
    similar: SimilarFailures | None = None
    similar_loaded_at: float = 0.0
    nearest: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)


class FingerprintIndex:
    def __init__(self, store: EventStore, *, refresh_s: float = 10.0, max_fingerprints: int = 200_000,
                 similar_refresh_s: float = 60.0) -> None:
        self.store = store
        self.refresh_s = refresh_s
        self.similar_refresh_s = similar_refresh_s
        self.max_fingerprints = max_fingerprints
        self._projects: dict[str, _ProjectIndex] = {}
        #: per project: fingerprint → (when read, its history), for a project whose index is partial
        self._misses: dict[str, dict[str, tuple[float, FingerprintStats]]] = {}
        self._refresh = BackgroundRefresh(self._load, thread_name="retrylens-fp-index", what="fingerprint history", log=log)
        self._lock = threading.Lock()

    def lookup(self, project: str, fingerprint: str, *, io: bool = True) -> FingerprintStats | None:
        """The fingerprint's history; with ``io=False``, ``None`` when that needs a store read."""
        if self.refresh_s <= 0:
            return fingerprint_stats(self.store, project, fingerprint) if io else None
        index = self._projects.get(project)
        if index is None:
            if not io:
                return None
            index = self._load(project)
        elif time.monotonic() - index.loaded_at > self.refresh_s:
            self._refresh.start(project)
        found = index.stats.get(fingerprint)
        if found is not None:
            return found
        if index.complete:
            return FingerprintStats(project=project, fingerprint=fingerprint)
        return self._direct(project, fingerprint, io=io)

    def similar(self, project: str, fingerprint: str, words: Callable[[], Iterable[str]], *, agent: str = "",
                io: bool = True) -> list[dict[str, Any]] | None:
        """The nearest past failures of inputs like this one; ``None`` (with ``io=False``) when
        that needs a store read. Call after :meth:`lookup`, which loads the project.

        ``words`` gives the input's content words; it is called only when this input's answer
        is not remembered (most pre-checks repeat an input, and working the words out was a
        tenth of a remembered answer's cost)."""
        if self.refresh_s <= 0:
            return SimilarFailures.load(self.store, project).nearest(words(), agent=agent) if io else None
        index = self._projects.get(project)
        if index is None or index.similar is None:
            if not io:
                return None
            index = self._load(project)
        assert index.similar is not None
        key = (fingerprint, agent)
        found = index.nearest.get(key)
        if found is None:
            found = index.similar.nearest(words(), agent=agent)
            if len(index.nearest) >= 50_000:
                index.nearest.clear()
            index.nearest[key] = found
        return found

    def _load(self, project: str) -> _ProjectIndex:
        started = time.monotonic()
        rows = top_failing_fingerprints(self.store, project, min_failures=0, limit=self.max_fingerprints + 1)
        previous = self._projects.get(project)
        if previous is not None and previous.similar is not None and \
                started - previous.similar_loaded_at < self.similar_refresh_s:
            similar, similar_at, nearest = previous.similar, previous.similar_loaded_at, previous.nearest
        else:
            similar, similar_at, nearest = SimilarFailures.load(self.store, project), started, {}
        index = _ProjectIndex({s.fingerprint: s for s in rows[: self.max_fingerprints]},
                              complete=len(rows) <= self.max_fingerprints, loaded_at=started,
                              similar=similar, similar_loaded_at=similar_at, nearest=nearest)
        with self._lock:
            if len(self._projects) >= MAX_PROJECTS:
                self._projects.clear()
            self._projects[project] = index
            self._misses.pop(project, None)
        return index

    def _direct(self, project: str, fingerprint: str, *, io: bool) -> FingerprintStats | None:
        """A fingerprint missing from a partial index, read from the store and remembered in the
        project's own cache (one project's misses never push out another's)."""
        hit = self._misses.get(project, {}).get(fingerprint)
        if hit is not None and time.monotonic() - hit[0] < self.refresh_s:
            return hit[1]
        if not io:
            return None
        stats = fingerprint_stats(self.store, project, fingerprint)
        with self._lock:
            misses = self._misses.setdefault(project, {})
            if len(misses) >= MAX_MISSES:
                misses.clear()
            misses[fingerprint] = (time.monotonic(), stats)
        return stats
