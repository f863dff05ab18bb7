"""The hand-off index: the few events that hand a task to a human, kept apart from ``events``.

Why: the first screen lists recent hand-offs, and finding them in ``events`` (ordered by
project and task) means scanning the kind and time of every event in range, so that list
grew with the raw event count. A materialized view copies each ``handoff`` event and each
``handoff_human`` decision into ``handoffs`` as it is inserted; the table is ordered by
(project, ts, event_id), so a time range is an index range, and it is a
``ReplacingMergeTree`` on that key, so a re-sent event collapses (readers use ``FINAL``;
the table holds a row or two per hand-off, so that stays cheap). The migration backfills
the events stored before it; re-running the backfill only adds rows that collapse.
"""

from __future__ import annotations

from .base import Migration, MigrationContext

TABLE = "handoffs"
VIEW = "handoffs_mv"
COLUMNS = (
    "project", "ts", "event_id", "task_id", "correlation_id", "attempt", "kind", "agent_name", "phase",
    "error_type", "decision_reason", "policy_version", "trace_id",
)
_TYPES = (
    "project LowCardinality(String), ts DateTime64(3, 'UTC'), event_id UUID, task_id String, correlation_id String,"
    " attempt UInt16, kind LowCardinality(String), agent_name LowCardinality(String), phase LowCardinality(String),"
    " error_type LowCardinality(String), decision_reason String, policy_version LowCardinality(String), trace_id String"
)
IS_HANDOFF = "kind = 'handoff' OR decision = 'handoff_human'"


def _select(source: str) -> str:
    return f"SELECT {', '.join(COLUMNS)} FROM {source} WHERE {IS_HANDOFF}"


def forwards(ctx: MigrationContext) -> list[str]:
    storage = ctx.storage_name(TABLE)
    return [
        f"CREATE TABLE IF NOT EXISTS {ctx.table(storage)}{ctx.on_cluster} ({_TYPES})"
        f"\nENGINE = {ctx.engine('ReplacingMergeTree', storage)}"
        "\nPARTITION BY toYYYYMM(ts)\nORDER BY (project, ts, event_id)"
        f"\nTTL toDateTime(ts) + INTERVAL {int(ctx.event_ttl_days)} DAY DELETE",
        *ctx.distributed(TABLE, "cityHash64(project, task_id)"),
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {ctx.table(VIEW)}{ctx.on_cluster} TO {ctx.table(storage)}\n"
        f"AS {_select(ctx.table(ctx.storage_name('events')))}",
        f"INSERT INTO {ctx.table(TABLE)} ({', '.join(COLUMNS)})\n{_select(ctx.table('events'))}",
    ]


def backwards(ctx: MigrationContext) -> list[str]:
    return [f"DROP VIEW IF EXISTS {ctx.table(VIEW)}{ctx.on_cluster} SYNC", *ctx.drop(TABLE)]


MIGRATION = Migration(7, "handoff_index", forwards, backwards)
