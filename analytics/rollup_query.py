"""The rollup read path: sealed counters (closed buckets) plus set states (open buckets).

Cost is O(sealed rows in range) + O(unsealed set states), independent of how many raw
events the sealed buckets hold. A bucket is read from ``metrics_sealed`` (its newest
generation) once it appears in ``metrics_seal_log``, and from ``metrics_5m`` until then.
Distinct counts add the sealed *local* counts to one ``uniqExact`` over the spanning keys
of sealed buckets (``metrics_sealed_open``) and the open buckets' hashes together, so a key
spanning both is counted once.
Quantiles come from merged exact histograms, interpolated like ``quantileExactInclusive``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from retrylens.store import EventStore
from retrylens.store.migrations.m0005_sealed_rollups import COUNT_MEASURES
from retrylens.store.sql import query_rows

P95 = 0.95
_CURRENT = "(bucket, generation) IN (SELECT bucket, max(generation) FROM [[db]].metrics_seal_log GROUP BY bucket)"


def _sealed(clause: str, group: str, by_error: bool) -> str:
    counts = ", ".join(f"sum(`{n}`) AS c_{n}" for n in COUNT_MEASURES)
    states = ", ".join(f"uniqExactStateIf(toUInt64(0), false) AS s_{n}" for n in COUNT_MEASURES)  # empty
    rows = "NOT any_error" if by_error else "any_error"
    return (
        f"SELECT {group} AS g, {counts}, {states},"
        " sumMap(retry_latency_values, retry_latency_counts) AS lat, sumMap(backoff_values, backoff_counts) AS bo,"
        " sum(failed_cost) AS fc, sum(failed_tokens) AS ft, sum(retry_cost) AS rc, sum(retry_tokens) AS rt"
        f" FROM [[db]].metrics_sealed WHERE ({clause}) AND {rows} AND {_CURRENT} GROUP BY g"
    )


def _open(clause: str, group: str) -> str:
    """Keys of sealed buckets that span buckets or slices, as set states (few rows)."""
    zeros = ", ".join(f"toUInt64(0) AS c_{n}" for n in COUNT_MEASURES)
    states = ", ".join(f"uniqExactMergeState(`{n}`) AS s_{n}" for n in COUNT_MEASURES)
    nothing = "(CAST([], 'Array(UInt32)'), CAST([], 'Array(UInt64)'))"
    return (
        f"SELECT {group} AS g, {zeros}, {states}, {nothing} AS lat, {nothing} AS bo,"
        " 0. AS fc, toUInt64(0) AS ft, 0. AS rc, toUInt64(0) AS rt"
        f" FROM [[db]].metrics_sealed_open WHERE ({clause}) AND {_CURRENT} GROUP BY g"
    )


def _unsealed(clause: str, group: str) -> str:
    states = ", ".join(f"uniqExactMergeState(`{n}`) AS s_{n}" for n in COUNT_MEASURES)
    zeros = ", ".join(f"toUInt64(0) AS c_{n}" for n in COUNT_MEASURES)
    passed = ", ".join(f"s_{n}" for n in COUNT_MEASURES)
    inner = (
        f"SELECT {group} AS g, {states}, groupUniqArrayMerge(retry_latency) AS lat_p,"
        " groupUniqArrayMerge(backoff) AS bo_p, groupUniqArrayMerge(attempt_costs) AS cost_p"
        f" FROM [[db]].metrics_5m WHERE ({clause})"
        " AND bucket NOT IN (SELECT bucket FROM [[db]].metrics_seal_log) GROUP BY g"
    )
    return (
        f"SELECT g, {zeros}, {passed},"
        " (arrayMap(x -> x.2, lat_p), arrayMap(x -> toUInt64(1), lat_p)) AS lat,"
        " (arrayMap(x -> x.2, bo_p), arrayMap(x -> toUInt64(1), bo_p)) AS bo,"
        " arraySum(x -> if(x.4, x.2, 0.), cost_p) AS fc, arraySum(x -> if(x.4, x.3, 0), cost_p) AS ft,"
        " arraySum(x -> if(x.5, x.2, 0.), cost_p) AS rc, arraySum(x -> if(x.5, x.3, 0), cost_p) AS rt"
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
    store: EventStore, clause: str, params: dict[str, Any], group: str, order: str, *, by_error: bool
) -> list[dict[str, Any]]:
    """Rows of counts and derived measures per ``group``; ``clause`` filters ``bucket`` and slices.

    ``by_error``: the query filters or groups by error type, so counts come from the
    per-error-type rows rather than the ``any_error`` ones.
    """
    counts = ", ".join(f"sum(c_{n}) + uniqExactMerge(s_{n}) AS {n}" for n in COUNT_MEASURES)
    sql = store.sql(
        f"SELECT g, {counts}, sumMap(lat.1, lat.2) AS lat, sumMap(bo.1, bo.2) AS bo,"
        " sum(fc) AS failed_cost, sum(ft) AS failed_tokens, sum(rc) AS retry_cost, sum(rt) AS retry_tokens"
        f" FROM ({_sealed(clause, group, by_error)} UNION ALL {_open(clause, group)}"
        f" UNION ALL {_unsealed(clause, group)})"
        f" GROUP BY g ORDER BY {order}"
    )
    rows = query_rows(store.client, sql, params)
    for row in rows:
        latency, backoff = row.pop("lat"), row.pop("bo")
        row["mean_retry_ms"] = _mean(*latency)
        row["p95_retry_ms"] = _quantile(*latency, P95)
        row["p95_backoff_ms"] = _quantile(*backoff, P95)
    return rows
