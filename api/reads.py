"""Read endpoints: metrics, trends, failures, tasks, fingerprints, patterns, pollution, alerts.

Every route is scoped to one project the caller's key may read (see :mod:`.auth`) and
calls the analytics layer, which binds every filter value as a query parameter. Return
shapes are documented on :class:`retrylens.sdk.transport.client.RetryLensClient`, which mirrors
these routes one method each.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request

from retrylens.analytics import advice_effects, prechecks
from retrylens.analytics import alerts as alerting
from retrylens.analytics.advice_book import book_for_projects
from retrylens.analytics.alert_delivery import annotate_history
from retrylens.analytics.alert_outbox import Outbox
from retrylens.analytics.failure_groups import failure_groups
from retrylens.analytics.filters import Slice
from retrylens.analytics.fingerprints import fingerprint_stats, top_failing_fingerprints
from retrylens.analytics.metrics import (
    failure_type_distribution,
    metrics_by,
    metrics_summary,
    metrics_trend,
    recent_handoffs,
    task_costs,
)
from retrylens.analytics.model_store import ModelStore, models_dir
from retrylens.analytics.model_weights import feature_weights, recent_input_features
from retrylens.analytics.patterns import failure_patterns
from retrylens.analytics.pollution import pollution_report, task_pollution
from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .auth import Principal, principal, project_access
from .params import FilterText, Limit, Offset, Since, describe_slice, parse_date, slice_params
from .serialize import event_row, plain
from .shadow import find_provider

router = APIRouter(prefix="/v1", tags=["read"])

Source = Annotated[Literal["rollup", "raw"], Query(description="rollup (fast) or raw events (exact drill-down).")]
Dimension = Literal["project", "agent", "phase", "error_type", "policy_version"]
BucketName = Literal["5m", "1h", "1d", "1w"]
SearchText = Annotated[str, Query(min_length=1, max_length=256, description="Task id, correlation id or trace id.")]


def get_store(request: Request) -> EventStore:
    return request.app.state.store


StoreDep = Annotated[EventStore, Depends(get_store)]
SliceDep = Annotated[Slice, Depends(slice_params)]
ProjectDep = Annotated[str, Depends(project_access)]


@router.get("/projects", summary="Projects this key may read")
def projects(request: Request, who: Principal = Depends(principal)) -> dict[str, Any]:
    if who.projects is None:
        store: EventStore = request.app.state.store
        with_data = {s.value for s in metrics_by(store, "project", limit=10_000)}
        return {"projects": sorted(with_data | set(request.app.state.settings.api_keys)), "all_projects": True}
    return {"projects": sorted(who.projects), "all_projects": False}


@router.get("/projects/{project}/metrics", summary="Headline retry metrics of a slice")
def get_metrics(store: StoreDep, where: SliceDep, source: Source = "rollup") -> dict[str, Any]:
    return {"slice": plain(describe_slice(where)), "metrics": plain(metrics_summary(store, where, source=source))}


@router.get("/projects/{project}/metrics/by/{dimension}", summary="Metrics per value of a dimension")
def get_metrics_by(
    store: StoreDep, where: SliceDep, dimension: Annotated[Dimension, Path()], source: Source = "rollup",
    limit: Limit = 100,
) -> list[dict[str, Any]]:
    return [{"value": s.value, "metrics": plain(s.metrics)} for s in metrics_by(store, dimension, where,
                                                                                 source=source, limit=limit)]


@router.get("/projects/{project}/metrics/trend", summary="Metrics per time bucket, oldest first")
def get_trend(store: StoreDep, where: SliceDep, bucket: BucketName = "1h", source: Source = "rollup") -> list[dict[str, Any]]:
    return [{"bucket": plain(p.bucket), "metrics": plain(p.metrics)}
            for p in metrics_trend(store, where, bucket=bucket, source=source)]


@router.get("/projects/{project}/failure-types", summary="Failed attempts per error type")
def get_failure_types(store: StoreDep, where: SliceDep, source: Source = "rollup") -> list[dict[str, Any]]:
    return plain(failure_type_distribution(store, where, source=source))


@router.get("/projects/{project}/handoffs", summary="Hand-offs to a human, newest first")
def get_handoffs(store: StoreDep, where: SliceDep, limit: Limit = 50, offset: Offset = 0) -> list[dict[str, Any]]:
    return plain(recent_handoffs(store, where, limit=limit, offset=offset))


@router.get("/projects/{project}/tasks", summary="Tasks with what they spent, most expensive retries first")
def get_tasks(
    store: StoreDep, where: SliceDep, only_retried: bool = False, limit: Limit = 100, offset: Offset = 0,
) -> list[dict[str, Any]]:
    return plain(task_costs(store, where, only_retried=only_retried, limit=limit, offset=offset))


_SEARCH = (
    "SELECT project, task_id, min(ts) AS first_ts, max(ts) AS last_ts, count() AS events,"
    " any(agent_name) AS agent, max(attempt) AS attempts,"
    " argMaxIf(toString(outcome), ts, outcome != '') AS outcome,"  # incl. compact first-try successes
    " anyIf(trace_id, trace_id != '') AS trace_id"
    " FROM [[db]].events FINAL WHERE project = {project:String} AND task_id IN ("
    "  SELECT task_id FROM [[db]].events WHERE project = {project:String}"
    "  AND (task_id = {q:String} OR correlation_id = {q:String} OR trace_id = {q:String}))"
    " GROUP BY project, task_id ORDER BY last_ts DESC, task_id LIMIT {limit:UInt32}"
)


@router.get("/projects/{project}/tasks/search", summary="Find tasks by task id, correlation id or trace id")
def search_tasks(store: StoreDep, project: ProjectDep, q: SearchText, limit: Limit = 20) -> list[dict[str, Any]]:
    rows = query_rows(store.client, store.sql(_SEARCH), {"project": project, "q": q, "limit": limit})
    return plain(rows)


@router.get("/projects/{project}/tasks/{task_id}/events", summary="One task's events in order (its timeline)")
def get_task_events(
    store: StoreDep, project: ProjectDep, task_id: Annotated[str, Path(min_length=1, max_length=256)],
) -> dict[str, Any]:
    rows = store.task_events(project, task_id)
    if not rows:
        raise HTTPException(404, f"task {task_id!r} not found in project {project!r}")
    return {"project": project, "task_id": task_id, "events": [event_row(r) for r in rows]}


@router.get("/projects/{project}/failure-groups", summary="Failure groups (normalised messages)")
def get_failure_groups(
    store: StoreDep, project: ProjectDep, include_noise: bool = False, error_type: FilterText = None,
    since: Since = None, trend_days: Annotated[int, Query(ge=1, le=365)] = 1, limit: Limit = 50,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    found = failure_groups(store, project, include_noise=include_noise, error_type=error_type,
                           since=parse_date(since), trend_days=trend_days, limit=limit, offset=offset)
    return plain(found)


@router.get("/projects/{project}/fingerprints", summary="Input fingerprints with the most failures")
def get_fingerprints(
    store: StoreDep, project: ProjectDep, since: Since = None,
    min_failures: Annotated[int, Query(ge=0, le=1_000_000)] = 1, limit: Limit = 50,
) -> list[dict[str, Any]]:
    found = top_failing_fingerprints(store, project, since=parse_date(since),
                                     min_failures=min_failures, limit=limit)
    return plain(found)


@router.get("/projects/{project}/fingerprints/{fingerprint}", summary="Failure history of one input fingerprint")
def get_fingerprint(
    store: StoreDep, project: ProjectDep, fingerprint: Annotated[str, Path(min_length=1, max_length=128)],
    since: Since = None,
) -> dict[str, Any]:
    stats = fingerprint_stats(store, project, fingerprint, since=parse_date(since))
    return {**plain(stats), "known_bad": stats.known_bad()}


@router.get("/projects/{project}/patterns", summary="Input patterns most associated with failure")
def get_patterns(
    store: StoreDep, where: SliceDep, target_phase: FilterText = None,
    min_support: Annotated[int, Query(ge=1, le=1_000_000)] = 10,
    min_lift: Annotated[float, Query(ge=0, le=1000)] = 1.2, limit: Limit = 20,
) -> list[dict[str, Any]]:
    found = failure_patterns(store, where, phase=target_phase, min_support=min_support, min_lift=min_lift, limit=limit)
    return plain(found)


@router.get("/projects/{project}/pollution/tasks", summary="Per-task pollution and loop signals")
def get_pollution_tasks(
    store: StoreDep, where: SliceDep, min_score: Annotated[float, Query(ge=0, le=1)] = 0.0,
    limit: Limit = 100, offset: Offset = 0,
) -> list[dict[str, Any]]:
    return plain(task_pollution(store, where, min_score=min_score, limit=limit, offset=offset))


@router.get("/projects/{project}/pollution/report", summary="How each pollution signal relates to retry success")
def get_pollution_report(store: StoreDep, where: SliceDep) -> dict[str, Any]:
    return plain(pollution_report(store, where))


@router.get("/projects/{project}/alerts", summary="Alert rules of the project, their states and history")
def get_alerts(request: Request, store: StoreDep, project: ProjectDep, history_limit: Limit = 100) -> dict[str, Any]:
    rules = [r for r in alerting.list_rules(store) if r.where.project == project]
    states = [s for r in rules for s in alerting.alert_states(store, r.rule_id)]
    ids = alerting.project_rule_ids(store, project)  # deleted rules' history is the project's too
    history = alerting.alert_history(store, limit=history_limit, rule_ids=ids)
    outbox = Outbox.in_data_dir(request.app.state.settings.data_dir)
    try:
        history = annotate_history(history, outbox.deliveries(project=project, rule_ids=ids, limit=history_limit * 4))
    finally:
        outbox.close()
    return {
        "rules": plain(rules),
        "states": plain(states),
        "firing": plain([s for s in states if s["status"] == "firing"]),
        "history": plain(history),
    }


@router.get("/projects/{project}/prechecks",
            summary="Recent pre-checks (stored) with their tasks' outcomes and whether the advice was followed")
def get_prechecks(request: Request, store: StoreDep, project: ProjectDep, limit: Limit = 100) -> list[dict[str, Any]]:
    request.app.state.precheck_log.flush()  # what this server answered a moment ago is part of "recent"
    return plain(prechecks.recent_prechecks(store, project, limit=limit))


@router.get("/projects/{project}/prechecks/monitor",
            summary="The risk model on real outcomes over time (calibration, AUC, Brier) and advice followed vs "
            "outcome")
def get_precheck_monitor(request: Request, store: StoreDep, project: ProjectDep,
                         days: int = Query(30, ge=1, le=400),
                         bucket_hours: int = Query(0, ge=0, le=24 * 31, description=(
                             "Hours per point; 0 sizes the buckets to the judged pre-checks (an hour to a week)")),
                         ) -> dict[str, Any]:
    request.app.state.precheck_log.flush()
    return {"over_time": plain(prechecks.calibration_over_time(store, project, days=days, bucket_hours=bucket_hours)),
            "advice": plain(prechecks.advice_vs_outcome(store, project, days=days))}


@router.get("/projects/{project}/prechecks/advice-effects",
            summary="Each advice kind's measured effect (given vs withheld: success, cost, hand-offs with 95 % "
            "CIs) and the kinds retired for not helping")
def get_advice_effects(request: Request, store: StoreDep, project: ProjectDep) -> dict[str, Any]:
    request.app.state.precheck_log.flush()
    effects = advice_effects.advice_effects(store, project=project)
    model = request.app.state.scorer.current_model()
    book = (model.meta.get("advice_book") or {}) if model is not None else {}
    return {"holdout_share": request.app.state.settings.advice_holdout_share, "effects": plain(effects),
            "retired_now": advice_effects.retired(effects),
            # what the model in force retires (measured when it was trained): what pre-checks do today
            "retired_in_force": book.get("retired") or {},
            "model_version": model.version if model is not None else "none"}


@router.get("/projects/{project}/shadow-reports", summary="Shadow-policy reports (from the evaluation area)")
def get_shadow_reports(request: Request, store: StoreDep, where: SliceDep) -> dict[str, Any]:
    provider = find_provider(request.app.state.shadow_reports)
    if provider is None:
        return {"available": False, "report": None}
    return {"available": True, "report": plain(provider(store, where))}


@router.get(
    "/model",
    summary="The risk model in force: version, metrics vs baselines, calibration, and the weights "
    "of the features in the caller's projects' recent inputs",
)
def get_model(request: Request, store: StoreDep, who: Principal = Depends(principal)) -> dict[str, Any]:
    models = ModelStore(models_dir(request.app.state.settings))
    version = models.current_version()
    meta = _meta_for(models.meta(version), who) if version else None
    loaded = request.app.state.scorer.current_model() if version else None
    weights = (
        feature_weights(loaded.model, recent_input_features(store, projects=who.projects))
        if loaded is not None
        else []
    )
    return {
        "version": version or "none",
        "meta": plain(meta),
        "versions": models.versions(),
        "feature_weights": [[name, weight] for name, weight in weights],
    }


def _meta_for(meta: dict[str, Any], who: Principal) -> dict[str, Any]:
    """The model's meta as ``who`` may read it: its advice book cut to the caller's projects."""
    if "advice_book" not in meta:
        return meta
    return {**meta, "advice_book": book_for_projects(meta["advice_book"] or {}, who.projects)}
