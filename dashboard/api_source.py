"""The dashboard's road through the HTTP API of ``retrylens serve`` (embedded store).

An embedded chDB store can be opened by one process only, the server; the dashboard reads
it through :class:`~retrylens.sdk.transport.client.RetryLensClient` with the server's local token.
This module turns the client's JSON back into the analytics layer's types, so the pages
cannot tell this road from :class:`~retrylens.dashboard.source.StoreSource`.

With no project chosen ("All projects") the first screen's reads go to the API's fleet
routes (``/v1/fleet/…``: every project the token may read, totals computed by the server);
the per-project lists (alerts, pre-checks, shadow reports) are read project by project.
"""

from __future__ import annotations

import uuid
from dataclasses import fields
from datetime import date, datetime
from typing import Any

from retrylens.analytics import alerts as alerting
from retrylens.analytics.failure_groups import FailureGroup
from retrylens.analytics.filters import Bucket, Slice
from retrylens.analytics.fingerprints import FingerprintStats
from retrylens.analytics.metrics import ErrorTypeShare, Metrics, TaskCost, TrendPoint
from retrylens.config import Settings
from retrylens.sdk.transport.client import RetryLensClient

from .local_files import ModelInfo, Report, default_reports_dir, read_reports

_SLICE_FIELDS = ("project", "agent", "phase", "error_type", "policy_version", "start", "end")


def _time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _day(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _metrics(data: dict[str, Any]) -> Metrics:
    return Metrics(**_known(Metrics, data))


class ApiSource:
    """Reads every page's data from a RetryLens API server."""

    label = "API"
    cross_project = True

    def __init__(self, client: RetryLensClient, *, settings: Settings | None = None) -> None:
        self.client = client
        self.cache_key = uuid.uuid4().hex  # names this source in st.cache_data keys
        self.settings = settings
        self.reports_dir = default_reports_dir(settings)

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiSource:
        from retrylens.api.auth import local_client

        return cls(local_client(settings), settings=settings)

    @staticmethod
    def _filters(where: Slice) -> tuple[str | None, dict[str, Any]]:
        """The project (``None``: the fleet routes) and the filters of ``where``."""
        return where.project, {"agent": where.agent, "phase": where.phase, "error_type": where.error_type,
                               "policy_version": where.policy_version, "start": where.start, "end": where.end}

    def _projects(self) -> list[str]:
        return self.client.projects()

    def options(self, project: str | None = None, start: datetime | None = None) -> dict[str, list[str]]:
        projects = self._projects()
        out = {"project": projects, "agent": [], "phase": [], "policy_version": []}
        for name in ("agent", "phase", "policy_version"):
            rows = self.client.metrics_by(project, name, limit=500, start=start)
            out[name] = sorted(r["value"] for r in rows if r["value"])
        return out

    def summary(self, where: Slice) -> Metrics:
        project, filters = self._filters(where)
        return _metrics(self.client.metrics(project, **filters))

    def trend(self, where: Slice, bucket: Bucket) -> list[TrendPoint]:
        project, filters = self._filters(where)
        return [TrendPoint(_time(p["bucket"]), _metrics(p["metrics"]))
                for p in self.client.trend(project, bucket=Bucket(bucket).value, **filters)]

    def failure_types(self, where: Slice) -> list[ErrorTypeShare]:
        project, filters = self._filters(where)
        return [ErrorTypeShare(**_known(ErrorTypeShare, r)) for r in self.client.failure_types(project, **filters)]

    def handoffs(self, where: Slice, *, limit: int, offset: int) -> list[dict[str, Any]]:
        project, filters = self._filters(where)
        return [{**r, "ts": _time(r.get("ts"))}
                for r in self.client.handoffs(project, limit=limit, offset=offset, **filters)]

    def task_costs(self, where: Slice, *, limit: int, offset: int) -> list[TaskCost]:
        project, filters = self._filters(where)
        rows = self.client.tasks(project, only_retried=True, limit=limit, offset=offset, **filters)
        return [TaskCost(**_known(TaskCost, r)) for r in rows]

    def find_tasks(self, text: str, *, project: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        text = text.strip()
        if not text:
            return []
        projects = [project] if project else self._projects()
        found = []
        for name in projects:
            found += [{**r, "first_ts": _time(r.get("first_ts")), "last_ts": _time(r.get("last_ts"))}
                      for r in self.client.search_tasks(name, text, limit=limit)]
        found.sort(key=lambda r: r["last_ts"] or datetime.min, reverse=True)
        return found[:limit]

    def task_events(self, project: str, task_id: str) -> list[dict[str, Any]]:
        return [{**e, "ts": _time(e.get("ts"))} for e in self.client.task_events(project, task_id)]

    def failure_groups(self, project: str | None, *, include_noise: bool, error_type: str | None,
                       limit: int, offset: int) -> list[FailureGroup]:
        rows = self.client.failure_groups(project, include_noise=include_noise, error_type=error_type,
                                          limit=limit, offset=offset)
        return [
            FailureGroup(**{**_known(FailureGroup, r), "first_seen": _time(r.get("first_seen")),
                            "last_seen": _time(r.get("last_seen")),
                            "daily": [(_day(d), int(n)) for d, n in r.get("daily") or []]})
            for r in rows
        ]

    @staticmethod
    def _fingerprint(r: dict[str, Any]) -> FingerprintStats:
        return FingerprintStats(**{**_known(FingerprintStats, r), "first_seen": _time(r.get("first_seen")),
                                   "last_seen": _time(r.get("last_seen"))})

    def fingerprint(self, project: str, fingerprint: str) -> FingerprintStats:
        return self._fingerprint(self.client.fingerprint(project, fingerprint.strip()))

    def top_fingerprints(self, project: str, *, limit: int) -> list[FingerprintStats]:
        return [self._fingerprint(r) for r in self.client.fingerprints(project, limit=limit)]

    def model_info(self) -> ModelInfo | None:
        data = self.client.model()
        if not data.get("meta") or data.get("version") in (None, "none"):
            return None
        weights = [(str(n), float(w)) for n, w in data.get("feature_weights") or []]
        return ModelInfo(data["version"], list(data.get("versions") or []), data["meta"], weights)

    def recent_prechecks(self, project: str | None, *, limit: int) -> list[dict[str, Any]] | None:
        if project is None:
            rows = [r for name in self._each(project) for r in self.client.prechecks(name, limit=limit)]
            return sorted(rows, key=lambda r: str(r.get("ts", "")), reverse=True)[:limit]
        return self.client.prechecks(project, limit=limit)

    def precheck_monitor(self, project: str | None) -> dict[str, Any] | None:
        # None: the fleet route (every project the token reads, pooled); bucket_hours 0: sized to the
        # data, as on the store road
        data = self.client.precheck_monitor(project)
        return {**data, "over_time": [{**r, "bucket": _time(r["bucket"])} for r in data.get("over_time", [])]}

    def reports(self, project: str | None = None) -> list[Report]:
        # the written reports (newest first) open the page: a policy report's recommendation is its
        # point; each project's live shadow comparison follows
        reports = read_reports(self.reports_dir)
        for name in self._each(project):
            shadow = self.client.shadow_reports(name)
            if shadow.get("available") and isinstance(shadow.get("report"), dict):
                reports.append(Report(f"shadow comparison: {name} (live)", datetime.now(), shadow["report"]))
        return reports

    def _each(self, project: str | None) -> list[str]:
        """``[project]``, or every project the token reads when none is chosen."""
        return [project] if project is not None else self._projects()

    def _alerts(self, project: str | None, *, history_limit: int = 100) -> dict[str, Any]:
        merged: dict[str, list[Any]] = {"rules": [], "states": [], "history": []}
        seen: set[str] = set()
        for name in self._each(project):
            answer = self.client.alerts(name, history_limit=history_limit)
            rules = [r for r in answer["rules"] if r.get("rule_id") not in seen]  # fleet-wide rules repeat
            wanted = {r.get("rule_id") for r in rules}
            seen |= wanted
            merged["rules"] += rules
            merged["states"] += [x for x in answer["states"] if x.get("rule_id") in wanted]
            merged["history"] += [h for h in answer["history"] if h.get("rule_id") in wanted]
        merged["history"].sort(key=lambda h: str(h.get("ts", "")), reverse=True)
        return merged

    def alert_rules(self, project: str | None = None) -> list[alerting.AlertRule]:
        rules = []
        for r in self._alerts(project)["rules"]:
            where = Slice(**{k: v for k, v in (r.get("where") or {}).items() if k in _SLICE_FIELDS})
            rules.append(alerting.AlertRule(**{**_known(alerting.AlertRule, r), "where": where}))
        return rules

    def alert_states(self, project: str | None = None) -> list[dict[str, Any]]:
        return self._alerts(project)["states"]

    def alert_history(self, project: str | None = None, *, limit: int = 200) -> list[dict[str, Any]]:
        return self._alerts(project, history_limit=limit)["history"][:limit]

    def add_alert_rule(self, rule: alerting.AlertRule) -> None:
        self.client.add_alert_rule(_rule_project(rule), _rule_body(rule))

    def update_alert_rule(self, rule: alerting.AlertRule) -> None:
        self.client.update_alert_rule(_rule_project(rule), rule.rule_id, _rule_body(rule))

    def delete_alert_rule(self, rule: alerting.AlertRule) -> None:
        self.client.delete_alert_rule(_rule_project(rule), rule.rule_id)


def _rule_project(rule: alerting.AlertRule) -> str:
    if not rule.where.project:
        raise ValueError("through the API an alert rule belongs to one project: pick one")
    return rule.where.project


def _rule_body(rule: alerting.AlertRule) -> dict[str, Any]:
    """The API's rule body (``POST``/``PUT /v1/projects/{project}/alerts/rules``) of ``rule``."""
    where = {k: getattr(rule.where, k) for k in ("agent", "phase", "error_type", "policy_version")
             if getattr(rule.where, k)}
    return {"name": rule.name, "metric": rule.metric, "op": rule.op, "threshold": float(rule.threshold),
            "window_minutes": rule.window_minutes, "per": "agent" if rule.per == "agent_name" else rule.per,
            "min_calls": rule.min_calls, "webhook_url": rule.webhook_url, "enabled": rule.enabled, **where}
