"""The rollup read path: sealed counters (closed buckets) plus set states (open buckets).

Cost is O(sealed rows in range) + O(unsealed set states), independent of how many raw
events the sealed buckets hold. A bucket is read from ``metrics_sealed`` (its newest
generation) once it appears in ``metrics_seal_log``, and from ``metrics_5m`` until then.
Distinct counts add the sealed *local* counts to one ``uniqExact`` over the spanning keys
of sealed buckets (``metrics_sealed_open``) and the open buckets' hashes together, so a key
spanning both is counted once.
Hours the query covers whole are read from the hourly level (migration 0006) when the
grouping never splits an hour; the 5-minute rows then serve only the edges.
Quantiles and means come from the exact histograms, computed in ClickHouse: each part's
(value, count) arrays are concatenated and sorted once per group (no map merge, which cost
more than the rest of a query), then interpolated like ``quantileExactInclusive``; only the
results leave the server. Callers that need only counts skip the histograms and costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from retrylens.store import EventStore
from retrylens.store.migrations.m0005_sealed_rollups import COUNT_MEASURES
from retrylens.store.sql import query_rows

P95 = 0.95


def nano_usd(value: str) -> str:
    """``value`` (USD, Float64) as whole nano-dollars: integer sums add up the same in any order,
    so the rollup levels and a raw scan give bit-identical costs."""
    return f"toInt64(round({value} * 1e9))"


_NO_HISTOGRAM = "CAST([], 'Array(UInt32)') AS {0}_v, CAST([], 'Array(UInt64)') AS {0}_c"


@dataclass(frozen=True)
class HourSpan:
    """Hour-aligned ``[lo, hi)`` inside a query's range (``None``: unbounded) read from hourly rows."""

    lo: datetime | None = None
    hi: datetime | None = None

    def clause(self) -> tuple[str, dict[str, Any]]:
        parts, params = [], {}
        if self.lo is not None:
            parts.append("bucket >= {h_lo:DateTime('UTC')}")
            params["h_lo"] = self.lo
        if self.hi is not None:
            parts.append("bucket < {h_hi:DateTime('UTC')}")
            params["h_hi"] = self.hi
        return " AND ".join(parts) or "1", params


def _current(log: str, span: str) -> str:
    """Rows of each bucket's newest generation; the log is read only over the query's range."""
    return f"(bucket, generation) IN (SELECT bucket, max(generation) FROM [[db]].{log} WHERE {span} GROUP BY bucket)"


def _levels(clause: str, span: str, cover: tuple[str, str] | None) -> list[tuple[str, str, str]]:
    """(counter table, set-state table, row condition) of each sealed level the query reads.

    ``cover``: conditions on ``bucket`` for the hours read from the hourly level and for the
    rest, read from the 5-minute level.
    """
    if cover is None:
        return [("metrics_sealed", "metrics_sealed_open", f"({clause}) AND {_current('metrics_seal_log', span)}")]
    inside, outside = cover
    return [
        ("metrics_sealed_1h", "metrics_sealed_open_1h",
         f"({clause}) AND ({inside}) AND {_current('metrics_seal_log_1h', f'({span}) AND ({inside})')}"),
        ("metrics_sealed", "metrics_sealed_open",
         f"({clause}) AND ({outside}) AND {_current('metrics_seal_log', f'({span}) AND ({outside})')}"),
    ]


def _hourly_cover(store: EventStore, hours: HourSpan, params: dict[str, Any]) -> tuple[str, str] | None:
    """Bucket conditions splitting the query between the levels, from the hours sealed in ``hours``.

    Sealed hours are contiguous but for the minutes of a running pass, so the split is two
    ranges the primary key prunes with; with a gap, the hourly level is read for the exact set.
    """
    within, hour_params = hours.clause()
    params.update(hour_params)
    sql = store.sql(
        "SELECT min(bucket) AS lo, max(bucket) AS hi, uniqExact(bucket) AS n"
        f" FROM [[db]].metrics_seal_log_1h WHERE {within}"
    )
    [row] = query_rows(store.client, sql, hour_params)
    n = int(row["n"])
    if not n:
        return None
    if int((row["hi"].timestamp() - row["lo"].timestamp()) // 3600) + 1 == n:
        params.update({"c_lo": row["lo"], "c_hi": row["hi"] + timedelta(hours=1)})
        inside = "bucket >= {c_lo:DateTime('UTC')} AND bucket < {c_hi:DateTime('UTC')}"
        return inside, "(bucket < {c_lo:DateTime('UTC')} OR bucket >= {c_hi:DateTime('UTC')})"
    sealed = f"({within}) AND toStartOfHour(bucket) IN (SELECT bucket FROM [[db]].metrics_seal_log_1h WHERE {within})"
    return sealed, f"NOT ({sealed})"


def _sealed(table: str, rows: str, group: str, by_error: bool, names: Sequence[str], values: bool) -> str:
    counts = ", ".join(f"sum(`{n}`) AS c_{n}" for n in names)
    states = ", ".join(f"uniqExactStateIf(toUInt64(0), false) AS s_{n}" for n in names)  # empty
    kind = "NOT any_error" if by_error else "any_error"
    measured = (
        " groupArrayArray(retry_latency_values) AS lat_v, groupArrayArray(retry_latency_counts) AS lat_c,"
        " groupArrayArray(backoff_values) AS bo_v, groupArrayArray(backoff_counts) AS bo_c,"
        f" sum({nano_usd('failed_cost')}) AS fc, sum(failed_tokens) AS ft, sum({nano_usd('retry_cost')}) AS rc,"
        " sum(retry_tokens) AS rt,"
    ) if values else ""
    return (
        f"SELECT {group} AS g, {counts}, {measured} {states}"
        f" FROM [[db]].{table} WHERE {rows} AND {kind} GROUP BY g"
    )


def _open(table: str, rows: str, group: str, names: Sequence[str], values: bool) -> str:
    """Keys of sealed buckets that span buckets or slices, as set states (few rows)."""
    zeros = ", ".join(f"toUInt64(0) AS c_{n}" for n in names)
    states = ", ".join(f"uniqExactMergeState(`{n}`) AS s_{n}" for n in names)
    measured = (
        f" {_NO_HISTOGRAM.format('lat')}, {_NO_HISTOGRAM.format('bo')},"
        " toInt64(0) AS fc, toUInt64(0) AS ft, toInt64(0) AS rc, toUInt64(0) AS rt,"
    ) if values else ""
    return f"SELECT {group} AS g, {zeros}, {measured} {states} FROM [[db]].{table} WHERE {rows} GROUP BY g"


def _unsealed(clause: str, span: str, group: str, names: Sequence[str], values: bool) -> str:
    states = ", ".join(f"uniqExactMergeState(`{n}`) AS s_{n}" for n in names)
    zeros = ", ".join(f"toUInt64(0) AS c_{n}" for n in names)
    passed = ", ".join(f"s_{n}" for n in names)
    merged = (
        ", groupUniqArrayMerge(retry_latency) AS lat_p,"
        " groupUniqArrayMerge(backoff) AS bo_p, groupUniqArrayMerge(attempt_costs) AS cost_p"
    ) if values else ""
    measured = (
        " arrayMap(x -> x.2, lat_p) AS lat_v, arrayMap(x -> toUInt64(1), lat_p) AS lat_c,"
        " arrayMap(x -> x.2, bo_p) AS bo_v, arrayMap(x -> toUInt64(1), bo_p) AS bo_c,"
        f" arraySum(x -> if(x.4, {nano_usd('x.2')}, 0), cost_p) AS fc, arraySum(x -> if(x.4, x.3, 0), cost_p) AS ft,"
        f" arraySum(x -> if(x.5, {nano_usd('x.2')}, 0), cost_p) AS rc, arraySum(x -> if(x.5, x.3, 0), cost_p) AS rt,"
    ) if values else ""
    inner = (
        f"SELECT {group} AS g, {states}{merged}"
        f" FROM [[db]].metrics_5m WHERE ({clause})"
        f" AND bucket NOT IN (SELECT bucket FROM [[db]].metrics_seal_log WHERE {span}) GROUP BY g"
    )
    return f"SELECT g, {zeros}, {measured} {passed} FROM ({inner})"


def rollup_rows(
    store: EventStore,
    clause: str,
    params: dict[str, Any],
    group: str,
    order: str,
    *,
    by_error: bool,
    span: str = "1",
    hours: HourSpan | None = None,
    measures: Sequence[str] = COUNT_MEASURES,
    values: bool = True,
) -> list[dict[str, Any]]:
    """Rows of counts and derived measures per ``group``; ``clause`` filters ``bucket`` and slices.

    ``by_error``: the query filters or groups by error type, so counts come from the
    per-error-type rows rather than the ``any_error`` ones. ``span``: the time part of
    ``clause`` alone (it bounds the seal logs read). ``hours``: read the hourly level over
    this hour-aligned span — only when ``group`` never splits an hour. ``measures``: the
    counts to compute (all by default); ``values``: also the latency, backoff, cost and token
    measures (histogram merges are most of a query's work, so callers that need only counts
    skip them).
    """
    names = [n for n in COUNT_MEASURES if n in set(measures)]
    params = dict(params)
    cover = _hourly_cover(store, hours, params) if hours is not None else None
    parts = []
    for sealed, opened, rows in _levels(clause, span, cover):
        parts += [_sealed(sealed, rows, group, by_error, names, values), _open(opened, rows, group, names, values)]
    parts.append(_unsealed(clause, span, group, names, values))
    counts = ", ".join(f"sum(c_{n}) + uniqExactMerge(s_{n}) AS {n}" for n in names)
    measured = (
        ", groupArrayArray(lat_v) AS lat_v, groupArrayArray(lat_c) AS lat_c, groupArrayArray(bo_v) AS bo_v,"
        " groupArrayArray(bo_c) AS bo_c, sum(fc) / 1e9 AS failed_cost,"
        " sum(ft) AS failed_tokens, sum(rc) / 1e9 AS retry_cost, sum(rt) AS retry_tokens"
    ) if values else ""
    derived = (
        f", {_histogram_mean('lat')} AS mean_retry_ms, {_histogram_quantile('lat')} AS p95_retry_ms,"
        f" {_histogram_quantile('bo')} AS p95_backoff_ms"
    ) if values else ""
    out = ", ".join(["g", *names] + (
        ["mean_retry_ms", "p95_retry_ms", "p95_backoff_ms", "failed_cost", "failed_tokens", "retry_cost", "retry_tokens"]
        if values else []
    ))
    sql = store.sql(
        f"SELECT {out} FROM (SELECT *{derived} FROM ("
        f"SELECT g, {counts}{measured}"
        f" FROM ({' UNION ALL '.join(parts)})"
        f" GROUP BY g)) ORDER BY {order}"
    )
    return query_rows(store.client, sql, params)


def _histogram_mean(name: str) -> str:
    """Mean of the multiset ``{name}_v`` × ``{name}_c`` (unsorted, values may repeat), NULL if empty."""
    total = f"arraySum({name}_c)"
    return f"if({total} = 0, NULL, arraySum((v, c) -> toUInt64(v) * c, {name}_v, {name}_c) / {total})"


def _histogram_quantile(name: str, level: float = P95) -> str:
    """``quantileExactInclusive(level)`` of the multiset ``{name}_v`` × ``{name}_c`` (unsorted, values
    may repeat across parts), computed in ClickHouse like :func:`_quantile`: sort once, no map merge."""
    values, counts = f"arraySort({name}_v)", f"arrayCumSum(arraySort((c, v) -> v, {name}_c, {name}_v))"
    total = f"arraySum({name}_c)"
    position = f"((toFloat64({total}) - 1) * {level!r})"
    low = f"floor({position})"
    at = f"{values}[arrayFirstIndex(x -> x > {low}, {counts})]"
    above = f"{values}[arrayFirstIndex(x -> x > least({low} + 1, toFloat64({total}) - 1), {counts})]"
    return (
        f"if({total} = 0, NULL,"
        f" toFloat64({at}) + ({position} - {low}) * (toFloat64({above}) - toFloat64({at})))"
    )
