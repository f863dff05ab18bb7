"""Sealed rollups: closed 5-minute buckets as plain counters, so reads stop growing with events.

Why: the set states of ``metrics_5m`` (migration 0002) are exact under re-sent events but
hold one hash per attempt, task and event, so reading them costs as much as a raw scan.
Once a bucket is closed (older than a grace period), the sealing job
(:mod:`retrylens.analytics.sealing`) recomputes it exactly from ``events FINAL`` into
``metrics_sealed`` and records it in ``metrics_seal_log``; readers then take that bucket
from ``metrics_sealed`` and only the unsealed buckets from ``metrics_5m``, whose rows of
sealed buckets the job deletes (``backwards`` refills them).

``metrics_sealed`` holds, per (bucket, project, agent, phase, policy version, error type):

- for every distinct-count measure, a plain count of the *local* keys (attempts or tasks
  whose events all lie in this one bucket and one (agent, phase, policy) slice), which is
  additive across rows;
- the event-level measures as additive values: sums of cost and tokens, and exact
  histograms (value → count) of retry latencies and backoffs for exact quantiles;
- ``any_error = 1`` rows (one per slice without the error type) whose counts ignore the
  error type, read instead of the others when a query neither filters nor groups by error
  type (an attempt has events with and without an error type, so per-error-type counts do
  not add up); they carry the slice's values too, so such a query reads only them.

``metrics_sealed_open`` holds the other keys — those spanning buckets or slices, a small
minority — as ``uniqExact`` states per slice, which readers merge with the unsealed set
states so that such a key is still counted once. It has rows only where such keys exist.

Every seal writes a new ``generation``; readers take, per bucket, the newest generation of
``metrics_seal_log``, so a re-seal replaces a bucket atomically; old generations are then
deleted. ``metrics_touched`` (fed by a view on ``events``) records which tasks received
events and when, so that a late event re-seals every bucket its task has events in.
"""

from __future__ import annotations

from .base import Migration, MigrationContext
from .m0002_rollups import MEASURES, backfill_statements

COUNT_MEASURES: tuple[str, ...] = tuple(m.name for m in MEASURES if m.function == "uniqExact")
TS = "DateTime64(3, 'UTC')"
SLICE_COLUMNS = (
    "project LowCardinality(String), bucket DateTime('UTC'), agent_name LowCardinality(String), "
    "phase LowCardinality(String), policy_version LowCardinality(String), error_type LowCardinality(String)"
)


def _sealed_columns() -> str:
    counts = ", ".join(f"`{name}` UInt64" for name in COUNT_MEASURES)
    return (
        f"{SLICE_COLUMNS}, any_error Bool, generation UInt64,\n    {counts},\n"
        "    retry_latency_values Array(UInt32), retry_latency_counts Array(UInt64),\n"
        "    backoff_values Array(UInt32), backoff_counts Array(UInt64),\n"
        "    failed_cost Float64, failed_tokens UInt64, retry_cost Float64, retry_tokens UInt64"
    )


def _open_columns() -> str:
    states = ", ".join(f"`{name}` AggregateFunction(uniqExact, UInt64)" for name in COUNT_MEASURES)
    return f"{SLICE_COLUMNS}, generation UInt64,\n    {states}"


def _tables() -> list[tuple[str, str, str, str, str]]:
    """(table, columns, engine family, key clauses, sharding key)."""
    slice_key = "agent_name, phase, policy_version, error_type, generation"
    return [
        (
            "metrics_sealed", _sealed_columns(), "MergeTree",
            f"PARTITION BY toYYYYMM(bucket) ORDER BY (project, bucket, any_error, {slice_key})",
            "cityHash64(project)",
        ),
        (
            "metrics_sealed_open", _open_columns(), "MergeTree",
            f"PARTITION BY toYYYYMM(bucket) ORDER BY (project, bucket, {slice_key})",
            "cityHash64(project)",
        ),
        (
            "metrics_seal_log",
            f"bucket DateTime('UTC'), generation UInt64, sealed_at {TS}, events UInt64",
            "ReplacingMergeTree", "ORDER BY bucket", "cityHash64(bucket)",
        ),
        (
            "metrics_touched",
            f"project LowCardinality(String), task_id String, inserted_at {TS}",
            "MergeTree",
            "ORDER BY (inserted_at, project, task_id) TTL toDateTime(inserted_at) + INTERVAL 7 DAY DELETE",
            "cityHash64(project, task_id)",
        ),
    ]


def forwards(ctx: MigrationContext) -> list[str]:
    statements: list[str] = []
    for table, columns, family, keys, sharding in _tables():
        storage = ctx.storage_name(table)
        version = "generation" if family == "ReplacingMergeTree" else ""
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {ctx.table(storage)}{ctx.on_cluster} (\n    {columns}\n)"
            f"\nENGINE = {ctx.engine(family, storage, version)}\n{keys}"
        )
        statements.extend(ctx.distributed(table, sharding))
    statements.append(
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {ctx.table('metrics_touched_mv')}{ctx.on_cluster} "
        f"TO {ctx.table(ctx.storage_name('metrics_touched'))}\n"
        "AS SELECT project, task_id, now64(3, 'UTC') AS inserted_at "
        f"FROM {ctx.table(ctx.storage_name('events'))} GROUP BY project, task_id"
    )
    return statements


def backwards(ctx: MigrationContext) -> list[str]:
    """Drop the sealed tables and refill the set states that sealing deleted from ``metrics_5m``."""
    statements = [f"DROP VIEW IF EXISTS {ctx.table('metrics_touched_mv')}{ctx.on_cluster} SYNC"]
    for table, *_rest in _tables():
        statements.extend(ctx.drop(table))
    return statements + backfill_statements(ctx)


MIGRATION = Migration(5, "sealed_rollups", forwards, backwards)
