"""Retry metrics computed in ClickHouse, from the rollups (first screen) or raw events (drill-down).

Every measure and rate is defined once, in :mod:`.definitions` (an attempt counts once at
its outcome event, a task at the event carrying its outcome, a hand-off at its ``handoff``
event, so re-sent events, compact records and ids never double a count, and trends and
breakdowns add up to the totals); this module only reads them from one of two sources.

Both sources use the same definitions, so
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
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .definitions import (
    COSTED,
    COUNT_NAMES,
    COUNTS,
    ENDED,
    EVENT_KEY,
    IS_RETRY,
    METRIC_NAMES,
    RETRY_OUTCOME,
    WAITED,
    Metrics,
    count,
    metrics_from,
)
from .filters import Bucket, Slice, bucket_of, dimension_of
from .rollup_query import nano_usd, rollup_rows

__all__ = ["METRIC_NAMES", "Metrics", "metrics_by", "metrics_summary", "metrics_trend"]

Source = Literal["rollup", "raw"]
BUCKET_SECONDS = 300
_COUNTS = COUNT_NAMES
#: (name, value, condition) of the event-level values collected by a raw scan.
_VALUES = (
    ("retry_latency", f"({EVENT_KEY}, latency_ms)", RETRY_OUTCOME),
    ("backoff", f"({EVENT_KEY}, backoff_ms)", WAITED),
    (
        "attempt_costs",
        f"({EVENT_KEY}, cost_usd, toUInt64(tokens_in) + tokens_out, kind = 'attempt_failed', {IS_RETRY})",
        COSTED,
    ),
)


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


def _float(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _metrics(row: dict[str, Any]) -> Metrics:
    return metrics_from(
        {name: row[name] for name in _COUNTS},
        {
            "mean_retry_duration_ms": _float(row["mean_retry_ms"]),
            "p95_retry_duration_ms": _float(row["p95_retry_ms"]),
            "p95_backoff_ms": _float(row["p95_backoff_ms"]),
            "failed_cost_usd": row["failed_cost"],
            "failed_tokens": row["failed_tokens"],
            "retry_cost_usd": row["retry_cost"],
            "retry_tokens": row["retry_tokens"],
        },
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
    states = [f"uniqExactIf({c.key}, {c.condition}) AS {c.name}" for c in COUNTS if counts is None or c.name in counts]
    if counts is None:
        states += [f"groupArrayIf({value}, {condition}) AS {name}" for name, value, condition in _VALUES]
    sql = f"SELECT {group} AS g, {', '.join(states)} FROM [[db]].events FINAL WHERE {clause} GROUP BY g"
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
        f" uniqExactIf(attempt, {count('calls').condition}) AS t_attempts,"
        f" uniqExactIf(attempt, {count('failures').condition}) AS t_failures,"
        f" uniqExactIf(attempt, {count('retries').condition}) AS retry_attempts,"
        f" sumIf(cost_usd, {ENDED}) AS t_cost_usd,"
        f" sumIf(toUInt64(tokens_in) + tokens_out, {ENDED}) AS t_tokens,"
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
