"""The rollup read path: sealed counters (closed buckets) plus set states (open buckets).

Cost is O(sealed rows in range) + O(unsealed set states), independent of how many raw
events the sealed buckets hold. A bucket is read from ``metrics_sealed`` (its newest
generation) once it appears in ``metrics_seal_log``, and from ``metrics_5m`` until then.
Distinct counts add the sealed *local* counts to one ``uniqExact`` over the spanning keys
of sealed buckets (``metrics_sealed_open``) and the open buckets' hashes together, so a key
spanning both is counted once.
Hours the query covers whole are read from the hourly level (migration 0006) when the
grouping never splits an hour; the 5-minute rows then serve only the edges.
Quantiles come from merged exact histograms, interpolated like ``quantileExactInclusive``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from retrylens.store import EventStore
from retrylens.store.migrations.m0005_sealed_rollups import COUNT_MEASURES
from retrylens.store.sql import query_rows

P95 = 0.95


def nano_usd(value: str) -> str:
    """``value`` (USD, Float64) as whole nano-dollars: integer sums add up the same in any order,
    so the rollup levels and a raw scan give bit-identical costs."""
    return f"toInt64(round({value} * 1e9))"


_NO_HISTOGRAM = "(CAST([], 'Array(UInt32)'), CAST([], 'Array(UInt64)'))"


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


def _sealed(table: str, rows: str, group: str, by_error: bool) -> str:
    counts = ", ".join(f"sum(`{n}`) AS c_{n}" for n in COUNT_MEASURES)
    states = ", ".join(f"uniqExactStateIf(toUInt64(0), false) AS s_{n}" for n in COUNT_MEASURES)  # empty
    kind = "NOT any_error" if by_error else "any_error"
    return (
        f"SELECT {group} AS g, {counts}, {states},"
        " sumMap(retry_latency_values, retry_latency_counts) AS lat, sumMap(backoff_values, backoff_counts) AS bo,"
        f" sum({nano_usd('failed_cost')}) AS fc, sum(failed_tokens) AS ft, sum({nano_usd('retry_cost')}) AS rc,"
        f" sum(retry_tokens) AS rt FROM [[db]].{table} WHERE {rows} AND {kind} GROUP BY g"
    )


def _open(table: str, rows: str, group: str) -> str:
    """Keys of sealed buckets that span buckets or slices, as set states (few rows)."""
    zeros = ", ".join(f"toUInt64(0) AS c_{n}" for n in COUNT_MEASURES)
    states = ", ".join(f"uniqExactMergeState(`{n}`) AS s_{n}" for n in COUNT_MEASURES)
    return (
        f"SELECT {group} AS g, {zeros}, {states}, {_NO_HISTOGRAM} AS lat, {_NO_HISTOGRAM} AS bo,"
        " toInt64(0) AS fc, toUInt64(0) AS ft, toInt64(0) AS rc, toUInt64(0) AS rt"
        f" FROM [[db]].{table} WHERE {rows} GROUP BY g"
    )


def _unsealed(clause: str, span: str, group: str) -> str:
    states = ", ".join(f"uniqExactMergeState(`{n}`) AS s_{n}" for n in COUNT_MEASURES)
    zeros = ", ".join(f"toUInt64(0) AS c_{n}" for n in COUNT_MEASURES)
    passed = ", ".join(f"s_{n}" for n in COUNT_MEASURES)
    inner = (
        f"SELECT {group} AS g, {states}, groupUniqArrayMerge(retry_latency) AS lat_p,"
        " groupUniqArrayMerge(backoff) AS bo_p, groupUniqArrayMerge(attempt_costs) AS cost_p"
        f" FROM [[db]].metrics_5m WHERE ({clause})"
        f" AND bucket NOT IN (SELECT bucket FROM [[db]].metrics_seal_log WHERE {span}) GROUP BY g"
    )
    return (
        f"SELECT g, {zeros}, {passed},"
        " (arrayMap(x -> x.2, lat_p), arrayMap(x -> toUInt64(1), lat_p)) AS lat,"
        " (arrayMap(x -> x.2, bo_p), arrayMap(x -> toUInt64(1), bo_p)) AS bo,"
        f" arraySum(x -> if(x.4, {nano_usd('x.2')}, 0), cost_p) AS fc, arraySum(x -> if(x.4, x.3, 0), cost_p) AS ft,"
        f" arraySum(x -> if(x.5, {nano_usd('x.2')}, 0), cost_p) AS rc, arraySum(x -> if(x.5, x.3, 0), cost_p) AS rt"
        f" FROM ({inner})"
    )


def _quantile(values: list[int], counts: list[int], level: float) -> float | None:
    """``quantileExactInclusive(level)`` of the multiset ``values`` × ``counts`` (sorted values)."""
    total = int(sum(counts))
    if not total:
        return None
    cumulative = np.cumsum(counts)
    position = (total - 1) * level
    low = int(np.floor(position))
    at = np.searchsorted(cumulative, [low, min(low + 1, total - 1)], side="right")
    below, above = float(values[at[0]]), float(values[at[1]])
    return below + (position - low) * (above - below)


def _mean(values: list[int], counts: list[int]) -> float | None:
    total = int(sum(counts))
    return float(np.dot(np.asarray(values, dtype=np.float64), counts) / total) if total else None


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
) -> list[dict[str, Any]]:
    """Rows of counts and derived measures per ``group``; ``clause`` filters ``bucket`` and slices.

    ``by_error``: the query filters or groups by error type, so counts come from the
    per-error-type rows rather than the ``any_error`` ones. ``span``: the time part of
    ``clause`` alone (it bounds the seal logs read). ``hours``: read the hourly level over
    this hour-aligned span — only when ``group`` never splits an hour.
    """
    params = dict(params)
    cover = _hourly_cover(store, hours, params) if hours is not None else None
    parts = []
    for sealed, opened, rows in _levels(clause, span, cover):
        parts += [_sealed(sealed, rows, group, by_error), _open(opened, rows, group)]
    parts.append(_unsealed(clause, span, group))
    counts = ", ".join(f"sum(c_{n}) + uniqExactMerge(s_{n}) AS {n}" for n in COUNT_MEASURES)
    sql = store.sql(
        f"SELECT g, {counts}, sumMap(lat.1, lat.2) AS lat, sumMap(bo.1, bo.2) AS bo,"
        " sum(fc) / 1e9 AS failed_cost, sum(ft) AS failed_tokens, sum(rc) / 1e9 AS retry_cost, sum(rt) AS retry_tokens"
        f" FROM ({' UNION ALL '.join(parts)})"
        f" GROUP BY g ORDER BY {order}"
    )
    rows = query_rows(store.client, sql, params)
    for row in rows:
        latency, backoff = row.pop("lat"), row.pop("bo")
        row["mean_retry_ms"] = _mean(*latency)
        row["p95_retry_ms"] = _quantile(*latency, P95)
        row["p95_backoff_ms"] = _quantile(*backoff, P95)
    return rows
