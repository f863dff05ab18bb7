"""The context's loop and pollution signals as columns of ``events``.

Why: alert rules, the task view and the pollution report filter on these per event, and
reading them out of the ``context_snapshot`` JSON (a bulky column with a short TTL) would
lose them when the snapshot expires. From schema v1's ``ContextSnapshot`` (defaults 0 for
events sent before the fields existed):

- ``trailing_errors``: messages at the end of the context that carry error text, back to back;
- ``recent_error_share``: the error share of the context's last N messages;
- ``repeated_tool_calls``: the attempt's tool calls identical to the call just before.

Rows stored before this migration read 0. This module imports nothing from other
migrations or from the live table definition: the DDL it ran never changes.
"""

from __future__ import annotations

from .base import Migration, MigrationContext

TABLE = "events"
#: (name, type, the column it follows), in order.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("trailing_errors", "UInt32", "pollution_score"),
    ("recent_error_share", "Float32", "trailing_errors"),
    ("repeated_tool_calls", "UInt32", "recent_error_share"),
)


def _tables(ctx: MigrationContext) -> list[str]:
    return [ctx.storage_name(TABLE), TABLE] if ctx.cluster else [TABLE]


def forwards(ctx: MigrationContext) -> list[str]:
    adds = ", ".join(f"ADD COLUMN IF NOT EXISTS `{name}` {kind} AFTER `{after}`" for name, kind, after in COLUMNS)
    return [f"ALTER TABLE {ctx.table(table)}{ctx.on_cluster} {adds}" for table in _tables(ctx)]


def backwards(ctx: MigrationContext) -> list[str]:
    drops = ", ".join(f"DROP COLUMN IF EXISTS `{name}`" for name, _kind, _after in reversed(COLUMNS))
    return [f"ALTER TABLE {ctx.table(table)}{ctx.on_cluster} {drops}" for table in reversed(_tables(ctx))]


MIGRATION = Migration(10, "loop_signals", forwards, backwards)
