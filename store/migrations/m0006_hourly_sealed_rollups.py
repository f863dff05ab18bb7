"""Hourly sealed rollups: closed hours as plain counters, read for hour-aligned queries.

Why: the 5-minute sealed level (migration 0005) keeps one row per (bucket, slice, error
type), so a month-long query still reads a row per slice and 5 minutes. Once every 5-minute
bucket of an hour is past the sealing boundary, the sealing job
(:mod:`retrylens.analytics.sealing`) recomputes the hour from ``events FINAL`` into
``metrics_sealed_1h`` / ``metrics_sealed_open_1h`` and records it in ``metrics_seal_log_1h``.
The tables have the columns of their 5-minute counterparts, with ``bucket`` the start of the
hour; a key is *local* when its events all lie in one hour and one (agent, phase, policy)
slice. Readers take an hour from this level when the query's range covers it whole and its
grouping is coarser than an hour boundary (summaries, slices, hourly and longer trends), and
the 5-minute rows for the edges and for 5-minute trends; exactness follows from the same
argument as for 5 minutes (local keys live in one row, the others in merged set states).
The 5-minute rows stay: nothing is deleted from the lower level.
"""

from __future__ import annotations

from .base import Migration, MigrationContext

HOUR_SECONDS = 3600
TS = "DateTime64(3, 'UTC')"
#: The distinct-count measures of the 5-minute level (migration 0005), in column order.
COUNT_MEASURES: tuple[str, ...] = (
    "calls", "failures", "retries", "retry_successes", "degrades", "handoffs", "budget_exhaustions",
    "tasks", "tasks_retried", "tasks_recovered", "tasks_handed_off",
)
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
            "metrics_sealed_1h", _sealed_columns(), "MergeTree",
            f"PARTITION BY toYYYYMM(bucket) ORDER BY (project, bucket, any_error, {slice_key})",
            "cityHash64(project)",
        ),
        (
            "metrics_sealed_open_1h", _open_columns(), "MergeTree",
            f"PARTITION BY toYYYYMM(bucket) ORDER BY (project, bucket, {slice_key})",
            "cityHash64(project)",
        ),
        (
            "metrics_seal_log_1h",
            f"bucket DateTime('UTC'), generation UInt64, sealed_at {TS}, events UInt64",
            "ReplacingMergeTree", "ORDER BY bucket", "cityHash64(bucket)",
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
    return statements


def backwards(ctx: MigrationContext) -> list[str]:
    """Drop the hourly level; readers fall back to the 5-minute rows, which were never removed."""
    statements: list[str] = []
    for table, *_rest in _tables():
        statements.extend(ctx.drop(table))
    return statements


MIGRATION = Migration(6, "hourly_sealed_rollups", forwards, backwards)
