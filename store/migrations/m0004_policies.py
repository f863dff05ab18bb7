"""The retry-policy configuration centre: versioned policies and kill switches.

``retry_policies`` keeps every revision of a policy per (project, agent); agent ``''`` is
the project's default. Rows are never updated: a PUT adds revision n+1, so the history is
the table. ``kill_switches`` keeps the latest state per (project, agent) — agent ``''``
stops the whole project — with ``ReplacingMergeTree(revision)``; reads use ``FINAL``.
"""

from __future__ import annotations

from .base import Migration, MigrationContext

POLICIES = "retry_policies"
KILL_SWITCHES = "kill_switches"


def forwards(ctx: MigrationContext) -> list[str]:
    policies = ctx.storage_name(POLICIES)
    switches = ctx.storage_name(KILL_SWITCHES)
    return [
        f"CREATE TABLE IF NOT EXISTS {ctx.table(policies)}{ctx.on_cluster} (\n"
        "    `project` String,\n"
        "    `agent` String,\n"
        "    `revision` UInt32,\n"
        "    `body` String CODEC(ZSTD(3)),\n"
        "    `created_at` DateTime64(3, 'UTC') DEFAULT now64(3)\n"
        f")\nENGINE = {ctx.engine('ReplacingMergeTree', policies)}"
        "\nORDER BY (project, agent, revision)",
        *ctx.distributed(POLICIES, "cityHash64(project)"),
        f"CREATE TABLE IF NOT EXISTS {ctx.table(switches)}{ctx.on_cluster} (\n"
        "    `project` String,\n"
        "    `agent` String,\n"
        "    `enabled` Bool,\n"
        "    `reason` String,\n"
        "    `revision` UInt64,\n"
        "    `updated_at` DateTime64(3, 'UTC') DEFAULT now64(3)\n"
        f")\nENGINE = {ctx.engine('ReplacingMergeTree', switches, 'revision')}"
        "\nORDER BY (project, agent)",
        *ctx.distributed(KILL_SWITCHES, "cityHash64(project)"),
    ]


def backwards(ctx: MigrationContext) -> list[str]:
    return [*ctx.drop(KILL_SWITCHES), *ctx.drop(POLICIES)]


MIGRATION = Migration(4, "policies", forwards, backwards)
