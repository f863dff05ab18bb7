"""Every pre-check the API answered, so it can be joined to how its task ended.

Why: a risk model is only as good as its scores on tasks it never saw, and advice only as
good as the outcomes of the tasks that followed it. Kept in memory, the server's last
1,000 pre-checks vanished on restart and could not be joined to anything; stored here,
each row (who asked, the input's fingerprint, the risk, the model version, the advice
given) joins its task's events by ``(project, task_id)`` when the agent sent the task id,
and otherwise by fingerprint and time. Whether the agent applied the advice is read from
the task's own ``task_started`` event (the SDK writes the applied advice there), so it is
what the agent did, not what it was told.

A ``ReplacingMergeTree`` on ``(project, ts, precheck_id)``: a batch written twice (a
retried insert) collapses; readers use ``FINAL``. Rows live as long as events do. This
module imports nothing from other migrations or the live schema: its DDL never changes.
"""

from __future__ import annotations

from .base import Migration, MigrationContext

TABLE = "prechecks"
_COLUMNS = (
    "    `precheck_id` String,\n"
    "    `ts` DateTime64(3, 'UTC'),\n"
    "    `project` LowCardinality(String),\n"
    "    `agent` LowCardinality(String),\n"
    "    `task_id` String,\n"
    "    `input_fingerprint` String,\n"
    "    `risk` Float64,\n"
    "    `model_version` LowCardinality(String),\n"
    "    `known_bad` Bool,\n"
    "    `advice` Array(LowCardinality(String)),\n"
    "    `max_attempts` UInt16,\n"
    "    `explanation` String CODEC(ZSTD(3))\n"
)


def forwards(ctx: MigrationContext) -> list[str]:
    storage = ctx.storage_name(TABLE)
    return [
        f"CREATE TABLE IF NOT EXISTS {ctx.table(storage)}{ctx.on_cluster} (\n{_COLUMNS})"
        f"\nENGINE = {ctx.engine('ReplacingMergeTree', storage)}"
        "\nPARTITION BY toYYYYMM(ts)\nORDER BY (project, ts, precheck_id)"
        f"\nTTL toDateTime(ts) + INTERVAL {int(ctx.event_ttl_days)} DAY DELETE",
        *ctx.distributed(TABLE, "cityHash64(project, task_id)"),
    ]


def backwards(ctx: MigrationContext) -> list[str]:
    return ctx.drop(TABLE)


MIGRATION = Migration(11, "prechecks", forwards, backwards)
