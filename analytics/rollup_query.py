"""The rollup read path: the sealed levels (one table) plus the open set of unsealed buckets.

Cost is O(sealed rows of the coarsest usable level) + O(open-set rows), independent of how
many raw events the sealed buckets hold. A query's range is split by :func:`cover` into
ranges, each read from the coarsest sealed level (day, hour, 5 minutes; migration 0008) that
holds it whole and that the query's grouping never splits — a daily row serves a summary or
a daily trend, never an hourly trend. Every level is sealed up to the end of its newest bucket
published by the last sealing pass (``metrics_rollup_state``), and what lies past the 5-minute
level's end is read from the open set ``metrics_open``. A bucket that receives its
first event after a pass sealed past it is therefore counted from the next pass on.

Why it looks the way it does: with chDB, planning a query with many aggregate states cost more
than reading the few rows a first screen needs. So a query is one look-up of the sealed
extent (:func:`sealed_state`) and one statement of two ``UNION ALL`` parts without an outer
aggregation: the sealed rows of the coarsest grain that answers it (``project`` rows unless an
agent, phase or policy version is filtered or grouped; per error type only when error types
are) together with the ``keys`` rows, and the open set. Each part returns per group its local
counts (arrays in ``COUNT_MEASURES`` order), its distinct ``(key hash, measure bits)`` pairs,
histograms and sums; :class:`_Group` adds them up here and counts each key once, so a key
spanning sealed and open buckets is counted once. Only sealed rows of published generations
are read, without the superseded ones a running or interrupted pass has not deleted yet.
Histograms have log-spaced keys (a few hundred per group at most), so each part concatenates
its rows' (key, count) arrays and ships them; the p95s of all groups (≤ 1 % relative error,
:mod:`.histogram`) are computed at once here, the mean exactly from the sum of latencies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from retrylens.store import EventStore
from retrylens.store.schema import (
    DAY,
    FIVE_MINUTES,
    HOUR,
    OPEN,
    ROLLUP,
    STATE,
    nano_usd_sql,
)
from retrylens.store.sql import query_rows

from .definitions import COUNT_NAMES as COUNT_MEASURES
from .filters import Slice
from .histogram import quantiles

P95 = 0.95
#: The sealed levels a query may read, coarsest first (tests narrow this to compare levels).
LEVELS: tuple[int, ...] = (DAY, HOUR, FIVE_MINUTES)
SLICE_COLUMNS = ("agent_name", "phase", "policy_version")
#: (level, start or unbounded, end) of a range read from one sealed level.
Range = tuple[int, datetime | None, datetime]
_COUNTS = "[" + ", ".join(f"`{n}`" for n in COUNT_MEASURES) + "]"


def nano_usd(value: str) -> str:
    """``value`` (USD, Float64) as whole nano-dollars: integer sums add up the same in any order,
    so the rollup levels and a raw scan give bit-identical costs."""
    return nano_usd_sql(value)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _floor(moment: datetime, size: int) -> datetime:
    return datetime.fromtimestamp(int(moment.timestamp()) // size * size, tz=UTC)


def _ceil(moment: datetime, size: int) -> datetime:
    return datetime.fromtimestamp(-(-int(moment.timestamp()) // size) * size, tz=UTC)


@dataclass(frozen=True)
class SealedState:
    """What readers may read of ``metrics_rollup`` (published by the last sealing pass): the newest
    published generation, the end of each level's sealed buckets, and (level, bucket, generation)
    of superseded rows possibly not deleted yet; ``sealed_at``: when that pass started;
    ``revision``: the state row's (each new row's is higher)."""

    extent: dict[int, datetime]
    published: int = 0
    superseded: tuple[tuple[int, datetime, int], ...] = ()
    sealed_at: datetime | None = None
    revision: int = 0


def sealed_state(store: EventStore) -> SealedState:
    """The newest row of ``metrics_rollup_state`` (one row once merged): a look-up whose cost does
    not grow with the history."""
    sql = store.sql(
        f"SELECT revision, generation, sealed_to, superseded, sealed_at FROM [[db]].{STATE}"
        " ORDER BY revision DESC LIMIT 1"
    )
    rows = query_rows(store.client, sql)
    if not rows:
        return SealedState(extent={})
    row = rows[0]
    return SealedState(
        extent={int(level): _utc(end) for level, end in row["sealed_to"]},
        published=int(row["generation"]),
        superseded=tuple(
            (int(level), _utc(bucket), int(g)) for level, bucket, g in row["superseded"]
        ),
        sealed_at=_utc(row["sealed_at"]),
        revision=int(row["revision"]),
    )


def cover(
    start: datetime | None, end: datetime | None, extent: dict[int, datetime], levels: Sequence[int]
) -> list[Range]:
    """Disjoint ranges partitioning ``[start, end)`` ∩ the sealed extent, each on the coarsest of
    ``levels`` (coarsest first) whose buckets it holds whole; ``None`` is unbounded. Whatever lies
    past a level's extent falls to finer levels, whatever lies past the finest level's extent
    to the open set."""
    if not levels:
        return []
    level, finer = levels[0], levels[1:]
    top = extent.get(level)
    if top is None:
        return cover(start, end, extent, finer)
    lo = None if start is None else _ceil(start, level)
    hi = top if end is None else min(_floor(end, level), top)
    if lo is not None and lo >= hi:
        return cover(start, end, extent, finer)
    ranges: list[Range] = [(level, lo, hi)]
    if start is not None and lo is not None and start < lo:
        ranges += cover(start, lo, extent, finer)
    if end is None or hi < end:
        ranges += cover(hi, end, extent, finer)
    return ranges


def _cover_clause(ranges: Sequence[Range]) -> tuple[str, dict[str, Any]]:
    """The rows of ``ranges``: a plain AND of the levels and the overall span, which the primary key
    prunes with cheaply, then each level's ranges in a ``multiIf`` (an OR of per-level ranges made
    the key analysis cost more than reading the rows it saved)."""
    params: dict[str, Any] = {"c_hi": max(hi for _l, _lo, hi in ranges)}
    terms = [f"level IN ({', '.join(str(level) for level in sorted({r[0] for r in ranges}))})"]
    terms.append("bucket < {c_hi:DateTime('UTC')}")
    if all(lo is not None for _l, lo, _hi in ranges):
        params["c_lo"] = min(lo for _l, lo, _hi in ranges if lo is not None)
        terms.append("bucket >= {c_lo:DateTime('UTC')}")
    arms: dict[int, list[str]] = {}
    for i, (level, lo, hi) in enumerate(ranges):
        params[f"r{i}_hi"] = hi
        bounds = f"bucket < {{r{i}_hi:DateTime('UTC')}}"
        if lo is not None:
            params[f"r{i}_lo"] = lo
            bounds += f" AND bucket >= {{r{i}_lo:DateTime('UTC')}}"
        arms.setdefault(level, []).append(f"({bounds})")
    cases = ", ".join(f"level = {level}, {' OR '.join(bounds)}" for level, bounds in arms.items())
    return " AND ".join([*terms, f"multiIf({cases}, false)"]), params


def _grain(where: Slice, group: str) -> str:
    """The sealed rows that answer the query: per slice only if a slice column is filtered or grouped."""
    sliced = group in SLICE_COLUMNS or any(
        v is not None for v in (where.agent, where.phase, where.policy_version)
    )
    by_error = group == "error_type" or where.error_type is not None
    return ("slice" if sliced else "project") + ("_error" if by_error else "")


def _sealed(
    dims: str, ranges: str, state: SealedState, grain: str, group: str, values: bool
) -> tuple[str, dict[str, Any]]:
    params: dict[str, Any] = {"published": state.published}
    dead = ""
    if state.superseded:
        dead = " AND (level, bucket, generation) NOT IN {dead:Array(Tuple(UInt32, DateTime('UTC'), UInt64))}"
        params["dead"] = list(state.superseded)
    measured = (
        (
            ", groupArrayArray(retry_latency_keys) AS lat_k, groupArrayArray(retry_latency_counts) AS lat_c,"
            " groupArrayArray(backoff_keys) AS bo_k, groupArrayArray(backoff_counts) AS bo_c,"
            " sumForEach([toInt64(retry_latency_sum), failed_nano_usd, toInt64(failed_tokens), retry_nano_usd,"
            " toInt64(retry_tokens)]) AS sums"
        )
        if values
        else ""
    )
    sql = (
        f"SELECT {group} AS g, sumForEach({_COUNTS}) AS c,"
        f" groupUniqArrayIf((key_hash, key_measures), grain = 'keys') AS kp{measured} FROM [[db]].{ROLLUP}"
        f" WHERE ({dims}) AND grain IN ('keys', '{grain}') AND ({ranges})"
        f" AND generation <= {{published:UInt64}}{dead} GROUP BY g"
    )
    return sql, params


def _open(clause: str, group: str, values: bool) -> str:
    """The open set past the sealed extent (the open minutes): its key pairs, histograms and sums."""
    merged = (
        (
            ", groupUniqArrayMerge(retry_latency) AS lp, groupUniqArrayMerge(backoff) AS bp,"
            " groupUniqArrayMerge(attempt_costs) AS cp"
        )
        if values
        else ""
    )
    measured = (
        (
            ", lp.2 AS lat_k, arrayWithConstant(length(lp), toUInt64(1)) AS lat_c,"
            " bp.2 AS bo_k, arrayWithConstant(length(bp), toUInt64(1)) AS bo_c,"
            " [toInt64(arraySum(lp.3)), arraySum(cp.2), toInt64(arraySum(cp.3)), arraySum(cp.4), toInt64(arraySum(cp.5))] AS sums"
        )
        if values
        else ""
    )
    inner = f"SELECT {group} AS g, groupUniqArrayArrayMerge(`keys`) AS kp{merged} FROM [[db]].{OPEN} WHERE {clause} GROUP BY g"
    return f"SELECT g, arrayWithConstant({len(COUNT_MEASURES)}, toUInt64(0)) AS c, kp{measured} FROM ({inner})"


class _Group:
    """One group's parts merged: local counts and sums added, key pairs united, histograms
    concatenated (their p95s are computed for all groups at once)."""

    def __init__(self) -> None:
        self.counts = [0] * len(COUNT_MEASURES)
        self.keys: dict[int, int] = {}
        self.latency: tuple[list[int], list[int]] = ([], [])
        self.backoff: tuple[list[int], list[int]] = ([], [])
        self.sums = [0] * 5

    def add(self, row: dict[str, Any]) -> None:
        self.counts = [a + int(b) for a, b in zip(self.counts, row["c"], strict=True)]
        for key, bits in row["kp"]:
            self.keys[key] = self.keys.get(key, 0) | int(bits)
        if "sums" in row:
            self.latency[0].extend(row["lat_k"])
            self.latency[1].extend(row["lat_c"])
            self.backoff[0].extend(row["bo_k"])
            self.backoff[1].extend(row["bo_c"])
            self.sums = [a + int(b) for a, b in zip(self.sums, row["sums"], strict=True)]

    def totals(self) -> list[int]:
        """Per measure: local counts plus the distinct keys whose bit is set."""
        totals = list(self.counts)
        for bits in self.keys.values():
            for i in range(len(totals)):
                totals[i] += (bits >> i) & 1
        return totals

    def row(self, g: Any, names: Sequence[str]) -> dict[str, Any]:
        totals = dict(zip(COUNT_MEASURES, self.totals(), strict=True))
        return {"g": g, **{name: totals[name] for name in names}}

    def values(self, p95_retry: float | None, p95_backoff: float | None) -> dict[str, Any]:
        lat_sum, failed_nano, failed_tokens, retry_nano, retry_tokens = self.sums
        retries = sum(self.latency[1])
        return {
            "mean_retry_ms": lat_sum / retries if retries else None,
            "p95_retry_ms": p95_retry,
            "p95_backoff_ms": p95_backoff,
            "failed_cost": failed_nano / 1e9,
            "failed_tokens": failed_tokens,
            "retry_cost": retry_nano / 1e9,
            "retry_tokens": retry_tokens,
        }


def _sorted(rows: list[dict[str, Any]], order: str) -> list[dict[str, Any]]:
    """``rows`` sorted by an ``ORDER BY`` list of names, each optionally ``DESC``."""
    for term in reversed([t.split() for t in order.split(",")]):
        rows.sort(
            key=lambda row, name=term[0]: row[name],
            reverse=len(term) > 1 and term[1].upper() == "DESC",
        )
    return rows


def rollup_rows(
    store: EventStore,
    where: Slice,
    group: str,
    order: str,
    *,
    group_seconds: int | None = None,
    measures: Sequence[str] = COUNT_MEASURES,
    values: bool = True,
) -> list[dict[str, Any]]:
    """Rows of counts and derived measures per ``group`` (an expression of ``bucket`` and the slice
    columns), sorted by ``order`` (names among ``g`` and the counts, each optionally ``DESC``).

    ``where`` must be aligned to 5-minute buckets. ``group_seconds``: the size of the time
    buckets ``group`` makes (``None``: no time grouping), so that only sealed levels it never
    splits are read. ``measures``: the counts wanted; ``values``: also the latency, backoff,
    cost and token measures (callers that need only counts skip the histograms).
    """
    state = sealed_state(store)
    levels = [level for level in LEVELS if group_seconds is None or group_seconds % level == 0]
    ranges = cover(where.start, where.end, state.extent, levels)
    open_from = state.extent.get(FIVE_MINUTES)
    if open_from is not None and (where.start is None or where.start < open_from):
        where_open = where.with_(start=open_from)
    else:
        where_open = where
    clause, params = where_open.where(time_column="bucket")
    parts = []
    if ranges:
        dims, _ = where.with_(start=None, end=None).where(time_column="bucket")
        condition, range_params = _cover_clause(ranges)
        sealed, sealed_params = _sealed(dims, condition, state, _grain(where, group), group, values)
        parts.append(sealed)
        params.update(range_params | sealed_params)
    if where.end is None or open_from is None or where.end > open_from:
        parts.append(_open(clause, group, values))
    groups: dict[Any, _Group] = {}
    if not parts:
        return []
    for row in query_rows(store.client, store.sql(" UNION ALL ".join(parts)), params):
        groups.setdefault(row["g"], _Group()).add(row)
    names = [n for n in COUNT_MEASURES if n in set(measures)]
    rows = [merged.row(g, names) for g, merged in groups.items()]
    if values:
        merged_groups = list(groups.values())
        latency = quantiles([m.latency for m in merged_groups], P95)
        backoff = quantiles([m.backoff for m in merged_groups], P95)
        for row, merged, p95_retry, p95_backoff in zip(
            rows, merged_groups, latency, backoff, strict=True
        ):
            row.update(merged.values(p95_retry, p95_backoff))
    return _sorted(rows, order)
