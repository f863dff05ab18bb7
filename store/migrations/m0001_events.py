"""The append-only ``events`` table.

ReplacingMergeTree keyed by (project, task_id, correlation_id, event_id): a re-sent event
collapses into one row at merge time, and exact queries read ``FINAL``. The insert
deduplication window makes a retried batch insert (same token) a no-op immediately,
before any merge. Monthly partitions keep TTL drops cheap; bulky columns expire sooner.
"""

from __future__ import annotations

from .base import Migration, MigrationContext

TABLE = "events"
#: The table's columns as this migration created them: (name, type, bulky: gets the shorter TTL). Frozen: later
#: columns come from later migrations (0010 on), and the live list is
#: :data:`retrylens.store.event_table.EVENT_COLUMNS` (a test holds the migrated table equal to it).
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("event_id", "UUID", False),
    ("schema_version", "UInt8", False),
    ("ts", "DateTime64(3, 'UTC')", False),
    ("project", "LowCardinality(String)", False),
    ("agent_name", "LowCardinality(String)", False),
    ("agent_role", "LowCardinality(String)", False),
    ("task_id", "String", False),
    ("correlation_id", "String", False),
    ("parent_task_id", "String", False),
    ("trace_id", "String", False),
    ("span_id", "String", False),
    ("parent_span_id", "String", False),
    ("attempt", "UInt16", False),
    ("phase", "LowCardinality(String)", False),
    ("kind", "LowCardinality(String)", False),
    ("dependency", "LowCardinality(String)", False),
    ("error_type", "LowCardinality(String)", False),
    ("retryable", "Nullable(Bool)", False),
    ("error_message", "String", True),
    ("error_code", "LowCardinality(String)", False),
    ("error_status", "UInt16", False),
    ("stack_digest", "String", False),
    ("input_fingerprint", "String", False),
    ("input_features", "String", False),
    ("context_message_count", "UInt32", False),
    ("context_token_count", "UInt32", False),
    ("pollution_score", "Float32", False),
    ("context_snapshot", "String", True),
    ("side_effects", "String", False),
    ("side_effect_keys", "Array(String)", False),
    ("decision", "LowCardinality(String)", False),
    ("decision_reason", "String", False),
    ("backoff_ms", "UInt32", False),
    ("policy_id", "LowCardinality(String)", False),
    ("policy_version", "LowCardinality(String)", False),
    ("shadow", "Bool", False),
    ("shadow_decision", "LowCardinality(String)", False),
    ("propensity", "Nullable(Float32)", False),
    ("degraded", "Bool", False),
    ("outcome", "LowCardinality(String)", False),
    ("tokens_in", "UInt32", False),
    ("tokens_out", "UInt32", False),
    ("cost_usd", "Float64", False),
    ("latency_ms", "UInt32", False),
    ("kafka_topic", "LowCardinality(String)", False),
    ("kafka_partition", "Int32", False),
    ("kafka_offset", "Int64", False),
    ("ingested_at", "DateTime64(3, 'UTC')", False),
)


def forwards(ctx: MigrationContext) -> list[str]:
    bulky_ttl = f"toDateTime(ts) + INTERVAL {int(ctx.bulky_ttl_days)} DAY"
    columns = ",\n    ".join(
        f"`{name}` {kind}"
        + (" DEFAULT now64(3)" if name == "ingested_at" else "")
        + (f" TTL {bulky_ttl}" if bulky else "")
        + (" CODEC(ZSTD(3))" if bulky or name in {"side_effects", "input_features"} else "")
        for name, kind, bulky in COLUMNS
    )
    storage = ctx.storage_name(TABLE)
    return [
        f"CREATE TABLE IF NOT EXISTS {ctx.table(storage)}{ctx.on_cluster} (\n    {columns}\n)"
        f"\nENGINE = {ctx.engine('ReplacingMergeTree', storage)}"
        "\nPARTITION BY toYYYYMM(ts)"
        "\nORDER BY (project, task_id, correlation_id, event_id)"
        f"\nTTL toDateTime(ts) + INTERVAL {int(ctx.event_ttl_days)} DAY DELETE"
        f"\nSETTINGS {ctx.dedup_setting()}",
        *ctx.distributed(TABLE, "cityHash64(project, task_id)"),
    ]


def backwards(ctx: MigrationContext) -> list[str]:
    return ctx.drop(TABLE)


MIGRATION = Migration(1, "events", forwards, backwards)
