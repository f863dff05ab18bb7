"""Sealing closed rollup buckets into plain counters (migration 0008), exactly and repeatably.

A pass (:func:`seal_rollups`) picks the 5-minute buckets to (re)seal — every bucket older
than ``now - grace`` that still has rows in the open set ``metrics_open`` and is not sealed, and every
sealed bucket in which a task that received events since the previous pass has events (a
late or re-sent event) — and recomputes each from ``events FINAL``, so duplicates never count
and sealing twice gives the same rows. It then derives every closed hour holding a bucket
sealed now (or never derived) from the 5-minute rows, and every closed day likewise from the
hours (:mod:`.seal_sql`). All rows of a pass carry one new ``generation`` and become visible
at once when the pass publishes (:mod:`.seal_publish`); then the pass deletes what readers no
longer use: the rows it superseded, and — physically, so that no query scans them again — the
open set's rows of sealed buckets. A pass first repairs what an interrupted one left.

What a caller must know: between a late event's arrival and the next pass, a query may miss
that event (its bucket is sealed) or, when the event's task had been counted as local in an
older bucket, count that task or attempt twice. The next pass repairs both; run passes more
often than the grace period (:func:`start_sealer`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from retrylens.store import EventStore
from retrylens.store.events import caller_niceness_kept
from retrylens.store.schema import DAY, FIVE_MINUTES, HOUR, LOG, OPEN
from retrylens.store.sql import query_rows, query_scalar

from .rollup_query import sealed_state
from .seal_publish import (
    drop_open_rows,
    drop_superseded,
    log_sealed,
    publish,
    repair,
    sealed_generations,
    write_settings,
)
from .seal_sql import bucket_of, derive_statements, five_minute_statements

log = logging.getLogger(__name__)

DEFAULT_GRACE = timedelta(minutes=10)
#: Late rows are looked for in ``metrics_touched`` from this long before the previous pass.
TOUCH_MARGIN = timedelta(seconds=60)
BUCKET = bucket_of(FIVE_MINUTES)


@dataclass(frozen=True)
class SealReport:
    """What one pass did: 5-minute buckets sealed for the first time, re-sealed, the boundary, and
    hours and days (re)derived."""

    sealed: int
    resealed: int
    boundary: datetime
    hours: int = 0
    days: int = 0

    @property
    def buckets(self) -> int:
        return self.sealed + self.resealed


def _floor(moment: datetime, size: int = FIVE_MINUTES) -> datetime:
    seconds = int(moment.timestamp()) // size * size
    return datetime.fromtimestamp(seconds, tz=UTC)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _open_buckets(store: EventStore, boundary: datetime) -> set[datetime]:
    """Buckets before ``boundary`` that are in the open set (unsealed, late or backfilled)."""
    sql = store.sql(
        f"SELECT DISTINCT bucket FROM [[db]].{OPEN} WHERE bucket < {{boundary:DateTime('UTC')}}"
    )
    return {_utc(r["bucket"]) for r in query_rows(store.client, sql, {"boundary": boundary})}


def _touched_buckets(store: EventStore, since: datetime, boundary: datetime) -> set[datetime]:
    """Buckets before ``boundary`` holding events of tasks that received events since ``since``."""
    sql = store.sql(
        f"SELECT DISTINCT {BUCKET} AS b FROM [[db]].events WHERE (project, task_id) IN"
        " (SELECT project, task_id FROM [[db]].metrics_touched WHERE inserted_at >= {since:DateTime64(3, 'UTC')})"
        " AND ts < {boundary:DateTime64(3, 'UTC')}"
    )
    return {
        _utc(r["b"]) for r in query_rows(store.client, sql, {"since": since, "boundary": boundary})
    }


def _chunks(items: Sequence[datetime], size: int) -> Iterable[list[datetime]]:
    for first in range(0, len(items), max(1, size)):
        yield list(items[first : first + size])


def _run(store: EventStore, statements: Sequence[str], params: dict[str, Any]) -> None:
    """The sealing statements (each recomputes buckets from ``events FINAL``: the pass's CPU), on
    engine threads at the store's write priority (the server's store apart: below its reads)."""
    settings = {**write_settings(store), **store.write_priority()}
    for statement in statements:
        with caller_niceness_kept():
            store.client.command(store.sql(statement), parameters=params, settings=settings)


def _seal_five_minutes(
    store: EventStore, buckets: Sequence[datetime], generation: int, chunk: int
) -> None:
    for part in _chunks(buckets, chunk):
        params = {
            "buckets": part,
            "generation": generation,
            "lo": part[0],
            "hi": part[-1] + timedelta(seconds=FIVE_MINUTES),
        }
        _run(store, five_minute_statements(), params)


def _coarser_buckets(
    store: EventStore, finer: int, coarser: int, renewed: Sequence[datetime], boundary: datetime
) -> list[datetime]:
    """Closed ``coarser`` buckets to (re)derive: those holding a ``finer`` bucket written now, and
    those holding published ``finer`` buckets but never derived (e.g. an interrupted pass)."""
    closed = _floor(boundary, coarser)
    sql = store.sql(
        f"SELECT DISTINCT {bucket_of(coarser, 'bucket')} AS c FROM [[db]].{LOG}"
        f" WHERE level = {int(finer)} AND bucket < {{closed:DateTime('UTC')}}"
        f" AND c NOT IN (SELECT bucket FROM [[db]].{LOG} WHERE level = {int(coarser)})"
    )
    missing = {_utc(r["c"]) for r in query_rows(store.client, sql, {"closed": closed})}
    again = {_floor(b, coarser) for b in renewed} - missing
    return sorted(b for b in missing | again if b < closed)


def _derive(
    store: EventStore,
    finer: int,
    coarser: int,
    buckets: Sequence[datetime],
    renewed: Sequence[datetime],
    generation: int,
    chunk: int,
) -> None:
    for part in _chunks(buckets, chunk):
        lo, hi = part[0], part[-1] + timedelta(seconds=coarser)
        params = {
            "buckets": part,
            "generation": generation,
            "lo": lo,
            "hi": hi,
            "renewed": [b for b in renewed if lo <= b < hi],
        }
        _run(store, derive_statements(finer, coarser), params)


def seal_rollups(
    store: EventStore,
    *,
    now: datetime | None = None,
    grace: timedelta = DEFAULT_GRACE,
    chunk_buckets: int = 2016,
) -> SealReport:
    """Seal every closed bucket not sealed yet, re-seal those that received late events, and
    (re)derive the hours and days they close or change.

    Safe to run any number of times and concurrently with inserts; not concurrently with
    itself (the periodic sealer runs one pass at a time). ``chunk_buckets`` bounds the
    events one statement reads (2016 buckets = one week).
    """
    boundary = _floor(_utc(now or datetime.now(UTC)) - grace)
    started = _utc(query_scalar(store.client, "SELECT now64(3, 'UTC')"))
    state = repair(store, sealed_state(store))
    published = {
        level: sealed_generations(store, level, state.published)
        for level in (FIVE_MINUTES, HOUR, DAY)
    }
    open_buckets = _open_buckets(store, boundary)
    fresh = open_buckets - published[FIVE_MINUTES].keys()
    stale: set[datetime] = set()
    if state.sealed_at is not None:
        touched = _touched_buckets(store, state.sealed_at - TOUCH_MARGIN, boundary)
        stale = (touched & published[FIVE_MINUTES].keys()) - fresh
    todo = sorted(fresh | stale)
    generation = max(time.time_ns(), state.published + 1)
    _seal_five_minutes(store, todo, generation, chunk_buckets)
    hours = _coarser_buckets(store, FIVE_MINUTES, HOUR, todo, boundary)
    _derive(store, FIVE_MINUTES, HOUR, hours, todo, generation, max(1, chunk_buckets // 12))
    days = _coarser_buckets(store, HOUR, DAY, hours, boundary)
    _derive(store, HOUR, DAY, days, hours, generation, max(1, chunk_buckets // 288))
    written = {FIVE_MINUTES: todo, HOUR: hours, DAY: days}
    log_sealed(store, written, generation, started)
    superseded = [
        (level, b, published[level][b])
        for level, buckets in written.items()
        for b in buckets
        if b in published[level]
    ]
    drop_superseded(store, publish(store, state, written, generation, started, superseded))
    drop_open_rows(store, sorted(open_buckets | set(todo)))
    return SealReport(
        sealed=len(fresh), resealed=len(stale), boundary=boundary, hours=len(hours), days=len(days)
    )


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
