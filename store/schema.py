"""The live schema: every table as the newest migration leaves it, and the SQL readers share.

Why a module apart from the migrations: readers (analytics, api, dashboard, …) need table
names, the rollups' layout and SQL snippets (the message normaliser, histogram keys), and a
migration is frozen once released — migration 0009 changed what is counted without changing
what 0002 meant. If readers imported from migrations, a new migration would either have to
edit an old one or leave readers on old definitions. So migrations inline their own DDL and
import nothing from here (:mod:`retrylens.store.migrations`), and readers import only from
here.

This module describes the CURRENT schema, i.e. after the newest migration. A migration that
changes a table changes this module in the same commit; ``tests/foundation/test_migrations_frozen.py``
migrates a real store and holds every table's columns, engine and keys to :data:`TABLES`, and
the open set's SQL here to the view the newest migration created.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .event_table import EVENT_COLUMNS
from .migrations.base import MigrationContext

TS = "DateTime64(3, 'UTC')"
LC = "LowCardinality(String)"


@dataclass(frozen=True)
class Table:
    """One table as ``SHOW CREATE TABLE`` shows it once every migration has run."""

    name: str
    #: (name, type) in column order, types as ``system.columns`` reports them.
    columns: tuple[tuple[str, str], ...]
    #: as ``SHOW CREATE TABLE`` prints it on one server, e.g. ``ReplacingMergeTree(version)``
    engine: str
    order_by: str
    partition_by: str = ""

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _type in self.columns)


# ---------------------------------------------------------------------------------------------
# Table and view names.

EVENTS = "events"
FINGERPRINT_DAILY, FINGERPRINT_DAILY_VIEW = "fingerprint_daily", "fingerprint_daily_mv"
FAILURE_GROUPS_DAILY, FAILURE_GROUPS_DAILY_VIEW = "failure_groups_daily", "failure_groups_daily_mv"
ALERT_RULES, ALERT_STATE, ALERT_LOG = "alert_rules", "alert_state", "alert_log"
IDEMPOTENCY_KEYS = "idempotency_keys"
RETRY_POLICIES, KILL_SWITCHES = "retry_policies", "kill_switches"
PRECHECKS = "prechecks"
TOUCHED, TOUCHED_VIEW = "metrics_touched", "metrics_touched_mv"
HANDOFFS, HANDOFFS_VIEW = "handoffs", "handoffs_mv"
OPEN, OPEN_VIEW = "metrics_open", "metrics_open_mv"
ROLLUP, LOG, STATE = "metrics_rollup", "metrics_rollup_log", "metrics_rollup_state"
#: The migrator's ledger (:data:`retrylens.store.migrator.LEDGER`).
MIGRATIONS_LEDGER = "schema_migrations"
#: Materialized views on ``events`` and the table each fills.
VIEWS: dict[str, str] = {
    FINGERPRINT_DAILY_VIEW: FINGERPRINT_DAILY,
    FAILURE_GROUPS_DAILY_VIEW: FAILURE_GROUPS_DAILY,
    TOUCHED_VIEW: TOUCHED,
    HANDOFFS_VIEW: HANDOFFS,
    OPEN_VIEW: OPEN,
}

# ---------------------------------------------------------------------------------------------
# The rollups' layout (open set and sealed levels; migrations 0008 and 0009).

FIVE_MINUTES, HOUR, DAY = 300, 3600, 86_400
#: Sealed levels of ``metrics_rollup`` (``level`` = bucket seconds).
LEVELS: tuple[int, ...] = (FIVE_MINUTES, HOUR, DAY)
#: ``metrics_rollup.grain`` values, in Enum8 order.
GRAINS: tuple[str, ...] = ("keys", "slice_error", "slice", "project_error", "project")
#: Slice columns of the open set, in its key order.
OPEN_DIMENSIONS: tuple[str, ...] = ("project", "agent_name", "phase", "error_type", "policy_version")
KEY_COLUMNS: tuple[str, ...] = ("key_hash", "key_measures", "key_first", "key_last", "key_slices")
VALUE_COLUMNS: tuple[str, ...] = (
    "retry_latency_keys",
    "retry_latency_counts",
    "retry_latency_sum",
    "backoff_keys",
    "backoff_counts",
    "failed_nano_usd",
    "failed_tokens",
    "retry_nano_usd",
    "retry_tokens",
)
#: Count columns of ``metrics_rollup`` in column order: 0008's eleven, then 0009's four. Columns
#: written since 0009 are the stored counts of :data:`retrylens.analytics.definitions.COUNTS`;
#: ``tasks``, ``tasks_retried`` and ``tasks_recovered`` stay but are no longer written.
ROLLUP_COUNT_COLUMNS: tuple[str, ...] = (
    "calls", "failures", "retries", "retry_successes", "degrades", "handoffs", "budget_exhaustions",
    "tasks", "tasks_retried", "tasks_recovered", "tasks_handed_off",
    "successful_without_retry", "successful_with_retry", "failed_with_retry", "failed_without_retry",
)

#: Histogram keys: values up to ``EXACT_UP_TO`` are their own key, larger ones fall in log buckets
#: of ratio ``GAMMA`` (relative error ``RELATIVE_ERROR``); key of bucket ``i`` = ``i - KEY_OFFSET``.
#: Stored data depends on them (migration 0008 froze the same numbers).
RELATIVE_ERROR = 0.01
EXACT_UP_TO = 100
GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)
LN_GAMMA = math.log(GAMMA)
KEY_OFFSET = math.ceil(math.log(EXACT_UP_TO) / LN_GAMMA) - EXACT_UP_TO - 1


def histogram_key_sql(value: str) -> str:
    """SQL: the UInt16 histogram key of the unsigned integer expression ``value``."""
    return (
        f"if({value} <= {EXACT_UP_TO}, toUInt16({value}),"
        f" toUInt16(ceil(log(greatest({value}, {EXACT_UP_TO + 1})) / {LN_GAMMA!r}) - {KEY_OFFSET}))"
    )


def nano_usd_sql(value: str) -> str:
    """SQL: ``value`` (USD, Float64) as whole nano-dollars (Int64), so sums do not depend on order."""
    return f"toInt64(round({value} * 1e9))"


def mask_sql(counts: tuple[tuple[str, str, str], ...], unit: str) -> str:
    """SQL: the bits of the ``unit``-keyed counts of ``counts`` (name, unit, condition; bit ``i`` =
    ``counts[i]``) that an event counts for."""
    bits = [f"if({cond}, {1 << i}, 0)" for i, (_n, u, cond) in enumerate(counts) if u == unit]
    return f"toUInt16({' + '.join(bits)})"


def open_select(
    source: str,
    counts: tuple[tuple[str, str, str], ...],
    keys: Mapping[str, str],
    values: tuple[str, str, str],
) -> str:
    """The open-set rows of the events in ``source`` (a table or a subquery).

    ``counts`` are (name, unit, condition) in bit order, ``keys`` the SQL key of each unit
    (``attempt``, ``task``), ``values`` the conditions of the retry latencies, the backoffs and
    the costs. The caller passes the live definitions (:func:`retrylens.analytics.rollups.open_select`),
    which the view of the newest migration computes too (a test holds them equal).
    """
    dims = ", ".join(OPEN_DIMENSIONS)
    pairs = f"[({keys['attempt']}, {mask_sql(counts, 'attempt')}), ({keys['task']}, {mask_sql(counts, 'task')})]"
    tokens = "toUInt64(tokens_in) + tokens_out"
    retry = "attempt >= 2"
    latency, backoff, costed = values
    key = histogram_key_sql
    states = (
        f"groupUniqArrayIfState((cityHash64(event_id), {key('latency_ms')}, latency_ms), {latency}) AS `retry_latency`,\n"
        f"    groupUniqArrayIfState((cityHash64(event_id), {key('backoff_ms')}), {backoff}) AS `backoff`,\n"
        f"    groupUniqArrayIfState((cityHash64(event_id), if(kind = 'attempt_failed', {nano_usd_sql('cost_usd')}, 0),"
        f" if(kind = 'attempt_failed', {tokens}, 0), if({retry}, {nano_usd_sql('cost_usd')}, 0),"
        f" if({retry}, {tokens}, 0)), {costed}) AS `attempt_costs`"
    )
    return (
        f"SELECT {dims}, toStartOfInterval(ts, INTERVAL {FIVE_MINUTES} SECOND) AS bucket,\n"
        f"    groupUniqArrayArrayState(arrayFilter(k -> k.2 != 0, {pairs})) AS `keys`,\n    {states}\n"
        f"FROM {source} GROUP BY {dims}, bucket"
    )


# ---------------------------------------------------------------------------------------------
# The daily rollups of fingerprints and failure groups (migration 0002, unchanged since). Their
# keys are 0002's: an attempt is still keyed by its correlation id there.

_ATTEMPT_KINDS = "('attempt_started', 'attempt_failed', 'attempt_succeeded')"
_ATTEMPT_KEY = "cityHash64(project, task_id, correlation_id)"
_TASK_KEY = "cityHash64(project, task_id)"


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# Message normalisation, in order: timestamps, URLs, e-mails, UUIDs, quoted values, paths,
# long hex/alphanumeric ids, numbers; then whitespace. One SQL expression used by the view
# and by raw queries, so a group id means the same thing everywhere.
_NORMALISERS: tuple[tuple[str, str], ...] = (
    (r"\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(z|[+-]\d{2}:?\d{2})?", "<ts>"),
    (r"https?://[^\s'\"]+", "<url>"),
    (r"[\w.+-]+@[\w-]+\.[\w.-]+", "<email>"),
    (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>"),
    (r"'[^']*'", "'<v>'"),
    (r"\"[^\"]*\"", '"<v>"'),
    (r"(/[\w.\-]+){2,}/?", "<path>"),
    (
        r"\b[0-9a-f_\-]*[0-9][0-9a-f_\-]*[a-f][0-9a-f_\-]*\b|\b[0-9a-f_\-]*[a-f][0-9a-f_\-]*[0-9][0-9a-f_\-]*\b",
        "<hex>",
    ),
    (r"\b\d+([.,]\d+)*[a-z]{0,3}\b", "<n>"),
    (r"\s+", " "),
)


def normalised_message_sql(column: str = "error_message") -> str:
    """SQL: the normalised message of ``column``, as ``failure_groups_daily`` groups it."""
    expression = f"lower({column})"
    for pattern, replacement in _NORMALISERS:
        expression = f"replaceRegexpAll({expression}, {_sql_string(pattern)}, {_sql_string(replacement)})"
    return f"left(trimBoth({expression}), 200)"


NOISE_SQL = (
    "(error_type = 'rate_limit' OR error_status = 429 OR "
    "match(lower(error_message), 'rate.?limit|quota|too many requests|throttl'))"
)


def fingerprint_select(source: str) -> str:
    """The ``fingerprint_daily`` rows of the events in ``source``."""
    return (
        "SELECT project, input_fingerprint, toDate(ts) AS day,\n"
        f"    uniqExactIfState({_ATTEMPT_KEY}, kind IN {_ATTEMPT_KINDS}) AS attempts,\n"
        f"    uniqExactIfState({_ATTEMPT_KEY}, kind = 'attempt_failed') AS failures,\n"
        f"    uniqExactState({_TASK_KEY}) AS tasks,\n"
        f"    uniqExactIfState({_TASK_KEY}, kind = 'task_finished' AND outcome IN ('failed', 'handed_off')) AS tasks_failed,\n"
        "    maxMapState(if(kind = 'attempt_failed', [toString(error_type)], []), "
        "if(kind = 'attempt_failed', [ts], [])) AS error_last_seen,\n"
        "    min(ts) AS first_seen, max(ts) AS last_seen\n"
        f"FROM {source} WHERE input_fingerprint != '' GROUP BY project, input_fingerprint, day"
    )


def groups_select(source: str) -> str:
    """The ``failure_groups_daily`` rows of the events in ``source``."""
    return (
        "SELECT project, group_id, day, any(et) AS error_type, any(pat) AS pattern,\n"
        "    max(noise) AS is_noise, anyState(error_message) AS example_message,\n"
        "    uniqExactState(attempt_key) AS failures, uniqExactState(task_key) AS tasks,\n"
        "    groupUniqArrayState(5)(task_id) AS example_tasks,\n"
        "    min(ts) AS first_seen, max(ts) AS last_seen\n"
        f"FROM (SELECT project, task_id, ts, error_message, toDate(ts) AS day,\n"
        f"    toString(error_type) AS et, {normalised_message_sql()} AS pat,\n"
        f"    cityHash64(et, pat) AS group_id, {NOISE_SQL} AS noise,\n"
        f"    {_ATTEMPT_KEY} AS attempt_key, {_TASK_KEY} AS task_key\n"
        f"  FROM {source} WHERE kind = 'attempt_failed')\n"
        "GROUP BY project, group_id, day"
    )


_DAILY_SELECTS = {"fingerprints": (FINGERPRINT_DAILY, fingerprint_select), "groups": (FAILURE_GROUPS_DAILY, groups_select)}


def backfill_statements(
    ctx: MigrationContext, where: str = "1", kinds: tuple[str, ...] = ("fingerprints", "groups")
) -> list[str]:
    """``INSERT … SELECT`` statements that (re)fill the daily rollups of ``kinds`` from stored events.

    Safe to run any number of times and over ranges the views already cover: every state is a
    set, so re-inserted events are absorbed. ``where`` is a trusted SQL condition on ``events``
    (e.g. a time range with bound parameters).
    """
    source = f"(SELECT * FROM {ctx.table(EVENTS)} WHERE {where})"
    statements = []
    for kind in kinds:
        table, select = _DAILY_SELECTS[kind]
        statements.append(f"INSERT INTO {ctx.table(table)}\n{select(source)}")
    return statements


# ---------------------------------------------------------------------------------------------
# Every table, as the migrations leave it.


def _counts(names: tuple[str, ...], kind: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, kind) for name in names)


_SLICE = (("agent_name", LC), ("phase", LC), ("policy_version", LC), ("error_type", LC))

TABLES: dict[str, Table] = {
    table.name: table
    for table in (
        Table(
            EVENTS,
            tuple((c.name, c.type) for c in EVENT_COLUMNS),
            "ReplacingMergeTree",
            "(project, task_id, correlation_id, event_id)",
            "toYYYYMM(ts)",
        ),
        Table(
            FINGERPRINT_DAILY,
            (
                ("project", LC), ("input_fingerprint", "String"), ("day", "Date"),
                *_counts(("attempts", "failures", "tasks", "tasks_failed"), "AggregateFunction(uniqExact, UInt64)"),
                ("error_last_seen", f"AggregateFunction(maxMap, Array(String), Array({TS}))"),
                ("first_seen", f"SimpleAggregateFunction(min, {TS})"),
                ("last_seen", f"SimpleAggregateFunction(max, {TS})"),
            ),
            "AggregatingMergeTree",
            "(project, input_fingerprint, day)",
            "toYYYYMM(day)",
        ),
        Table(
            FAILURE_GROUPS_DAILY,
            (
                ("project", LC), ("group_id", "UInt64"), ("day", "Date"),
                ("error_type", f"SimpleAggregateFunction(any, {LC})"),
                ("pattern", "SimpleAggregateFunction(any, String)"),
                ("is_noise", "SimpleAggregateFunction(max, Bool)"),
                ("example_message", "AggregateFunction(any, String)"),
                *_counts(("failures", "tasks"), "AggregateFunction(uniqExact, UInt64)"),
                ("example_tasks", "AggregateFunction(groupUniqArray(5), String)"),
                ("first_seen", f"SimpleAggregateFunction(min, {TS})"),
                ("last_seen", f"SimpleAggregateFunction(max, {TS})"),
            ),
            "AggregatingMergeTree",
            "(project, group_id, day)",
            "toYYYYMM(day)",
        ),
        Table(
            ALERT_RULES,
            (
                ("rule_id", "String"), ("name", "String"), ("metric", LC), ("op", LC), ("threshold", "Float64"),
                ("window_minutes", "UInt32"), ("filters", "String"), ("per", LC), ("min_calls", "UInt32"),
                ("webhook_url", "String"), ("enabled", "Bool"), ("deleted", "Bool"), ("updated_at", TS),
            ),
            "ReplacingMergeTree(updated_at)",
            "rule_id",
        ),
        Table(
            ALERT_STATE,
            (
                ("rule_id", "String"), ("slice_value", "String"), ("status", LC), ("value", "Float64"),
                ("threshold", "Float64"), ("started_at", TS), ("updated_at", TS),
            ),
            "ReplacingMergeTree(updated_at)",
            "(rule_id, slice_value)",
        ),
        Table(
            ALERT_LOG,
            (
                ("ts", TS), ("rule_id", "String"), ("rule_name", "String"), ("slice_value", "String"),
                ("status", LC), ("value", "Float64"), ("threshold", "Float64"), ("message", "String"),
                ("delivered", "Bool"),
            ),
            "MergeTree",
            "(rule_id, ts)",
            "toYYYYMM(ts)",
        ),
        Table(
            IDEMPOTENCY_KEYS,
            (
                ("key", "String"), ("task_id", "String"), ("tool", LC), ("status", LC), ("result", "String"),
                ("version", "UInt64"), ("updated_at", TS),
            ),
            "ReplacingMergeTree(version)",
            "key",
        ),
        Table(
            RETRY_POLICIES,
            (("project", "String"), ("agent", "String"), ("revision", "UInt32"), ("body", "String"), ("created_at", TS)),
            "ReplacingMergeTree",
            "(project, agent, revision)",
        ),
        Table(
            KILL_SWITCHES,
            (
                ("project", "String"), ("agent", "String"), ("enabled", "Bool"), ("reason", "String"),
                ("revision", "UInt64"), ("updated_at", TS),
            ),
            "ReplacingMergeTree(revision)",
            "(project, agent)",
        ),
        Table(
            TOUCHED,
            (("project", LC), ("task_id", "String"), ("inserted_at", TS)),
            "MergeTree",
            "(inserted_at, project, task_id)",
        ),
        Table(
            HANDOFFS,
            (
                ("project", LC), ("ts", TS), ("event_id", "UUID"), ("task_id", "String"), ("correlation_id", "String"),
                ("attempt", "UInt16"), ("kind", LC), ("agent_name", LC), ("phase", LC), ("error_type", LC),
                ("decision_reason", "String"), ("policy_version", LC), ("trace_id", "String"),
            ),
            "ReplacingMergeTree",
            "(project, ts, event_id)",
            "toYYYYMM(ts)",
        ),
        Table(
            OPEN,
            (
                *((d, LC) for d in OPEN_DIMENSIONS),
                ("bucket", "DateTime('UTC')"),
                ("keys", "AggregateFunction(groupUniqArrayArray, Array(Tuple(UInt64, UInt16)))"),
                ("retry_latency", "AggregateFunction(groupUniqArray, Tuple(UInt64, UInt16, UInt32))"),
                ("backoff", "AggregateFunction(groupUniqArray, Tuple(UInt64, UInt16))"),
                ("attempt_costs", "AggregateFunction(groupUniqArray, Tuple(UInt64, Int64, UInt64, Int64, UInt64))"),
            ),
            "AggregatingMergeTree",
            "(project, bucket, agent_name, phase, error_type, policy_version)",
            "toYYYYMM(bucket)",
        ),
        Table(
            ROLLUP,
            (
                ("level", "UInt32"), ("bucket", "DateTime('UTC')"), ("project", LC),
                ("grain", "Enum8(" + ", ".join(f"'{g}' = {i}" for i, g in enumerate(GRAINS)) + ")"),
                *_SLICE,
                ("generation", "UInt64"),
                ("key_hash", "UInt64"), ("key_measures", "UInt16"), ("key_first", "DateTime('UTC')"),
                ("key_last", "DateTime('UTC')"), ("key_slices", "UInt32"),
                *_counts(ROLLUP_COUNT_COLUMNS[:11], "UInt64"),
                ("retry_latency_keys", "Array(UInt16)"), ("retry_latency_counts", "Array(UInt64)"),
                ("retry_latency_sum", "UInt64"), ("backoff_keys", "Array(UInt16)"), ("backoff_counts", "Array(UInt64)"),
                ("failed_nano_usd", "Int64"), ("failed_tokens", "UInt64"), ("retry_nano_usd", "Int64"),
                ("retry_tokens", "UInt64"),
                *_counts(ROLLUP_COUNT_COLUMNS[11:], "UInt64"),
            ),
            "MergeTree",
            "(project, level, grain, bucket, agent_name, phase, policy_version, error_type, generation, key_hash)",
            "toYYYYMM(bucket)",
        ),
        Table(
            LOG,
            (("level", "UInt32"), ("bucket", "DateTime('UTC')"), ("generation", "UInt64"), ("sealed_at", TS)),
            "MergeTree",
            "(level, bucket, generation)",
        ),
        Table(
            STATE,
            (
                ("revision", "UInt64"), ("generation", "UInt64"),
                ("sealed_to", "Array(Tuple(UInt32, DateTime('UTC')))"),
                ("superseded", "Array(Tuple(UInt32, DateTime('UTC'), UInt64))"),
                ("sealed_at", TS),
            ),
            "ReplacingMergeTree(revision)",
            "tuple()",
        ),
        Table(
            PRECHECKS,
            (
                ("precheck_id", "String"), ("ts", TS), ("project", LC), ("agent", LC), ("task_id", "String"),
                ("input_fingerprint", "String"), ("risk", "Float64"), ("model_version", LC), ("known_bad", "Bool"),
                ("advice", "Array(LowCardinality(String))"), ("max_attempts", "UInt16"), ("explanation", "String"),
            ),
            "ReplacingMergeTree",
            "(project, ts, precheck_id)",
            "toYYYYMM(ts)",
        ),
        Table(
            MIGRATIONS_LEDGER,
            (("version", "UInt32"), ("name", "String"), ("applied_at", TS)),
            "ReplacingMergeTree",
            "version",
        ),
    )
}
