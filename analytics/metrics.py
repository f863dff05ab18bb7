"""Retry metrics computed in ClickHouse, from the rollups (first screen) or raw events (drill-down).

Definitions (attempts are numbered from 1; attempt ≥ 2 is a retry). Counts are distinct
attempts (project, task, correlation id) or tasks, so a re-sent event never counts twice:

- ``retry_rate`` = retries / calls (calls = attempts started or finished)
- ``retry_success_rate`` = retries that succeeded / retries
- ``mean_retry_duration_ms``, ``p95_retry_duration_ms``: latency of retry attempts
- ``p95_backoff_ms``: backoff of decisions that waited
- ``degradation_rate`` = attempts with a degrade decision / failed attempts
- ``handoff_rate`` = attempts handed to a human / failed attempts
- ``recovery_rate`` = tasks that succeeded on a retry / tasks retried
- cost and tokens of failed attempts and of retry attempts, and per retried task
- ``budget_exhaustions``: attempts that failed with ``budget_exhausted``

Both sources use the same measure definitions (:data:`MEASURES` of migration 0002), so
counts, means, costs and tokens agree exactly; the rollups align a time range to whole
5-minute buckets, and their p95s come from log-spaced histograms, within 1 % (relative) of
the raw source's exact p95s (:mod:`.histogram`). The rollup source reads sealed buckets as
plain counters and open ones as set states (:mod:`.rollup_query`, :mod:`.sealing`), so its
cost does not grow with the event count; whole closed days and hours come from the daily and
hourly levels unless a trend splits them. Costs are summed as whole nano-dollars in every
source, so the sums do not depend on order.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any, Literal

from retrylens.store import EventStore
from retrylens.store.migrations.m0002_rollups import BUCKET_SECONDS, MEASURES
from retrylens.store.sql import query_rows

from .filters import Bucket, Slice, bucket_of, dimension_of
from .rollup_query import nano_usd, rollup_rows

Source = Literal["rollup", "raw"]
_COUNTS = tuple(m.name for m in MEASURES if m.function == "uniqExact")


@dataclass(frozen=True)
class Metrics:
    """Counts and derived metrics of one slice; a ratio with a zero denominator is ``None``."""

    calls: int = 0
    failures: int = 0
    retries: int = 0
    retry_successes: int = 0
    degrades: int = 0
    handoffs: int = 0
    budget_exhaustions: int = 0
    tasks: int = 0
    tasks_retried: int = 0
    tasks_recovered: int = 0
    tasks_handed_off: int = 0
    retry_rate: float | None = None
    retry_success_rate: float | None = None
    mean_retry_duration_ms: float | None = None
    p95_retry_duration_ms: float | None = None
    p95_backoff_ms: float | None = None
    degradation_rate: float | None = None
    handoff_rate: float | None = None
    recovery_rate: float | None = None
    failed_cost_usd: float = 0.0
    failed_tokens: int = 0
    retry_cost_usd: float = 0.0
    retry_tokens: int = 0
    retry_cost_per_retried_task_usd: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Every metric an alert rule may watch.
METRIC_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Metrics))


@dataclass(frozen=True)
class TrendPoint:
    bucket: datetime
    metrics: Metrics


@dataclass(frozen=True)
class SliceMetrics:
    value: str
    metrics: Metrics


@dataclass(frozen=True)
class ErrorTypeShare:
    error_type: str
    failures: int
    share: float


@dataclass(frozen=True)
class TaskCost:
    """What one task spent, and how much of it went on failed and retry attempts."""

    project: str
    task_id: str
    attempts: int
    failures: int
    cost_usd: float
    tokens: int
    failed_cost_usd: float
    retry_cost_usd: float
    failed_tokens: int
    retry_tokens: int
    outcome: str


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def _float(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _metrics(row: dict[str, Any]) -> Metrics:
    counts = {name: int(row[name]) for name in _COUNTS}
    return Metrics(
        **counts,
        retry_rate=_ratio(counts["retries"], counts["calls"]),
        retry_success_rate=_ratio(counts["retry_successes"], counts["retries"]),
        mean_retry_duration_ms=_float(row["mean_retry_ms"]),
        p95_retry_duration_ms=_float(row["p95_retry_ms"]),
        p95_backoff_ms=_float(row["p95_backoff_ms"]),
        degradation_rate=_ratio(counts["degrades"], counts["failures"]),
        handoff_rate=_ratio(counts["handoffs"], counts["failures"]),
        recovery_rate=_ratio(counts["tasks_recovered"], counts["tasks_retried"]),
        failed_cost_usd=float(row["failed_cost"]),
        failed_tokens=int(row["failed_tokens"]),
        retry_cost_usd=float(row["retry_cost"]),
        retry_tokens=int(row["retry_tokens"]),
        retry_cost_per_retried_task_usd=_ratio(float(row["retry_cost"]), counts["tasks_retried"]),
    )


def _aligned(where: Slice) -> Slice:
    """The slice widened to whole rollup buckets."""
    start = end = None
    if where.start is not None:
        start = datetime.fromtimestamp(
            where.start.timestamp() // BUCKET_SECONDS * BUCKET_SECONDS, tz=where.start.tzinfo
        )
    if where.end is not None:
        end = datetime.fromtimestamp(
            -(-where.end.timestamp() // BUCKET_SECONDS) * BUCKET_SECONDS, tz=where.end.tzinfo
        )
    return where.with_(start=start, end=end)


def _raw_inner(
    store: EventStore, where: Slice, group: str, counts: tuple[str, ...] | None = None
) -> tuple[str, dict[str, Any]]:
    """SELECT of the measures (``counts``: only these) per ``group`` expression (``'all'`` for
    one row) from raw events."""
    clause, params = where.where(time_column="ts")
    states = ", ".join(
        f"{'uniqExact' if m.function == 'uniqExact' else 'groupArray'}If({m.value}, {m.condition}) AS {m.name}"
        for m in MEASURES
        if counts is None or m.name in counts
    )
    sql = f"SELECT {group} AS g, {states} FROM [[db]].events FINAL WHERE {clause} GROUP BY g"
    return store.sql(sql), params


_DERIVED = (
    "if(empty(retry_latency), NULL, arrayAvg(x -> toFloat64(x.2), retry_latency)) AS mean_retry_ms, "
    "if(empty(retry_latency), NULL, "
    "toFloat64(arrayReduce('quantileExactInclusive(0.95)', arrayMap(x -> x.2, retry_latency)))) AS p95_retry_ms, "
    "if(empty(backoff), NULL, "
    "toFloat64(arrayReduce('quantileExactInclusive(0.95)', arrayMap(x -> x.2, backoff)))) AS p95_backoff_ms, "
    f"arraySum(x -> if(x.4, {nano_usd('x.2')}, 0), attempt_costs) / 1e9 AS failed_cost, "
    "arraySum(x -> if(x.4, x.3, 0), attempt_costs) AS failed_tokens, "
    f"arraySum(x -> if(x.5, {nano_usd('x.2')}, 0), attempt_costs) / 1e9 AS retry_cost, "
    "arraySum(x -> if(x.5, x.3, 0), attempt_costs) AS retry_tokens"
)


def _query(
    store: EventStore,
    where: Slice,
    source: Source,
    group: str,
    order: str = "g",
    *,
    group_seconds: int | None = None,
    counts: tuple[str, ...] | None = None,
) -> list[dict[str, Any]]:
    """Rows per ``group``; ``group_seconds``: the size of the time buckets ``group`` makes, so that
    the rollups read only levels it never splits. ``counts``: compute only these counts (no
    latencies, backoffs, costs or tokens), for callers that need nothing else."""
    if source == "rollup":
        aligned = _aligned(where)
        if counts is not None:
            return rollup_rows(store, aligned, group, order, group_seconds=group_seconds, measures=counts, values=False)
        return rollup_rows(store, aligned, group, order, group_seconds=group_seconds)
    if source != "raw":
        raise ValueError(f"unknown source {source!r}; choose 'rollup' or 'raw'")
    inner, params = _raw_inner(store, where, group, counts)
    names = ", ".join(counts or _COUNTS)
    derived = "" if counts is not None else f", {_DERIVED}"
    sql = f"SELECT g, {names}{derived} FROM ({inner}) ORDER BY {order}"
    return query_rows(store.client, sql, params)


def metrics_summary(store: EventStore, where: Slice = Slice(), *, source: Source = "rollup") -> Metrics:
    """All metrics of one slice (the first screen's headline numbers)."""
    rows = _query(store, where, source, "'all'")
    return _metrics(rows[0]) if rows else Metrics()


def metrics_by(
    store: EventStore, dimension: str, where: Slice = Slice(), *, source: Source = "rollup", limit: int = 100
) -> list[SliceMetrics]:
    """Metrics per value of ``dimension`` (project, agent, phase, error_type, policy_version)."""
    column = dimension_of(dimension)
    rows = _query(store, where, source, column, order="calls DESC, failures DESC, g")
    return [SliceMetrics(str(row["g"]), _metrics(row)) for row in rows[: max(0, int(limit))]]


def metrics_trend(
    store: EventStore, where: Slice = Slice(), *, bucket: str | Bucket = Bucket.HOUR, source: Source = "rollup"
) -> list[TrendPoint]:
    """Metrics per time bucket, oldest first (empty buckets are absent)."""
    size = bucket_of(bucket)
    column = "bucket" if source == "rollup" else "ts"
    group = f"toStartOfInterval({column}, INTERVAL {size.seconds} SECOND, 'UTC')"
    rows = _query(store, where, source, group, group_seconds=size.seconds)
    return [TrendPoint(row["g"], _metrics(row)) for row in rows]


def failure_type_distribution(
    store: EventStore, where: Slice = Slice(), *, source: Source = "rollup"
) -> list[ErrorTypeShare]:
    """Failed attempts per error type, most frequent first, with their share of all failures."""
    rows = [(str(r["g"]), int(r["failures"])) for r in _query(store, where, source, "error_type", counts=("failures",))]
    rows = [(name, n) for name, n in rows if n]
    total = sum(n for _, n in rows)
    rows.sort(key=lambda item: (-item[1], item[0]))
    return [ErrorTypeShare(name, n, n / total) for name, n in rows]


def task_costs(
    store: EventStore, where: Slice = Slice(), *, only_retried: bool = True, limit: int = 100, offset: int = 0
) -> list[TaskCost]:
    """Per task (raw, exact): total spend and the part spent on failed and retry attempts.

    Most expensive retries first; ``only_retried`` keeps tasks with at least one retry.
    """
    clause, params = where.where()
    params.update({"limit": max(0, int(limit)), "offset": max(0, int(offset))})
    having = "HAVING retry_attempts > 0" if only_retried else ""
    sql = store.sql(
        "SELECT project, task_id,"
        " uniqExactIf(correlation_id, kind IN ('attempt_started', 'attempt_failed', 'attempt_succeeded')) AS t_attempts,"
        " uniqExactIf(correlation_id, kind = 'attempt_failed') AS t_failures,"
        " uniqExactIf(correlation_id, kind IN ('attempt_failed', 'attempt_succeeded') AND attempt >= 2) AS retry_attempts,"
        " sumIf(cost_usd, kind IN ('attempt_failed', 'attempt_succeeded')) AS t_cost_usd,"
        " sumIf(toUInt64(tokens_in) + tokens_out, kind IN ('attempt_failed', 'attempt_succeeded')) AS t_tokens,"
        " sumIf(cost_usd, kind = 'attempt_failed') AS t_failed_cost_usd,"
        " sumIf(cost_usd, kind IN ('attempt_failed', 'attempt_succeeded') AND attempt >= 2) AS t_retry_cost_usd,"
        " sumIf(toUInt64(tokens_in) + tokens_out, kind = 'attempt_failed') AS t_failed_tokens,"
        " sumIf(toUInt64(tokens_in) + tokens_out, kind IN ('attempt_failed', 'attempt_succeeded') AND attempt >= 2)"
        " AS t_retry_tokens,"
        " argMaxIf(toString(outcome), ts, outcome != '') AS t_outcome"
        f" FROM [[db]].events FINAL WHERE {clause} GROUP BY project, task_id {having}"
        " ORDER BY t_retry_cost_usd DESC, t_failed_cost_usd DESC, task_id"
        " LIMIT {limit:UInt32} OFFSET {offset:UInt32}"
    )
    return [
        TaskCost(
            project=r["project"], task_id=r["task_id"], attempts=int(r["t_attempts"]), failures=int(r["t_failures"]),
            cost_usd=float(r["t_cost_usd"]), tokens=int(r["t_tokens"]), failed_cost_usd=float(r["t_failed_cost_usd"]),
            retry_cost_usd=float(r["t_retry_cost_usd"]), failed_tokens=int(r["t_failed_tokens"]),
            retry_tokens=int(r["t_retry_tokens"]), outcome=r["t_outcome"],
        )
        for r in query_rows(store.client, sql, params)
    ]


def recent_handoffs(store: EventStore, where: Slice = Slice(), *, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
    """Hand-offs to a human, newest first, one row per hand-off, for the first screen's list.

    Read from the hand-off index (migration 0007), not from ``events``, so the cost follows
    the number of hand-offs. A hand-off is the attempt's ``handoff_human`` decision and the
    task's ``handoff`` event, merged: ``correlation_id`` is the attempt's (the decision's),
    ``reason`` the hand-off event's (it says whether the channel failed), ``error_type`` the
    one either names. The filters apply to those events, as they did on ``events``.
    """
    clause, params = where.where()
    params.update({"limit": max(0, int(limit)), "offset": max(0, int(offset))})
    sql = store.sql(
        "SELECT project, task_id, argMax(correlation_id, kind != 'handoff') AS correlation_id, max(ts) AS ts,"
        " any(agent_name) AS agent, any(phase) AS phase, anyIf(error_type, error_type != '') AS error_type,"
        " argMax(decision_reason, (decision_reason != '', kind = 'handoff')) AS reason,"
        " any(policy_version) AS policy_version, argMax(trace_id, trace_id != '') AS trace_id"
        f" FROM (SELECT * FROM [[db]].handoffs FINAL WHERE {clause})"
        " GROUP BY project, task_id, attempt ORDER BY ts DESC, task_id"
        " LIMIT {limit:UInt32} OFFSET {offset:UInt32}"
    )
    return query_rows(store.client, sql, params)
