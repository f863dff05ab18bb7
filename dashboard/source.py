"""Where the dashboard's data comes from: one small protocol, two roads.

Pages ask a :class:`DataSource` for what they show and never know which road answers:

- :class:`StoreSource` calls the analytics layer directly. It is the road when the store
  is a ClickHouse server (every process may connect) and in tests, where the fixture store
  is injected.
- :class:`~retrylens.dashboard.api_source.ApiSource` goes through the HTTP API of
  ``retrylens serve``. It is the road when the store is an embedded chDB: only the server
  process may open it, so the dashboard must not.

Every value a widget produces reaches ClickHouse as a bound query parameter: the analytics
functions take a :class:`Slice`, and the two lookups written here use ``{name:Type}`` slots.

:func:`current` picks the source of a dashboard process: a source installed with
:func:`use` (tests), else one built from the settings named by the environment
(``retrylens dashboard`` sets ``RETRYLENS_DASHBOARD_SOURCE``).
"""

from __future__ import annotations

import os
import threading
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from retrylens.analytics import alerts as alerting
from retrylens.analytics import prechecks
from retrylens.analytics.definitions import count
from retrylens.analytics.failure_groups import FailureGroup, failure_groups
from retrylens.analytics.filters import Bucket, Slice
from retrylens.analytics.fingerprints import (
    FingerprintStats,
    fingerprint_stats,
    top_failing_fingerprints,
)
from retrylens.analytics.metrics import (
    ErrorTypeShare,
    Metrics,
    TaskCost,
    TrendPoint,
    failure_type_distribution,
    metrics_by,
    metrics_summary,
    metrics_trend,
    recent_handoffs,
    task_costs,
)
from retrylens.config import Settings, load_settings
from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .local_files import (
    ModelInfo,
    Report,
    default_reports_dir,
    model_info_from_disk,
    read_reports,
)

SOURCE_ENV = "RETRYLENS_DASHBOARD_SOURCE"
#: The filter dimensions offered in the sidebar, as (label, metrics_by dimension).
OPTION_DIMENSIONS = (("project", "project"), ("agent", "agent"), ("phase", "phase"),
                     ("policy_version", "policy_version"))


@runtime_checkable
class DataSource(Protocol):
    """What the pages need. Lists are pages: ``limit`` rows from ``offset``.

    ``cross_project`` says whether a slice may leave ``project`` open; a source that cannot
    (the API reads one project per request) gets a project chosen by the sidebar.
    """

    label: str
    cross_project: bool

    def options(self, project: str | None = None, start: datetime | None = None) -> dict[str, list[str]]: ...
    def summary(self, where: Slice) -> Metrics: ...
    def trend(self, where: Slice, bucket: Bucket) -> list[TrendPoint]: ...
    def failure_types(self, where: Slice) -> list[ErrorTypeShare]: ...
    def handoffs(self, where: Slice, *, limit: int, offset: int) -> list[dict[str, Any]]: ...
    def task_costs(self, where: Slice, *, limit: int, offset: int) -> list[TaskCost]: ...
    def find_tasks(self, text: str, *, project: str | None = None, limit: int = 20) -> list[dict[str, Any]]: ...
    def task_events(self, project: str, task_id: str) -> list[dict[str, Any]]: ...
    def failure_groups(self, project: str | None, *, include_noise: bool, error_type: str | None,
                       limit: int, offset: int) -> list[FailureGroup]: ...
    def fingerprint(self, project: str, fingerprint: str) -> FingerprintStats: ...
    def top_fingerprints(self, project: str, *, limit: int) -> list[FingerprintStats]: ...
    def model_info(self) -> ModelInfo | None: ...
    def recent_prechecks(self, project: str | None, *, limit: int) -> list[dict[str, Any]] | None: ...
    def precheck_monitor(self, project: str | None) -> dict[str, Any] | None: ...
    def reports(self, project: str | None = None) -> list[Report]: ...
    def alert_rules(self, project: str | None = None) -> list[alerting.AlertRule]: ...
    def alert_states(self, project: str | None = None) -> list[dict[str, Any]]: ...
    def alert_history(self, project: str | None = None, *, limit: int = 200) -> list[dict[str, Any]]: ...
    def add_alert_rule(self, rule: alerting.AlertRule) -> None: ...
    def update_alert_rule(self, rule: alerting.AlertRule) -> None: ...
    def delete_alert_rule(self, rule: alerting.AlertRule) -> None: ...


_FIND_TASKS = (
    "SELECT project, task_id, min(ts) AS first_ts, max(ts) AS last_ts, any(agent_name) AS agent,"
    f" uniqExactIf(attempt, {count('calls').condition}) AS attempts"  # not ids: task events carry their own
    " FROM [[db]].events"
    " WHERE (task_id = {q:String} OR correlation_id = {q:String} OR trace_id = {q:String})"
    " AND ({project:String} = '' OR project = {project:String})"
    " GROUP BY project, task_id ORDER BY last_ts DESC, project, task_id LIMIT {limit:UInt32}"
)


class StoreSource:
    """The analytics layer called in this process, on a store this process may open."""

    label = "store"
    cross_project = True

    def __init__(self, store: EventStore, *, settings: Settings | None = None,
                 reports_dir: Path | None = None) -> None:
        self.store = store
        self.cache_key = uuid.uuid4().hex  # names this source in st.cache_data keys
        self.settings = settings
        self.reports_dir = reports_dir or default_reports_dir(settings)

    def options(self, project: str | None = None, start: datetime | None = None) -> dict[str, list[str]]:
        """Values seen since ``start`` (the sidebar's range), read from the rollups."""

        def values(dimension: str) -> list[str]:
            where = Slice(start=start) if dimension == "project" else Slice(project=project, start=start)
            return sorted(s.value for s in metrics_by(self.store, dimension, where, limit=500) if s.value)

        return {label: values(dimension) for label, dimension in OPTION_DIMENSIONS}

    def summary(self, where: Slice) -> Metrics:
        return metrics_summary(self.store, where)

    def trend(self, where: Slice, bucket: Bucket) -> list[TrendPoint]:
        return metrics_trend(self.store, where, bucket=bucket)

    def failure_types(self, where: Slice) -> list[ErrorTypeShare]:
        return failure_type_distribution(self.store, where)

    def handoffs(self, where: Slice, *, limit: int, offset: int) -> list[dict[str, Any]]:
        return recent_handoffs(self.store, where, limit=limit, offset=offset)

    def task_costs(self, where: Slice, *, limit: int, offset: int) -> list[TaskCost]:
        return task_costs(self.store, where, limit=limit, offset=offset)

    def find_tasks(self, text: str, *, project: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        text = text.strip()
        if not text:
            return []
        params = {"q": text, "project": project or "", "limit": max(1, int(limit))}
        return query_rows(self.store.client, self.store.sql(_FIND_TASKS), params)

    def task_events(self, project: str, task_id: str) -> list[dict[str, Any]]:
        return self.store.task_events(project, task_id)

    def failure_groups(self, project: str | None, *, include_noise: bool, error_type: str | None,
                       limit: int, offset: int) -> list[FailureGroup]:
        return failure_groups(self.store, project, include_noise=include_noise, error_type=error_type,
                              limit=limit, offset=offset)

    def fingerprint(self, project: str, fingerprint: str) -> FingerprintStats:
        return fingerprint_stats(self.store, project, fingerprint.strip())

    def top_fingerprints(self, project: str, *, limit: int) -> list[FingerprintStats]:
        return top_failing_fingerprints(self.store, project, limit=limit)

    def model_info(self) -> ModelInfo | None:
        if self.settings is None:
            return None
        return model_info_from_disk(self.settings, self._recent_features())

    def _recent_features(self) -> list[dict[str, Any]]:
        from retrylens.analytics.model_weights import recent_input_features

        return recent_input_features(self.store)

    def recent_prechecks(self, project: str | None, *, limit: int) -> list[dict[str, Any]] | None:
        return prechecks.recent_prechecks(self.store, project, limit=limit)

    def precheck_monitor(self, project: str | None) -> dict[str, Any] | None:
        return {"over_time": prechecks.calibration_over_time(self.store, project),
                "advice": prechecks.advice_vs_outcome(self.store, project)}

    def reports(self, project: str | None = None) -> list[Report]:
        return read_reports(self.reports_dir)

    def alert_rules(self, project: str | None = None) -> list[alerting.AlertRule]:
        rules = alerting.list_rules(self.store)
        return [r for r in rules if project is None or r.where.project in (None, project)]

    def alert_states(self, project: str | None = None) -> list[dict[str, Any]]:
        wanted = {r.rule_id for r in self.alert_rules(project)}
        return [s for s in alerting.alert_states(self.store) if s["rule_id"] in wanted]

    def alert_history(self, project: str | None = None, *, limit: int = 200) -> list[dict[str, Any]]:
        wanted = {r.rule_id for r in self.alert_rules(project)} if project is not None else None
        return alerting.alert_history(self.store, limit=limit, rule_ids=wanted)  # filtered before the newest cut

    def add_alert_rule(self, rule: alerting.AlertRule) -> None:
        alerting.save_rule(self.store, rule)

    def update_alert_rule(self, rule: alerting.AlertRule) -> None:
        alerting.save_rule(self.store, rule)

    def delete_alert_rule(self, rule: alerting.AlertRule) -> None:
        alerting.delete_rule(self.store, rule)


# --- choosing the source of this process -----------------------------------------------------

_installed: DataSource | None = None
_built: DataSource | None = None
_lock = threading.Lock()


def use(source: DataSource | None) -> None:
    """Install ``source`` for every session of this process (``None`` uninstalls it)."""
    global _installed
    _installed = source


def current() -> DataSource:
    """The installed source, else the one ``RETRYLENS_DASHBOARD_SOURCE`` asks for (built once)."""
    global _built
    if _installed is not None:
        return _installed
    with _lock:
        if _built is None:
            _built = from_settings(load_settings(), road=os.environ.get(SOURCE_ENV, "auto"))
        return _built


def from_settings(settings: Settings, *, road: str = "auto") -> DataSource:
    """``api`` for an embedded store (never opens chDB here), ``store`` for a ClickHouse server.

    ``road="store"`` opens the configured store directly even when it is embedded: only for a
    data directory no other process holds.
    """
    if road not in ("auto", "api", "store"):
        raise ValueError(f"unknown dashboard source {road!r}; choose auto, api or store")
    if road == "api" or (road == "auto" and settings.is_embedded_store):
        from .api_source import ApiSource

        return ApiSource.from_settings(settings)
    from retrylens.store import open_store

    return StoreSource(open_store(settings, migrate=False), settings=settings)
