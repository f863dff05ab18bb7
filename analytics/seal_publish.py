"""How a sealing pass becomes visible to readers at once, and how an interrupted one is repaired.

Every row a pass writes to ``metrics_rollup`` and ``metrics_rollup_log`` carries the pass's new
generation, higher than any published one, and readers read generations up to the published
one only. The pass publishes by adding one row to ``metrics_rollup_state`` (:func:`publish`):
the new generation, how far each level is now sealed, and the rows it superseded (older
generations of buckets it re-sealed), which readers skip until :func:`drop_superseded` has
deleted them and a further state row says so. One insert of one row is atomic, so readers see
all of a pass or none of it.

A pass that stops half-way leaves rows above the published generation, or superseded rows
still listed; the next pass starts with :func:`repair`, which deletes both. The log is a plain
``MergeTree`` for the same reason: a never-published entry must not replace a published one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from retrylens.store import EventStore
from retrylens.store.schema import LOG, OPEN, ROLLUP, STATE
from retrylens.store.sql import query_rows, query_scalar

from .rollup_query import SealedState

#: (level, bucket, generation) of rows a re-seal replaced.
Superseded = tuple[int, datetime, int]


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def write_settings(store: EventStore) -> dict[str, Any]:
    """On a cluster, inserts through Distributed tables land before the next statement reads them."""
    return {"insert_distributed_sync": 1} if store.ctx.cluster else {}


def sealed_generations(store: EventStore, level: int, published: int) -> dict[datetime, int]:
    """Sealed bucket of ``level`` → its current (newest published) generation."""
    sql = store.sql(
        f"SELECT bucket, max(generation) AS g FROM [[db]].{LOG} WHERE level = {int(level)}"
        " AND generation <= {published:UInt64} GROUP BY bucket"
    )
    return {
        _utc(r["bucket"]): int(r["g"])
        for r in query_rows(store.client, sql, {"published": published})
    }


def log_sealed(
    store: EventStore, written: Mapping[int, Sequence[datetime]], generation: int, started: datetime
) -> None:
    rows = [
        [level, bucket, generation, started]
        for level, buckets in written.items()
        for bucket in buckets
    ]
    if rows:
        store.client.insert(
            f"{store.ctx.database}.{LOG}",
            rows,
            column_names=["level", "bucket", "generation", "sealed_at"],
            settings=write_settings(store),
        )


def publish(
    store: EventStore,
    state: SealedState,
    written: Mapping[int, Sequence[datetime]],
    generation: int,
    started: datetime,
    superseded: Sequence[Superseded],
) -> SealedState:
    """Make ``generation`` visible: one new state row with each level's extent grown to its newest
    bucket written now, and the superseded rows readers must skip."""
    extent = dict(state.extent)
    for level, buckets in written.items():
        if buckets:
            end = max(buckets) + timedelta(seconds=level)
            extent[level] = max(extent.get(level, end), end)
    new = SealedState(
        extent=extent,
        published=generation,
        superseded=tuple(superseded),
        sealed_at=started,
        revision=max(time.time_ns(), state.revision + 1),
    )
    _write(store, new)
    return new


def _write(store: EventStore, state: SealedState) -> None:
    sealed_at = state.sealed_at or datetime.now(UTC)
    store.client.insert(
        f"{store.ctx.database}.{STATE}",
        [
            [
                state.revision,
                state.published,
                sorted(state.extent.items()),
                list(state.superseded),
                sealed_at,
            ]
        ],
        column_names=["revision", "generation", "sealed_to", "superseded", "sealed_at"],
        settings=write_settings(store),
    )


def drop_superseded(store: EventStore, state: SealedState) -> SealedState:
    """Delete the rows and log entries ``state`` lists as superseded (few: a lightweight delete),
    then publish that they are gone."""
    if not state.superseded:
        return state
    ctx, params = store.ctx, {"dead": list(state.superseded)}
    for table in (ROLLUP, LOG):
        store.client.command(
            f"DELETE FROM {ctx.table(ctx.storage_name(table))}{ctx.on_cluster}"
            " WHERE (level, bucket, generation) IN {dead:Array(Tuple(UInt32, DateTime('UTC'), UInt64))}",
            parameters=params,
        )
    cleared = replace(state, superseded=(), revision=max(time.time_ns(), state.revision + 1))
    _write(store, cleared)
    return cleared


def repair(store: EventStore, state: SealedState) -> SealedState:
    """Remove what an interrupted pass left: rows and log entries of a never-published generation,
    and superseded rows still listed (readers skip both meanwhile)."""
    ctx, params = store.ctx, {"published": state.published}
    for table in (ROLLUP, LOG):
        found = f"SELECT count() FROM [[db]].{table} WHERE generation > {{published:UInt64}}"
        if int(query_scalar(store.client, store.sql(found), params) or 0):
            store.client.command(
                f"DELETE FROM {ctx.table(ctx.storage_name(table))}{ctx.on_cluster} WHERE generation > {{published:UInt64}}",
                parameters=params,
            )
    return drop_superseded(store, state)


def drop_open_rows(store: EventStore, buckets: Sequence[datetime]) -> None:
    """The open set's rows of sealed buckets, removed physically so that no query scans them again."""
    if buckets:
        ctx = store.ctx
        store.client.command(
            f"ALTER TABLE {ctx.table(ctx.storage_name(OPEN))}{ctx.on_cluster}"
            " DELETE WHERE bucket IN {buckets:Array(DateTime('UTC'))}",
            parameters={"buckets": list(buckets)},
            settings={"mutations_sync": 2},
        )
