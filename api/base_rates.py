"""Each agent's recent failure rate, per project, held in memory for pre-checks.

A pre-check reads its agent's task failure rate over the last week (tasks that ended other
than succeeded / tasks that ended, from the rollups) to say whether the agent is known and,
with no model or an empty input, as the risk itself: the same meaning as the model's risk
(the probability that the task fails), not the share of failed *attempts*, which retries
inflate (an agent whose tasks retry twice can fail 73 % of attempts and 20 % of tasks).
Read one agent at a time, that was a ClickHouse query on the request path for the first
pre-check of every agent and again every minute per agent (30-45 ms each on the pre-check
bench, the slowest answers of a run). Here one query per project reads every agent's figures
(:func:`~retrylens.analytics.metrics.metrics_by` over ``agent``: the same rollup counts as
:func:`~retrylens.analytics.metrics.metrics_summary` of one agent) plus the project's own.

Only a project's first pre-check waits for that read; later ones answer from memory, and a
table older than ``ttl_s`` is re-read on a background thread while the previous one keeps
answering, so figures are at most ``ttl_s`` plus one read behind the store.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from retrylens.analytics.definitions import Metrics
from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import metrics_by, metrics_summary
from retrylens.store import EventStore

from .background_refresh import BackgroundRefresh

log = logging.getLogger("retrylens.api.base_rates")
MAX_PROJECTS = 1_000


@dataclass(frozen=True)
class ProjectRates:
    """One project's failure rates over the window: per agent, and the whole project's."""

    by_agent: dict[str, float | None]
    project: float | None
    loaded_at: float

    def rate(self, agent: str | None) -> float | None:
        """``agent``'s rate (``None``: the project's); ``None`` when it has no attempts in the window."""
        return self.project if agent is None else self.by_agent.get(agent)


def _rate(metrics: Metrics) -> float | None:
    """Failed (or handed-off, cancelled) tasks / ended tasks; ``None`` with no ended task."""
    failed = metrics.failed_with_retry + metrics.failed_without_retry
    return failed / metrics.tasks if metrics.tasks else None


class BaseRates:
    """Failure rates of every agent of a project, read in one query and refreshed in the background."""

    def __init__(self, store: EventStore, *, days: int = 7, ttl_s: float = 60.0,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.store = store
        self.days = days
        self.ttl_s = ttl_s
        self.clock = clock
        self._projects: dict[str, ProjectRates] = {}
        self._refresh = BackgroundRefresh(self._load, thread_name="retrylens-base-rates", what="the failure rates", log=log)
        self._lock = threading.Lock()

    def table(self, project: str, *, io: bool = True) -> ProjectRates | None:
        """The project's rates; with ``io=False``, ``None`` when they were never read (a store read is needed)."""
        found = self._projects.get(project)
        if found is None:
            return self._load(project) if io else None
        if time.monotonic() - found.loaded_at >= self.ttl_s:
            self._refresh.start(project)
        return found

    def read(self, project: str) -> ProjectRates:
        """The project's rates from the store now (what :meth:`table` keeps)."""
        started = time.monotonic()
        where = Slice(project=project, start=self.clock() - timedelta(days=self.days))
        agents = {row.value: _rate(row.metrics) for row in metrics_by(self.store, "agent", where, limit=2**31)}
        return ProjectRates(agents, _rate(metrics_summary(self.store, where)), started)

    def _load(self, project: str) -> ProjectRates:
        rates = self.read(project)
        with self._lock:
            if len(self._projects) >= MAX_PROJECTS and project not in self._projects:
                self._projects.clear()
            self._projects[project] = rates
        return rates
