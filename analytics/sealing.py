"""Sealing closed rollup buckets into plain counters (migration 0005), exactly and repeatably.

A pass (:func:`seal_rollups`) picks the 5-minute buckets to (re)seal — every bucket older
than ``now - grace`` that is not sealed yet, and every sealed bucket in which a task that
received events since the previous pass has events (a late or re-sent event) — and
recomputes each from ``events FINAL``, so duplicates never count and sealing twice gives
the same rows. A key (attempt or task) whose events all lie in one bucket and one
(agent, phase, policy) slice is *local* and becomes a plain count; any other key keeps
its hash in a ``uniqExact`` state, which readers merge with the unsealed buckets' states
of ``metrics_5m``, so a key spanning buckets or slices is counted once.

What a caller must know: between a late event's arrival and the next pass, a query may
miss that event (its bucket is sealed) or, when the event's task had been counted as local
in an older bucket, count that task or attempt twice. The next pass repairs both; run
passes more often than the grace period (:func:`start_sealer`).

The same pass then seals every closed hour (all its 5-minute buckets before the boundary)
that is not sealed yet or contains a bucket (re)sealed now into the hourly level
(migration 0006), computed the same way with the hour as the bucket.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from retrylens.store import EventStore
from retrylens.store.migrations.m0002_rollups import BUCKET_SECONDS, IS_RETRY, MEASURES, TASK_KEY
from retrylens.store.migrations.m0005_sealed_rollups import COUNT_MEASURES
from retrylens.store.migrations.m0006_hourly_sealed_rollups import HOUR_SECONDS
from retrylens.store.sql import query_rows, query_scalar

from .rollup_query import nano_usd

log = logging.getLogger(__name__)

DEFAULT_GRACE = timedelta(minutes=10)
#: Late rows are looked for in ``metrics_touched`` from this long before the previous pass.
TOUCH_MARGIN = timedelta(seconds=60)
_MEASURE = {m.name: m for m in MEASURES}


@dataclass(frozen=True)
class Level:
    """One sealed level: its bucket size and its counter, set-state and log tables."""

    seconds: int
    sealed: str
    open: str
    log: str

    @property
    def bucket(self) -> str:
        """The bucket of an event's ``ts`` at this level."""
        return f"toDateTime(toStartOfInterval(ts, INTERVAL {self.seconds} SECOND), 'UTC')"


FIVE_MINUTES = Level(BUCKET_SECONDS, "metrics_sealed", "metrics_sealed_open", "metrics_seal_log")
HOURLY = Level(HOUR_SECONDS, "metrics_sealed_1h", "metrics_sealed_open_1h", "metrics_seal_log_1h")
BUCKET = FIVE_MINUTES.bucket


@dataclass(frozen=True)
class SealReport:
    """What one pass did: buckets sealed for the first time, re-sealed, the boundary, and hours
    (re)sealed into the hourly level."""

    sealed: int
    resealed: int
    boundary: datetime
    hours: int = 0

    @property
    def buckets(self) -> int:
        return self.sealed + self.resealed


def _floor(moment: datetime, size: int = BUCKET_SECONDS) -> datetime:
    seconds = int(moment.timestamp()) // size * size
    return datetime.fromtimestamp(seconds, tz=UTC)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _counters_select() -> str:
    """Per (bucket, slice, error type), and per (bucket, slice) as ``any_error`` rows: local counts, values."""
    counts = []
    for name in COUNT_MEASURES:
        m = _MEASURE[name]
        local = "task_local" if m.value == TASK_KEY else "attempt_local"
        counts.append(f"uniqExactIf({m.value}, ({m.condition}) AND {local}) AS `{name}`")
    latency, backoff, costs = (_MEASURE[n].condition for n in ("retry_latency", "backoff", "attempt_costs"))
    tokens = "toUInt64(tokens_in) + tokens_out"
    values = [
        f"sumMapIf([latency_ms], [toUInt64(1)], {latency}) AS lat",
        f"sumMapIf([backoff_ms], [toUInt64(1)], {backoff}) AS bo",
        f"sumIf({nano_usd('cost_usd')}, ({costs}) AND kind = 'attempt_failed') / 1e9 AS failed_cost",
        f"sumIf({tokens}, ({costs}) AND kind = 'attempt_failed') AS failed_tokens",
        f"sumIf({nano_usd('cost_usd')}, ({costs}) AND {IS_RETRY}) / 1e9 AS retry_cost",
        f"sumIf({tokens}, ({costs}) AND {IS_RETRY}) AS retry_tokens",
    ]
    return ",\n    ".join(counts + values)


def _open_select() -> str:
    states = []
    for name in COUNT_MEASURES:
        m = _MEASURE[name]
        local = "task_local" if m.value == TASK_KEY else "attempt_local"
        states.append(f"uniqExactIfState({m.value}, ({m.condition}) AND NOT {local}) AS `{name}`")
    return ",\n    ".join(states)


def _chunk_events(level: Level) -> str:
    """Events of every task with an event in ``{buckets}``, each flagged local or not."""
    events = "[[db]].events"
    slice_of = "(b, agent_name, phase, policy_version)"
    return (
        f"SELECT *, {level.bucket} AS b,\n"
        f"  uniqExact({slice_of}) OVER (PARTITION BY project, task_id) = 1 AS task_local,\n"
        f"  uniqExact({slice_of}) OVER (PARTITION BY project, task_id, correlation_id) = 1 AS attempt_local\n"
        f"FROM {events} FINAL\n"
        f"WHERE (project, task_id) IN (SELECT project, task_id FROM {events}\n"
        "  WHERE ts >= {lo:DateTime64(3, 'UTC')} AND ts < {hi:DateTime64(3, 'UTC')}"
        f" AND has({{buckets:Array(DateTime('UTC'))}}, {level.bucket}))"
    )


def seal_statements(store: EventStore, level: Level = FIVE_MINUTES) -> list[str]:
    """``INSERT … SELECT`` s sealing the buckets ``{buckets:Array(DateTime)}`` as ``{generation:UInt64}``."""
    names = ", ".join(f"`{n}`" for n in COUNT_MEASURES)
    slice_columns = "project, bucket, agent_name, phase, policy_version, error_type"
    in_chunk = "has({buckets:Array(DateTime('UTC'))}, b)"
    counters = (
        f"INSERT INTO [[db]].{level.sealed} ({slice_columns}, any_error, generation, {names},"
        " retry_latency_values, retry_latency_counts, backoff_values, backoff_counts,"
        " failed_cost, failed_tokens, retry_cost, retry_tokens)\n"
        f"SELECT project, b, agent_name, phase, policy_version, et, any_error, {{generation:UInt64}}, {names},"
        " lat.1, lat.2, bo.1, bo.2, failed_cost, failed_tokens, retry_cost, retry_tokens\n"
        "FROM (\n"
        "  SELECT project, b, agent_name, phase, policy_version, if(any_error, '', error_type) AS et, any_error,\n"
        f"    {_counters_select()}\n"
        f"  FROM ({_chunk_events(level)})\n"
        f"  ARRAY JOIN [false, true] AS any_error WHERE {in_chunk}\n"
        "  GROUP BY project, b, agent_name, phase, policy_version, et, any_error\n"
        ")"
    )
    opens = (
        f"INSERT INTO [[db]].{level.open} ({slice_columns}, generation, {names})\n"
        f"SELECT project, b, agent_name, phase, policy_version, error_type, {{generation:UInt64}},\n"
        f"    {_open_select()}\n"
        f"FROM ({_chunk_events(level)})\n"
        f"WHERE {in_chunk} AND NOT (task_local AND attempt_local)\n"
        "GROUP BY project, b, agent_name, phase, policy_version, error_type"
    )
    return [store.sql(counters), store.sql(opens)]


def sealed_generations(store: EventStore, level: Level = FIVE_MINUTES) -> dict[datetime, int]:
    """Sealed bucket → its current generation."""
    sql = store.sql(f"SELECT bucket, max(generation) AS g FROM [[db]].{level.log} GROUP BY bucket")
    return {_utc(r["bucket"]): int(r["g"]) for r in query_rows(store.client, sql)}


def _unsealed_buckets(store: EventStore, boundary: datetime) -> set[datetime]:
    sql = store.sql(
        "SELECT DISTINCT bucket FROM [[db]].metrics_5m WHERE bucket < {boundary:DateTime('UTC')}"
        " AND bucket NOT IN (SELECT bucket FROM [[db]].metrics_seal_log)"
    )
    return {_utc(r["bucket"]) for r in query_rows(store.client, sql, {"boundary": boundary})}


def _touched_buckets(store: EventStore, since: datetime, boundary: datetime) -> set[datetime]:
    """Buckets before ``boundary`` holding events of tasks that received events since ``since``."""
    sql = store.sql(
        f"SELECT DISTINCT {BUCKET} AS b FROM [[db]].events WHERE (project, task_id) IN"
        " (SELECT project, task_id FROM [[db]].metrics_touched WHERE inserted_at >= {since:DateTime64(3, 'UTC')})"
        " AND ts < {boundary:DateTime64(3, 'UTC')}"
    )
    return {_utc(r["b"]) for r in query_rows(store.client, sql, {"since": since, "boundary": boundary})}


def _last_pass(store: EventStore) -> datetime | None:
    value = query_scalar(
        store.client, store.sql("SELECT if(count() = 0, NULL, max(sealed_at)) FROM [[db]].metrics_seal_log")
    )
    return None if value is None else _utc(value)


def _seal_chunk(
    store: EventStore, buckets: Sequence[datetime], generation: int, started: datetime, level: Level = FIVE_MINUTES
) -> None:
    params: dict[str, Any] = {
        "buckets": list(buckets),
        "generation": generation,
        "lo": min(buckets),
        "hi": max(buckets) + timedelta(seconds=level.seconds),
    }
    for statement in seal_statements(store, level):
        store.client.command(statement, parameters=params)
    store.client.insert(
        f"{store.ctx.database}.{level.log}",
        [[bucket, generation, started, 0] for bucket in buckets],
        column_names=["bucket", "generation", "sealed_at", "events"],
    )


def _drop_dead_rows(store: EventStore, buckets: Sequence[datetime], resealed: bool, generation: int) -> None:
    """Readers now take the new generation: older generations and the set states are dead weight."""
    ctx = store.ctx
    params = {"buckets": list(buckets), "generation": generation}
    where = "has({buckets:Array(DateTime('UTC'))}, bucket)"
    tables = ["metrics_5m"] + (["metrics_sealed", "metrics_sealed_open"] if resealed else [])
    for table in tables:
        older = " AND generation < {generation:UInt64}" if table != "metrics_5m" else ""
        store.client.command(
            f"DELETE FROM {ctx.table(ctx.storage_name(table))}{ctx.on_cluster} WHERE {where}{older}",
            parameters=params,
        )


def seal_rollups(
    store: EventStore, *, now: datetime | None = None, grace: timedelta = DEFAULT_GRACE, chunk_buckets: int = 2016
) -> SealReport:
    """Seal every closed bucket not sealed yet and re-seal those that received late events.

    Safe to run any number of times and concurrently with inserts; not concurrently with
    itself (the periodic sealer runs one pass at a time). ``chunk_buckets`` bounds the
    events one statement reads (2016 buckets = one week).
    """
    boundary = _floor(_utc(now or datetime.now(UTC)) - grace)
    started = _utc(query_scalar(store.client, "SELECT now64(3, 'UTC')"))
    previous = _last_pass(store)
    previous_generations = sealed_generations(store)
    fresh = _unsealed_buckets(store, boundary)
    stale: set[datetime] = set()
    if previous is not None:
        touched = _touched_buckets(store, previous - TOUCH_MARGIN, boundary)
        stale = {b for b in touched if b in previous_generations} - fresh
    todo = sorted(fresh | stale)
    generation = max(time.time_ns(), max(previous_generations.values(), default=0) + 1)
    for first in range(0, len(todo), max(1, chunk_buckets)):
        _seal_chunk(store, todo[first : first + chunk_buckets], generation, started)
    if todo:
        _drop_dead_rows(store, todo, bool(stale), generation)
    hours = _seal_hours(store, todo, boundary, generation, started, max(1, chunk_buckets // 12))
    return SealReport(sealed=len(fresh), resealed=len(stale), boundary=boundary, hours=hours)


def _hours_to_seal(store: EventStore, todo: Sequence[datetime], boundary: datetime) -> tuple[list[datetime], bool]:
    """Closed hours with sealed buckets and no hourly row yet, plus those of buckets (re)sealed now."""
    closed = _floor(boundary, HOUR_SECONDS)
    sql = store.sql(
        "SELECT DISTINCT toStartOfHour(bucket) AS h FROM [[db]].metrics_seal_log"
        " WHERE bucket < {closed:DateTime('UTC')} AND h NOT IN (SELECT bucket FROM [[db]].metrics_seal_log_1h)"
    )
    missing = {_utc(r["h"]) for r in query_rows(store.client, sql, {"closed": closed})}
    again = {_floor(b, HOUR_SECONDS) for b in todo if b < closed} - missing
    return sorted(missing | again), bool(again)


def _seal_hours(
    store: EventStore, todo: Sequence[datetime], boundary: datetime, generation: int, started: datetime, chunk: int
) -> int:
    hours, resealed = _hours_to_seal(store, todo, boundary)
    for first in range(0, len(hours), chunk):
        _seal_chunk(store, hours[first : first + chunk], generation, started, HOURLY)
    if resealed:
        ctx, params = store.ctx, {"buckets": hours, "generation": generation}
        for table in (HOURLY.sealed, HOURLY.open):
            store.client.command(
                f"DELETE FROM {ctx.table(ctx.storage_name(table))}{ctx.on_cluster}"
                " WHERE has({buckets:Array(DateTime('UTC'))}, bucket) AND generation < {generation:UInt64}",
                parameters=params,
            )
    return len(hours)


def start_sealer(
    store: EventStore,
    interval_s: float = 60.0,
    *,
    grace: timedelta = DEFAULT_GRACE,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Callable[[], None]:
    """Run :func:`seal_rollups` every ``interval_s`` seconds in a daemon thread; returns ``stop()``.

    A failing pass is logged and retried at the next tick; ``stop()`` waits for a running pass.
    """
    stopped = threading.Event()

    def loop() -> None:
        while not stopped.is_set():
            try:
                seal_rollups(store, now=clock(), grace=grace)
            except Exception:  # noqa: BLE001 - a background job must outlive one bad pass
                log.exception("sealing rollups failed; retrying in %.0f s", interval_s)
            stopped.wait(interval_s)

    thread = threading.Thread(target=loop, name="retrylens-rollup-sealer", daemon=True)
    thread.start()

    def stop() -> None:
        stopped.set()
        thread.join()

    return stop
