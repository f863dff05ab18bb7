"""The one HTTP client of the RetryLens API: one method per endpoint, plain dicts and lists back.

The SDK's pre-flight check and policy polling talk to the server through it, and so do
the dashboard (when the store is an embedded chDB owned by the ``retrylens`` server
process), the CLI and the tests::

    from retrylens.sdk.transport.client import RetryLensClient

    client = RetryLensClient("http://127.0.0.1:8787", api_key="...")
    client.metrics("shop", agent="planner", start=datetime.now(UTC) - timedelta(days=1))

Shapes: a **metrics dict** is the fields of :class:`retrylens.analytics.metrics.Metrics`
(``calls``, ``failures``, ``retries``, ``retry_successes``, ``degrades``, ``handoffs``,
``budget_exhaustions``, ``tasks``, ``tasks_retried``, ``tasks_recovered``,
``tasks_handed_off``, ``retry_rate``, ``retry_success_rate``, ``mean_retry_duration_ms``,
``p95_retry_duration_ms``, ``p95_backoff_ms``, ``degradation_rate``, ``handoff_rate``,
``recovery_rate``, ``failed_cost_usd``, ``failed_tokens``, ``retry_cost_usd``,
``retry_tokens``, ``retry_cost_per_retried_task_usd``; ratios are ``None`` when their
denominator is 0). Times are ISO-8601 strings in UTC. **Filters** (keyword arguments
``agent``, ``phase``, ``error_type``, ``policy_version``, ``start``, ``end``) accept
strings and ``datetime`` s; ``None`` means "any".

Errors: a non-2xx answer raises :class:`ApiError` carrying ``status`` and ``detail``; a
project the key may not read is a 404, like a project that does not exist.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any

import httpx

from retrylens.errors import ApiError

#: The key an agent sends when none is given in code.
AGENT_API_KEY_ENV = "RETRYLENS_AGENT_API_KEY"

FILTERS = ("agent", "phase", "error_type", "policy_version", "start", "end")


def is_healthy(api_url: str, *, timeout_s: float = 1.0) -> bool:
    """Whether a RetryLens server answers ``GET /healthz`` with 200 at ``api_url``."""
    try:
        return httpx.get(f"{api_url.rstrip('/')}/healthz", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def wait_until_healthy(
    api_url: str, process: subprocess.Popen[Any] | None = None, *, timeout_s: float = 60.0, poll_s: float = 0.2
) -> bool:
    """Poll ``/healthz`` until it answers (True), ``process`` exits or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            return False
        if is_healthy(api_url):
            return True
        time.sleep(poll_s)
    return False


def _param(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


class RetryLensClient:
    """Client of one RetryLens API server.

    ``api_key`` is one key, or a mapping project → key (the right key is sent for each
    project; calls that are not about a project send the first one). ``http`` replaces
    the underlying ``httpx.Client`` (tests pass FastAPI's ``TestClient``).
    """

    def __init__(self, base_url: str, api_key: str | Mapping[str, str] | None = None, timeout: float = 10.0,
                 *, http: httpx.Client | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        if api_key is None:
            api_key = os.environ.get(AGENT_API_KEY_ENV) or None
        self._keys: dict[str, str] = dict(api_key) if isinstance(api_key, Mapping) else {}
        self._key: str | None = api_key if isinstance(api_key, str) else next(iter(self._keys.values()), None)
        self._http = http or httpx.Client(timeout=timeout)
        self._owns_http = http is None

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> RetryLensClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------------------
    def _headers(self, project: str | None) -> dict[str, str]:
        key = self._keys.get(project, self._key) if project is not None else self._key
        return {"X-API-Key": key} if key else {}

    def _request(self, method: str, path: str, *, project: str | None = None, params: Mapping[str, Any] | None = None,
                 json: Any = None, headers: Mapping[str, str] | None = None) -> httpx.Response:
        url = f"{self.base_url}{path}"
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        response = self._http.request(method, url, params=query, json=json,
                                      headers={**self._headers(project), **(headers or {})})
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise ApiError(response.status_code, detail, url)
        return response

    def _get(self, path: str, project: str | None = None, **params: Any) -> Any:
        return self._request("GET", path, project=project, params=params).json()

    @staticmethod
    def _p(project: str | None) -> str:
        """A project's routes; ``None``: the fleet routes (every project the key may read)."""
        return "/v1/fleet" if project is None else f"/v1/projects/{_quote(project)}"

    @staticmethod
    def _filters(filters: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(filters) - set(FILTERS)
        if unknown:
            raise TypeError(f"unknown filter(s) {sorted(unknown)}; use {', '.join(FILTERS)}")
        return dict(filters)

    # -- operations ----------------------------------------------------------------------
    def healthz(self) -> dict[str, Any]:
        """``{"status": "ok", "version", "uptime_s", "store": "embedded"|"server", "ingest": "spool"|"kafka", ...}``."""
        return self._get("/healthz")

    def projects(self) -> list[str]:
        """Projects the key(s) may read (with the local token: every project with data or a key)."""
        if self._keys and len(self._keys) > 1:
            return sorted(self._keys)
        return self._get("/v1/projects")["projects"]

    # -- metrics (``project=None``: over every project the key may read, ``/v1/fleet``) ---
    def metrics(self, project: str | None, *, source: str = "rollup", **filters: Any) -> dict[str, Any]:
        """The metrics dict of the slice (``source="raw"`` computes from raw events, exact)."""
        return self._get(f"{self._p(project)}/metrics", project, source=source, **self._filters(filters))["metrics"]

    def metrics_by(self, project: str | None, dimension: str, *, source: str = "rollup", limit: int = 100,
                   **filters: Any) -> list[dict[str, Any]]:
        """``[{"value": str, "metrics": metrics dict}]`` per value of ``dimension`` (agent, phase,
        error_type, policy_version, project), busiest first."""
        return self._get(f"{self._p(project)}/metrics/by/{dimension}", project, source=source, limit=limit,
                         **self._filters(filters))

    def trend(self, project: str | None, *, bucket: str = "1h", source: str = "rollup", **filters: Any) -> list[dict[str, Any]]:
        """``[{"bucket": iso time, "metrics": metrics dict}]`` oldest first; ``bucket`` is 5m, 1h, 1d or 1w.
        Buckets without events are absent."""
        return self._get(f"{self._p(project)}/metrics/trend", project, bucket=bucket, source=source,
                         **self._filters(filters))

    def failure_types(self, project: str | None, *, source: str = "rollup", **filters: Any) -> list[dict[str, Any]]:
        """``[{"error_type": str, "failures": int, "share": float}]`` most frequent first (shares sum to 1)."""
        return self._get(f"{self._p(project)}/failure-types", project, source=source, **self._filters(filters))

    def handoffs(self, project: str | None, *, limit: int = 50, offset: int = 0, **filters: Any) -> list[dict[str, Any]]:
        """Hand-offs newest first: ``[{"project", "task_id", "correlation_id", "ts", "agent", "phase",
        "error_type", "reason", "policy_version", "trace_id"}]``."""
        return self._get(f"{self._p(project)}/handoffs", project, limit=limit, offset=offset, **self._filters(filters))

    # -- tasks ---------------------------------------------------------------------------
    def tasks(self, project: str | None, *, only_retried: bool = False, limit: int = 100, offset: int = 0,
              **filters: Any) -> list[dict[str, Any]]:
        """Tasks, most expensive retries first: ``[{"project", "task_id", "attempts", "failures", "cost_usd",
        "tokens", "failed_cost_usd", "retry_cost_usd", "failed_tokens", "retry_tokens", "outcome"}]``."""
        return self._get(f"{self._p(project)}/tasks", project, only_retried=only_retried, limit=limit,
                         offset=offset, **self._filters(filters))

    def search_tasks(self, project: str, q: str, *, limit: int = 20) -> list[dict[str, Any]]:
        """Tasks whose task id, a correlation id or a trace id equals ``q``: ``[{"project", "task_id",
        "first_ts", "last_ts", "events", "agent", "attempts", "outcome", "trace_id"}]``, newest first."""
        return self._get(f"{self._p(project)}/tasks/search", project, q=q, limit=limit)

    def task_events(self, project: str, task_id: str) -> list[dict[str, Any]]:
        """One task's events in order (``[]`` if unknown). Each is a stored row: every ``events`` column
        (``event_id``, ``ts``, ``attempt``, ``phase``, ``kind``, ``error_type``, ``error_message``,
        ``decision``, ``decision_reason``, ``backoff_ms``, ``context_message_count``,
        ``context_token_count``, ``pollution_score``, ``side_effect_keys``, ``cost_usd``, …) with
        ``input_features`` (dict), ``context_snapshot`` (dict with ``message_digests`` and
        ``last_messages``, or ``None``) and ``side_effects`` (list of dicts) decoded."""
        try:
            data = self._get(f"{self._p(project)}/tasks/{_quote(task_id)}/events", project)
        except ApiError as exc:
            if exc.status == 404:
                return []
            raise
        return data["events"]

    # -- failure intelligence ------------------------------------------------------------
    def failure_groups(self, project: str | None, *, include_noise: bool = False, error_type: str | None = None,
                       since: date | None = None, trend_days: int = 1, limit: int = 50,
                       offset: int = 0) -> list[dict[str, Any]]:
        """Groups, most failures first: ``[{"project", "group_id", "error_type", "pattern", "example_message",
        "is_noise", "failures", "tasks", "first_seen", "last_seen", "example_tasks": [task ids],
        "recent_failures", "previous_failures", "daily": [[iso date, count]], "trend": "new"|"rising"|
        "falling"|"steady"|"quiet"}]``; ``project=None``: every project the key may read."""
        return self._get(f"{self._p(project)}/failure-groups", project, include_noise=include_noise,
                         error_type=error_type, since=since, trend_days=trend_days, limit=limit, offset=offset)

    def fingerprints(self, project: str, *, since: date | None = None, min_failures: int = 1,
                     limit: int = 50) -> list[dict[str, Any]]:
        """Most-failing input fingerprints: ``[{"project", "fingerprint", "attempts", "failures", "tasks",
        "tasks_failed", "first_seen", "last_seen", "recent_error_types": [str], "failure_rate",
        "task_failure_rate"}]``."""
        return self._get(f"{self._p(project)}/fingerprints", project, since=since, min_failures=min_failures,
                         limit=limit)

    def fingerprint(self, project: str, fingerprint: str, *, since: date | None = None) -> dict[str, Any]:
        """One fingerprint's history (zeros when never seen): the fields of :meth:`fingerprints` plus
        ``known_bad`` (failed ≥ 3 times)."""
        return self._get(f"{self._p(project)}/fingerprints/{_quote(fingerprint)}", project, since=since)

    def patterns(self, project: str, *, target_phase: str | None = None, min_support: int = 10,
                 min_lift: float = 1.2, limit: int = 20, **filters: Any) -> list[dict[str, Any]]:
        """Input patterns most associated with failure, highest lift first: ``[{"item", "support",
        "failures", "failure_rate", "lift", "description"}]`` (``description`` is the plain-words sentence)."""
        return self._get(f"{self._p(project)}/patterns", project, target_phase=target_phase,
                         min_support=min_support, min_lift=min_lift, limit=limit, **self._filters(filters))

    def pollution_tasks(self, project: str, *, min_score: float = 0.0, limit: int = 100, offset: int = 0,
                        **filters: Any) -> list[dict[str, Any]]:
        """Per-task signals, most polluted first: ``[{"project", "task_id", "duplicate_messages",
        "carried_errors", "repeated_tool_calls", "context_growth", "loop_failures", "sdk_score", "score",
        "retried", "recovered", "looping"}]``."""
        return self._get(f"{self._p(project)}/pollution/tasks", project, min_score=min_score, limit=limit,
                         offset=offset, **self._filters(filters))

    def pollution_report(self, project: str, **filters: Any) -> dict[str, Any]:
        """``{"tasks", "polluted_tasks", "looping_tasks", "effects": [{"signal", "tasks_with", "recovery_with",
        "tasks_without", "recovery_without"}]}``."""
        return self._get(f"{self._p(project)}/pollution/report", project, **self._filters(filters))

    def alerts(self, project: str, *, history_limit: int = 100) -> dict[str, Any]:
        """``{"rules": [{"rule_id", "name", "metric", "op", "threshold", "window_minutes", "where": {slice},
        "per", "min_calls", "webhook_url", "enabled"}], "states": [{"rule_id", "slice_value", "status",
        "value", "threshold", "started_at", "updated_at"}], "firing": [states that fire], "history":
        [{"ts", "rule_id", "rule_name", "slice_value", "status", "value", "threshold", "message",
        "delivered"}]}`` — rules whose slice is this project."""
        return self._get(f"{self._p(project)}/alerts", project, history_limit=history_limit)

    def add_alert_rule(self, project: str, rule: Mapping[str, Any]) -> dict[str, Any]:
        """Create a rule watching ``project``: ``rule`` has ``name``, ``metric``, ``threshold`` and optionally
        ``op``, ``window_minutes``, ``per``, ``min_calls``, ``webhook_url``, ``enabled``, ``agent``, ``phase``,
        ``error_type``, ``policy_version``. Returns the stored rule with its ``rule_id``."""
        return self._request("POST", f"{self._p(project)}/alerts/rules", project=project, json=dict(rule)).json()

    def update_alert_rule(self, project: str, rule_id: str, rule: Mapping[str, Any]) -> dict[str, Any]:
        """Replace a rule's settings (the same fields as :meth:`add_alert_rule`)."""
        return self._request("PUT", f"{self._p(project)}/alerts/rules/{_quote(rule_id)}", project=project,
                             json=dict(rule)).json()

    def delete_alert_rule(self, project: str, rule_id: str) -> dict[str, Any]:
        """Delete a rule: ``{"deleted": rule_id}``."""
        return self._request("DELETE", f"{self._p(project)}/alerts/rules/{_quote(rule_id)}", project=project).json()

    def prechecks(self, project: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """Recent stored pre-checks with their tasks' outcomes (newest first): ``[{"precheck_id", "ts",
        "project", "agent", "task_id", "input_fingerprint", "risk", "model_version", "known_bad",
        "advice": [kind], "max_attempts", "explanation": {...}, "outcome", "failed", "applied",
        "cost_usd"}]`` (``failed``/``applied`` are null until the task reports)."""
        return self._get(f"{self._p(project)}/prechecks", project, limit=limit)

    def precheck_monitor(self, project: str | None, *, days: int = 30, bucket_hours: int = 0) -> dict[str, Any]:
        """The risk model on real outcomes, for one project or (``None``) every project the key reads;
        ``bucket_hours`` 0 sizes the buckets to the data, as the server does.

        ``{"over_time": [{"bucket", "prechecks", "judged", "mean_risk", "observed", "calibration_gap",
        "calibration_error", "precheck_auc", "precheck_brier"}], "advice": [{"advice", "followed", "tasks", "failure_rate",
        "handoff_rate", "mean_risk", "cost_per_task"}]}``: the risk model on real outcomes."""
        return self._get(f"{self._p(project)}/prechecks/monitor", project, days=days, bucket_hours=bucket_hours)

    def shadow_reports(self, project: str, **filters: Any) -> dict[str, Any]:
        """``{"available": bool, "report": whatever the evaluation area's provider returns, or None}``."""
        return self._get(f"{self._p(project)}/shadow-reports", project, **self._filters(filters))

    def model(self) -> dict[str, Any]:
        """``{"version": "v0003" or "none", "meta": {"trained_at", "training_window", "source", "features",
        "metrics": {"roc_auc", "pr_auc", "brier", "calibration": [...]}, "baselines": {...}, ...} or None,
        "versions": [all versions]}``."""
        return self._get("/v1/model")

    # -- writes --------------------------------------------------------------------------
    def precheck(self, project: str, agent: str, task_input: str,
                 features: Mapping[str, Any] | None = None, *, task_id: str = "") -> dict[str, Any]:
        """``{"risk", "model_version", "precheck_id", "top_features": [str], "known_bad_fingerprint",
        "recommended": {"max_attempts", "degrade_first", "human_review"}}`` (the SDK's
        ``PrecheckResponse``); ``task_id`` lets the server join the stored pre-check to the task's outcome."""
        body = {"project": project, "agent": agent, "task_input": task_input, "features": dict(features or {})}
        if task_id:
            body["task_id"] = task_id
        return self._request("POST", "/v1/precheck", project=project, json=body).json()

    def ingest(self, events: Iterable[Any], *, project: str | None = None) -> dict[str, Any]:
        """Send events (dicts or ``RetryEvent`` s): ``{"accepted": int, "rejected": [{"index", "reason",
        "detail"}], "road": "spool"|"kafka"}``."""
        items = [e.model_dump(mode="json") if hasattr(e, "model_dump") else e for e in events]
        return self._request("POST", "/v1/events", project=project, json={"events": items}).json()

    def agent_policy(self, project: str, agent: str, *, etag: str | None = None) -> tuple[int, str | None, Any]:
        """The policy an agent should run: ``(status, etag, data)``; ``data`` is ``None`` on a
        304 (unchanged since ``etag``) or 404 (no policy stored). Other errors raise."""
        url = f"{self.base_url}/v1/policies/{_quote(project)}/{_quote(agent)}"
        headers = {**self._headers(project), **({"If-None-Match": etag} if etag else {})}
        response = self._http.get(url, headers=headers)
        if response.status_code in (304, 404):
            return response.status_code, etag, None
        if response.status_code >= 400:
            raise ApiError(response.status_code, response.text, url)
        return response.status_code, response.headers.get("etag"), response.json()

    def project_policies(self, project: str) -> dict[str, Any]:
        """``{"project", "default": policy record or None, "agents": [record summaries], "kill_switch":
        {"project": bool, "agents": [str], "reasons": {agent or "*": reason}}}``."""
        return self._get(f"/v1/policies/{_quote(project)}", project)

    def policy(self, project: str, agent: str) -> dict[str, Any] | None:
        """The effective policy document the agent would poll, or ``None`` when none is configured."""
        try:
            return self._get(f"/v1/policies/{_quote(project)}/{_quote(agent)}", project)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def put_policy(self, project: str, policy: Mapping[str, Any], agent: str | None = None) -> dict[str, Any]:
        """Store a new revision (agent ``None`` = project default): ``{"project", "agent", "revision",
        "policy_id", "policy_version", "created_at", "policy"}``. A 422 :class:`ApiError` names the bad field."""
        path = f"/v1/policies/{_quote(project)}" + (f"/{_quote(agent)}" if agent else "")
        return self._request("PUT", path, project=project, json=dict(policy)).json()

    def policy_history(self, project: str, agent: str, *, limit: int = 50) -> list[dict[str, Any]]:
        """Revisions of an agent's policy, newest first (records as in :meth:`put_policy`)."""
        return self._get(f"/v1/policies/{_quote(project)}/{_quote(agent)}/history", project, limit=limit)

    def kill_switch(self, project: str) -> dict[str, Any]:
        """``{"project": bool, "agents": [str], "reasons": {...}}``."""
        return self._get(f"/v1/kill-switch/{_quote(project)}", project)

    def set_kill_switch(self, project: str, enabled: bool, *, agent: str | None = None,
                        reason: str = "") -> dict[str, Any]:
        """Flip the switch for the project (``agent=None``) or one agent; returns :meth:`kill_switch`."""
        path = f"/v1/kill-switch/{_quote(project)}" + (f"/{_quote(agent)}" if agent else "")
        return self._request("PUT", path, project=project, json={"enabled": enabled, "reason": reason}).json()


def _quote(segment: str) -> str:
    from urllib.parse import quote

    return quote(segment, safe="")
