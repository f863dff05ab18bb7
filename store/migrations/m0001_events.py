"""The append-only ``events`` table.

ReplacingMergeTree keyed by (project, task_id, correlation_id, event_id): a re-sent event
collapses into one row at merge time, and exact queries read ``FINAL``. The insert
deduplication window makes a retried batch insert (same token) a no-op immediately,
before any merge. Monthly partitions keep TTL drops cheap; bulky columns expire sooner.
"""

from __future__ import annotations

from retrylens.store.event_table import EVENT_COLUMNS

from .base import Migration, MigrationContext

TABLE = "events"


def forwards(ctx: MigrationContext) -> list[str]:
    bulky_ttl = f"toDateTime(ts) + INTERVAL {int(ctx.bulky_ttl_days)} DAY"
    columns = ",\n    ".join(
        f"`{c.name}` {c.type}"
        + (" DEFAULT now64(3)" if c.name == "ingested_at" else "")
        + (f" TTL {bulky_ttl}" if c.bulky else "")
        + (" CODEC(ZSTD(3))" if c.bulky or c.name in {"side_effects", "input_features"} else "")
        for c in EVENT_COLUMNS
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
