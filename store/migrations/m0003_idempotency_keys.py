"""Idempotency keys of side-effecting agent tools (the SDK's shared key store).

One row per key and state change; ``ReplacingMergeTree(version)`` keeps the latest state
and reads use ``FINAL``. Keys expire after 30 days: a retry comes within minutes or hours.
"""

from __future__ import annotations

from .base import Migration, MigrationContext

TABLE = "idempotency_keys"


def forwards(ctx: MigrationContext) -> list[str]:
    storage = ctx.storage_name(TABLE)
    return [
        f"CREATE TABLE IF NOT EXISTS {ctx.table(storage)}{ctx.on_cluster} (\n"
        "    `key` String,\n"
        "    `task_id` String,\n"
        "    `tool` LowCardinality(String),\n"
        "    `status` LowCardinality(String),\n"
        "    `result` String CODEC(ZSTD(3)),\n"
        "    `version` UInt64,\n"
        "    `updated_at` DateTime64(3, 'UTC') DEFAULT now64(3)\n"
        f")\nENGINE = {ctx.engine('ReplacingMergeTree', storage, 'version')}"
        "\nORDER BY key"
        "\nTTL toDateTime(updated_at) + INTERVAL 30 DAY DELETE",
        *ctx.distributed(TABLE, "cityHash64(key)"),
    ]


def backwards(ctx: MigrationContext) -> list[str]:
    return ctx.drop(TABLE)


MIGRATION = Migration(3, "idempotency_keys", forwards, backwards)
