"""Counts keyed so that an attempt, a task and a hand-off count once; the four task outcomes.

Why: up to 0008 an attempt was keyed by its correlation id and a hand-off matched both the
attempt's ``handoff_human`` decision and the task's ``handoff`` event, which the SDK sends
under the correlation id ``<task>:<attempt>`` — so every hand-off counted twice. Counts also
matched every event of a key (an attempt's start and its end), so an attempt that spanned two
buckets counted in both and trends did not add up to the totals.

From this migration on (the live definitions are :mod:`retrylens.analytics.definitions`; a
test holds them equal to the frozen ones below):

- an attempt is ``(project, task_id, attempt)``, a task ``(project, task_id)``;
- every count picks ONE counting event per key: an attempt's outcome event, a task's
  outcome event (``task_finished`` or the compact event), the ``handoff`` event;
- four new task counts, the resilience4j outcome kinds (the outcome event's ``attempt`` is
  the number of attempts made); ``tasks``, ``tasks_retried`` and ``tasks_recovered`` are
  sums of them, so their columns are no longer written.

Upgrading: the open set's view is recreated with the new key bits and the open set refilled
from ``events``; the sealed levels are emptied, so readers read the open set (exactly) until
the next sealing pass seals the whole history again. Buckets whose raw events have expired
(``event_ttl_days``) cannot be rebuilt and are gone from the rollups. ``backwards`` restores
0008's definitions the same way. This module imports nothing from other migrations: what it
means never changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .base import Migration, MigrationContext

OPEN, OPEN_VIEW = "metrics_open", "metrics_open_mv"
ROLLUP, LOG, STATE = "metrics_rollup", "metrics_rollup_log", "metrics_rollup_state"
DIMENSIONS = ("project", "agent_name", "phase", "error_type", "policy_version")
NEW_COUNTS = ("successful_without_retry", "successful_with_retry", "failed_with_retry", "failed_without_retry")

_ENDED = "kind IN ('attempt_failed', 'attempt_succeeded')"
_RETRY = "attempt >= 2"
_DEGRADING = "('degrade_scope', 'degrade_precision', 'degrade_dependency')"
_FAILED_TASK = "outcome NOT IN ('', 'succeeded')"
_BEFORE_ATTEMPTS = "kind IN ('attempt_started', 'attempt_failed', 'attempt_succeeded')"

#: (name, unit, condition), in bit order: the counts from this migration on.
COUNTS: tuple[tuple[str, str, str], ...] = (
    ("calls", "attempt", _ENDED),
    ("failures", "attempt", "kind = 'attempt_failed'"),
    ("retries", "attempt", f"{_ENDED} AND {_RETRY}"),
    ("retry_successes", "attempt", f"kind = 'attempt_succeeded' AND {_RETRY}"),
    ("degrades", "attempt", f"kind = 'decision' AND decision IN {_DEGRADING}"),
    ("handoffs", "attempt", "kind = 'handoff'"),
    ("budget_exhaustions", "attempt", "kind = 'attempt_failed' AND error_type = 'budget_exhausted'"),
    ("successful_without_retry", "task", f"outcome = 'succeeded' AND NOT {_RETRY}"),
    ("successful_with_retry", "task", f"outcome = 'succeeded' AND {_RETRY}"),
    ("failed_with_retry", "task", f"{_FAILED_TASK} AND {_RETRY}"),
    ("failed_without_retry", "task", f"{_FAILED_TASK} AND NOT {_RETRY}"),
    ("tasks_handed_off", "task", "outcome = 'handed_off'"),
)
KEYS = {"attempt": "cityHash64(project, task_id, attempt)", "task": "cityHash64(project, task_id)"}
RETRY_OUTCOME = f"{_ENDED} AND {_RETRY}"
WAITED = "kind = 'decision' AND backoff_ms > 0"
COSTED = f"{_ENDED} AND (kind = 'attempt_failed' OR {_RETRY})"

#: 0008's definitions, restored by ``backwards``.
BEFORE_COUNTS: tuple[tuple[str, str, str], ...] = (
    ("calls", "attempt", _BEFORE_ATTEMPTS),
    ("failures", "attempt", "kind = 'attempt_failed'"),
    ("retries", "attempt", f"{_BEFORE_ATTEMPTS} AND {_RETRY}"),
    ("retry_successes", "attempt", f"kind = 'attempt_succeeded' AND {_RETRY}"),
    ("degrades", "attempt", f"kind = 'decision' AND decision IN {_DEGRADING}"),
    ("handoffs", "attempt", "(kind = 'handoff' OR decision = 'handoff_human')"),
    ("budget_exhaustions", "attempt", "error_type = 'budget_exhausted'"),
    ("tasks", "task", "1"),
    ("tasks_retried", "task", f"{_BEFORE_ATTEMPTS} AND {_RETRY}"),
    ("tasks_recovered", "task", f"kind = 'attempt_succeeded' AND {_RETRY}"),
    ("tasks_handed_off", "task", "(kind = 'handoff' OR decision = 'handoff_human')"),
)
BEFORE_KEYS = {"attempt": "cityHash64(project, task_id, correlation_id)", "task": "cityHash64(project, task_id)"}
_BEFORE_OUTCOMES = "kind IN ('attempt_failed', 'attempt_succeeded')"
BEFORE_VALUES = (
    f"{_BEFORE_OUTCOMES} AND {_RETRY}",
    WAITED,
    f"{_BEFORE_OUTCOMES} AND (kind = 'attempt_failed' OR {_RETRY})",
)

# The histogram keys and nano-dollars of the open set's values (as in 0008; stored data).
_EXACT_UP_TO = 100
_LN_GAMMA = math.log((1 + 0.01) / (1 - 0.01))
_KEY_OFFSET = math.ceil(math.log(_EXACT_UP_TO) / _LN_GAMMA) - _EXACT_UP_TO - 1


def _key(value: str) -> str:
    return (
        f"if({value} <= {_EXACT_UP_TO}, toUInt16({value}),"
        f" toUInt16(ceil(log(greatest({value}, {_EXACT_UP_TO + 1})) / {_LN_GAMMA!r}) - {_KEY_OFFSET}))"
    )


def _nano(value: str) -> str:
    return f"toInt64(round({value} * 1e9))"


def mask_sql(counts: tuple[tuple[str, str, str], ...], unit: str) -> str:
    """SQL: the bits of the ``unit``-keyed counts of ``counts`` that an event counts for."""
    bits = [f"if({cond}, {1 << i}, 0)" for i, (_n, u, cond) in enumerate(counts) if u == unit]
    return f"toUInt16({' + '.join(bits)})"


def open_select(
    source: str,
    counts: tuple[tuple[str, str, str], ...] = COUNTS,
    keys: dict[str, str] = KEYS,
    values: tuple[str, str, str] = (RETRY_OUTCOME, WAITED, COSTED),
) -> str:
    """The open-set rows of the events in ``source`` (a table or a subquery)."""
    dims = ", ".join(DIMENSIONS)
    pairs = f"[({keys['attempt']}, {mask_sql(counts, 'attempt')}), ({keys['task']}, {mask_sql(counts, 'task')})]"
    tokens = "toUInt64(tokens_in) + tokens_out"
    latency, backoff, costed = values
    states = (
        f"groupUniqArrayIfState((cityHash64(event_id), {_key('latency_ms')}, latency_ms), {latency}) AS `retry_latency`,\n"
        f"    groupUniqArrayIfState((cityHash64(event_id), {_key('backoff_ms')}), {backoff}) AS `backoff`,\n"
        f"    groupUniqArrayIfState((cityHash64(event_id), if(kind = 'attempt_failed', {_nano('cost_usd')}, 0),"
        f" if(kind = 'attempt_failed', {tokens}, 0), if({_RETRY}, {_nano('cost_usd')}, 0),"
        f" if({_RETRY}, {tokens}, 0)), {costed}) AS `attempt_costs`"
    )
    return (
        f"SELECT {dims}, toStartOfInterval(ts, INTERVAL 300 SECOND) AS bucket,\n"
        f"    groupUniqArrayArrayState(arrayFilter(k -> k.2 != 0, {pairs})) AS `keys`,\n    {states}\n"
        f"FROM {source} GROUP BY {dims}, bucket"
    )


def _rebuild(ctx: MigrationContext, select: Callable[[str], str], columns: list[str], drop: bool) -> list[str]:
    """Drop the open set's view, empty the open set and the sealed levels, apply ``columns``
    (ALTERs of ``metrics_rollup``), recreate the view with ``select`` and refill the open set."""
    statements = [f"DROP VIEW IF EXISTS {ctx.table(OPEN_VIEW)}{ctx.on_cluster} SYNC"]
    for table in (OPEN, ROLLUP, LOG, STATE):
        statements.append(f"TRUNCATE TABLE IF EXISTS {ctx.table(ctx.storage_name(table))}{ctx.on_cluster}")
    tables = [ctx.storage_name(ROLLUP), ROLLUP] if ctx.cluster else [ROLLUP]
    for table in reversed(tables) if drop else tables:
        statements += [f"ALTER TABLE {ctx.table(table)}{ctx.on_cluster} {change}" for change in columns]
    statements.append(
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {ctx.table(OPEN_VIEW)}{ctx.on_cluster} "
        f"TO {ctx.table(ctx.storage_name(OPEN))}\nAS {select(ctx.table(ctx.storage_name('events')))}"
    )
    backfill = select(f"(SELECT * FROM {ctx.table('events')})")
    statements.append(f"INSERT INTO {ctx.table(OPEN)}\n{backfill}")
    return statements


def forwards(ctx: MigrationContext) -> list[str]:
    changes = [f"ADD COLUMN IF NOT EXISTS `{name}` UInt64" for name in NEW_COUNTS]
    return _rebuild(ctx, open_select, changes, drop=False)


def backwards(ctx: MigrationContext) -> list[str]:
    def before(source: str) -> str:
        return open_select(source, BEFORE_COUNTS, BEFORE_KEYS, BEFORE_VALUES)

    return _rebuild(ctx, before, [f"DROP COLUMN IF EXISTS `{name}`" for name in NEW_COUNTS], drop=True)


MIGRATION = Migration(9, "one_counting_event", forwards, backwards)
