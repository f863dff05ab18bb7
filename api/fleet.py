"""Fleet reads: the first screen's figures over every project the caller's key may read.

``/v1/fleet/…`` mirrors the per-project reads of :mod:`.reads` (metrics, metrics by
dimension, trend, failure types, hand-offs, tasks, failure groups, the pre-check monitor) with the project left open: the local
token reads every project, a project key its own. An operator with several projects sees
their totals in one answer (the dashboard's "All projects") instead of adding up rates,
which cannot be added. The slice of the answer names the projects it covered.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request

from retrylens.analytics import prechecks
from retrylens.analytics.failure_groups import failure_groups
from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import (
    failure_type_distribution,
    metrics_by,
    metrics_summary,
    metrics_trend,
    recent_handoffs,
    task_costs,
)

from .auth import Principal, principal
from .params import (
    FilterText,
    Limit,
    Offset,
    Since,
    TimeText,
    describe_slice,
    parse_date,
    parse_time,
)
from .reads import BucketName, Dimension, Source, StoreDep
from .serialize import plain

router = APIRouter(prefix="/v1/fleet", tags=["read"])


def fleet_slice(
    who: Principal = Depends(principal),
    agent: FilterText = None,
    phase: FilterText = None,
    error_type: FilterText = None,
    policy_version: FilterText = None,
    start: TimeText = None,
    end: TimeText = None,
) -> Slice:
    """The caller's projects (all of them for the local token) with the filters asked for."""
    projects = None if who.projects is None else tuple(who.projects)
    return Slice(projects=projects, agent=agent, phase=phase, error_type=error_type,
                 policy_version=policy_version, start=parse_time(start), end=parse_time(end))


FleetDep = Annotated[Slice, Depends(fleet_slice)]


def _described(store: Any, where: Slice) -> dict[str, Any]:
    """The slice as answered: the projects it covered, by name."""
    covered = where.projects if where.projects is not None else sorted(
        s.value for s in metrics_by(store, "project", where.with_(agent=None, phase=None, error_type=None,
                                                                  policy_version=None), limit=10_000) if s.value)
    return {**describe_slice(where), "projects": list(covered)}


@router.get("/metrics", summary="Headline retry metrics over every project the key may read")
def get_metrics(store: StoreDep, where: FleetDep, source: Source = "rollup") -> dict[str, Any]:
    return {"slice": plain(_described(store, where)), "metrics": plain(metrics_summary(store, where, source=source))}


@router.get("/metrics/by/{dimension}", summary="Fleet metrics per value of a dimension")
def get_metrics_by(store: StoreDep, where: FleetDep, dimension: Annotated[Dimension, Path()],
                   source: Source = "rollup", limit: Limit = 100) -> list[dict[str, Any]]:
    return [{"value": s.value, "metrics": plain(s.metrics)}
            for s in metrics_by(store, dimension, where, source=source, limit=limit)]


@router.get("/metrics/trend", summary="Fleet metrics per time bucket, oldest first")
def get_trend(store: StoreDep, where: FleetDep, bucket: BucketName = "1h",
              source: Source = "rollup") -> list[dict[str, Any]]:
    return [{"bucket": plain(p.bucket), "metrics": plain(p.metrics)}
            for p in metrics_trend(store, where, bucket=bucket, source=source)]


@router.get("/failure-types", summary="Failed attempts per error type over the fleet")
def get_failure_types(store: StoreDep, where: FleetDep, source: Source = "rollup") -> list[dict[str, Any]]:
    return plain(failure_type_distribution(store, where, source=source))


@router.get("/handoffs", summary="Hand-offs to a human in every project, newest first")
def get_handoffs(store: StoreDep, where: FleetDep, limit: Limit = 50, offset: Offset = 0) -> list[dict[str, Any]]:
    return plain(recent_handoffs(store, where, limit=limit, offset=offset))


@router.get("/tasks", summary="Tasks of every project, most expensive retries first")
def get_tasks(store: StoreDep, where: FleetDep, only_retried: bool = False, limit: Limit = 100,
              offset: Offset = 0) -> list[dict[str, Any]]:
    return plain(task_costs(store, where, only_retried=only_retried, limit=limit, offset=offset))


@router.get("/failure-groups", summary="Failure groups of every project the key may read, most failures first")
def get_failure_groups(store: StoreDep, who: Principal = Depends(principal), include_noise: bool = False,
                       error_type: FilterText = None, since: Since = None,
                       trend_days: Annotated[int, Query(ge=1, le=365)] = 1, limit: Limit = 50,
                       offset: Offset = 0) -> list[dict[str, Any]]:
    """The per-project groups of each project the caller reads (a message seen in two projects is
    two groups, each naming its project)."""
    projects = None if who.projects is None else tuple(who.projects)
    return plain(failure_groups(store, projects, include_noise=include_noise, error_type=error_type,
                                since=parse_date(since), trend_days=trend_days, limit=limit, offset=offset))


@router.get("/prechecks/monitor",
            summary="The risk model on real outcomes over time and advice followed vs outcome, over every "
            "project the key may read")
def get_precheck_monitor(request: Request, store: StoreDep, who: Principal = Depends(principal),
                         days: int = Query(30, ge=1, le=400),
                         bucket_hours: int = Query(0, ge=0, le=24 * 31, description=(
                             "Hours per point; 0 sizes the buckets to the judged pre-checks (an hour to a week)")),
                         ) -> dict[str, Any]:
    """The per-project monitor's figures with the caller's projects pooled (AUC and calibration
    cannot be averaged over projects, so they are computed on the pooled pre-checks)."""
    request.app.state.precheck_log.flush()
    projects = None if who.projects is None else sorted(who.projects)
    return {"over_time": plain(prechecks.calibration_over_time(store, projects, days=days, bucket_hours=bucket_hours)),
            "advice": plain(prechecks.advice_vs_outcome(store, projects, days=days)),
            "projects": "all" if projects is None else projects}
