"""Rollups the dashboards read instead of raw events, and the alerting tables.

Why set-valued states: the events table is a ReplacingMergeTree, so a re-sent event is a
second physical row until a merge removes it, and a materialized view sees both rows. Every
rollup state here is therefore idempotent under repeats — ``uniqExact`` over a hash of
the attempt, task or event, ``groupUniqArray`` of ``(event hash, value)`` pairs for sums
and quantiles, ``min``/``max``/``maxMap`` for times — so a duplicate changes nothing and
the rollups give the same numbers as an exact ``FINAL`` scan.

The same property makes backfill safe: the migration ends with ``INSERT … SELECT`` from
``events`` (events stored before the views existed), and re-running it, or inserting a
time range again (readers use :func:`retrylens.store.schema.backfill_statements`), cannot
double-count.

Tables (``ctx.storage_name`` + a ``Distributed`` table on a cluster):

- ``metrics_5m``: attempt/task counts, retry latencies, backoffs and the cost of failed and
  retried attempts per (project, agent, phase, error type, policy version, 5-minute bucket).
- ``fingerprint_daily``: failures, tasks and last-seen error types per input fingerprint.
- ``failure_groups_daily``: failures per normalised-message group and day.
- ``alert_rules``, ``alert_state``, ``alert_log``: alert definitions, the firing/resolved
  state per rule and slice, and every notification sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Migration, MigrationContext

BUCKET_SECONDS = 300
FIRST_RETRY_ATTEMPT = 2  # attempts are numbered from 1; attempt 0 is "not an attempt"

ATTEMPT_KINDS = "('attempt_started', 'attempt_failed', 'attempt_succeeded')"
OUTCOME_KINDS = "('attempt_failed', 'attempt_succeeded')"
DEGRADING = "('degrade_scope', 'degrade_precision', 'degrade_dependency')"
ATTEMPT_KEY = "cityHash64(project, task_id, correlation_id)"
TASK_KEY = "cityHash64(project, task_id)"
EVENT_KEY = "cityHash64(event_id)"
IS_RETRY = f"attempt >= {FIRST_RETRY_ATTEMPT}"
IS_HANDOFF = "(kind = 'handoff' OR decision = 'handoff_human')"


@dataclass(frozen=True)
class Measure:
    """One rollup column: ``state`` of ``value`` over events where ``condition`` holds."""

    name: str
    function: str  # uniqExact or groupUniqArray
    value: str
    value_type: str
    condition: str


MEASURES: tuple[Measure, ...] = (
    Measure("calls", "uniqExact", ATTEMPT_KEY, "UInt64", f"kind IN {ATTEMPT_KINDS}"),
    Measure("failures", "uniqExact", ATTEMPT_KEY, "UInt64", "kind = 'attempt_failed'"),
    Measure(
        "retries", "uniqExact", ATTEMPT_KEY, "UInt64", f"kind IN {ATTEMPT_KINDS} AND {IS_RETRY}"
    ),
    Measure(
        "retry_successes",
        "uniqExact",
        ATTEMPT_KEY,
        "UInt64",
        f"kind = 'attempt_succeeded' AND {IS_RETRY}",
    ),
    Measure(
        "degrades",
        "uniqExact",
        ATTEMPT_KEY,
        "UInt64",
        f"kind = 'decision' AND decision IN {DEGRADING}",
    ),
    Measure("handoffs", "uniqExact", ATTEMPT_KEY, "UInt64", IS_HANDOFF),
    Measure(
        "budget_exhaustions", "uniqExact", ATTEMPT_KEY, "UInt64", "error_type = 'budget_exhausted'"
    ),
    Measure("tasks", "uniqExact", TASK_KEY, "UInt64", "1"),
    Measure(
        "tasks_retried", "uniqExact", TASK_KEY, "UInt64", f"kind IN {ATTEMPT_KINDS} AND {IS_RETRY}"
    ),
    Measure(
        "tasks_recovered",
        "uniqExact",
        TASK_KEY,
        "UInt64",
        f"kind = 'attempt_succeeded' AND {IS_RETRY}",
    ),
    Measure("tasks_handed_off", "uniqExact", TASK_KEY, "UInt64", IS_HANDOFF),
    Measure(
        "retry_latency",
        "groupUniqArray",
        f"({EVENT_KEY}, latency_ms)",
        "Tuple(UInt64, UInt32)",
        f"kind IN {OUTCOME_KINDS} AND {IS_RETRY}",
    ),
    Measure(
        "backoff",
        "groupUniqArray",
        f"({EVENT_KEY}, backoff_ms)",
        "Tuple(UInt64, UInt32)",
        "kind = 'decision' AND backoff_ms > 0",
    ),
    Measure(
        "attempt_costs",
        "groupUniqArray",
        f"({EVENT_KEY}, cost_usd, toUInt64(tokens_in) + tokens_out, kind = 'attempt_failed', {IS_RETRY})",
        "Tuple(UInt64, Float64, UInt64, Bool, Bool)",
        f"kind IN {OUTCOME_KINDS} AND (kind = 'attempt_failed' OR {IS_RETRY})",
    ),
)

METRIC_DIMENSIONS = ("project", "agent_name", "phase", "error_type", "policy_version")


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
    expression = f"lower({column})"
    for pattern, replacement in _NORMALISERS:
        expression = (
            f"replaceRegexpAll({expression}, {_sql_string(pattern)}, {_sql_string(replacement)})"
        )
    return f"left(trimBoth({expression}), 200)"


NOISE_SQL = (
    "(error_type = 'rate_limit' OR error_status = 429 OR "
    "match(lower(error_message), 'rate.?limit|quota|too many requests|throttl'))"
)


def _metrics_select(ctx: MigrationContext, source: str) -> str:
    states = ",\n    ".join(
        f"{m.function}IfState({m.value}, {m.condition}) AS {m.name}" for m in MEASURES
    )
    dims = ", ".join(METRIC_DIMENSIONS)
    return (
        f"SELECT {dims}, toStartOfInterval(ts, INTERVAL {BUCKET_SECONDS} SECOND) AS bucket,\n    {states}\n"
        f"FROM {source} GROUP BY {dims}, bucket"
    )


def _fingerprint_select(source: str) -> str:
    return (
        "SELECT project, input_fingerprint, toDate(ts) AS day,\n"
        f"    uniqExactIfState({ATTEMPT_KEY}, kind IN {ATTEMPT_KINDS}) AS attempts,\n"
        f"    uniqExactIfState({ATTEMPT_KEY}, kind = 'attempt_failed') AS failures,\n"
        f"    uniqExactState({TASK_KEY}) AS tasks,\n"
        f"    uniqExactIfState({TASK_KEY}, kind = 'task_finished' AND outcome IN ('failed', 'handed_off')) AS tasks_failed,\n"
        "    maxMapState(if(kind = 'attempt_failed', [toString(error_type)], []), "
        "if(kind = 'attempt_failed', [ts], [])) AS error_last_seen,\n"
        "    min(ts) AS first_seen, max(ts) AS last_seen\n"
        f"FROM {source} WHERE input_fingerprint != '' GROUP BY project, input_fingerprint, day"
    )


def _groups_select(source: str) -> str:
    return (
        "SELECT project, group_id, day, any(et) AS error_type, any(pat) AS pattern,\n"
        "    max(noise) AS is_noise, anyState(error_message) AS example_message,\n"
        "    uniqExactState(attempt_key) AS failures, uniqExactState(task_key) AS tasks,\n"
        "    groupUniqArrayState(5)(task_id) AS example_tasks,\n"
        "    min(ts) AS first_seen, max(ts) AS last_seen\n"
        f"FROM (SELECT project, task_id, ts, error_message, toDate(ts) AS day,\n"
        f"    toString(error_type) AS et, {normalised_message_sql()} AS pat,\n"
        f"    cityHash64(et, pat) AS group_id, {NOISE_SQL} AS noise,\n"
        f"    {ATTEMPT_KEY} AS attempt_key, {TASK_KEY} AS task_key\n"
        f"  FROM {source} WHERE kind = 'attempt_failed')\n"
        "GROUP BY project, group_id, day"
    )


def _state_columns() -> str:
    return ",\n    ".join(
        f"`{m.name}` AggregateFunction({m.function}, {m.value_type})" for m in MEASURES
    )


TS = "DateTime64(3, 'UTC')"


def _tables(ctx: MigrationContext) -> list[tuple[str, str, str, str]]:
    """(table, columns, engine family + key clauses, sharding key)."""
    return [
        (
            "metrics_5m",
            "project LowCardinality(String), agent_name LowCardinality(String), "
            "phase LowCardinality(String), error_type LowCardinality(String), "
            f"policy_version LowCardinality(String), bucket DateTime('UTC'),\n    {_state_columns()}",
            "AggregatingMergeTree|PARTITION BY toYYYYMM(bucket) "
            "ORDER BY (project, bucket, agent_name, phase, error_type, policy_version)",
            "cityHash64(project)",
        ),
        (
            "fingerprint_daily",
            "project LowCardinality(String), input_fingerprint String, day Date, "
            "attempts AggregateFunction(uniqExact, UInt64), failures AggregateFunction(uniqExact, UInt64), "
            "tasks AggregateFunction(uniqExact, UInt64), tasks_failed AggregateFunction(uniqExact, UInt64), "
            f"error_last_seen AggregateFunction(maxMap, Array(String), Array({TS})), "
            f"first_seen SimpleAggregateFunction(min, {TS}), last_seen SimpleAggregateFunction(max, {TS})",
            "AggregatingMergeTree|PARTITION BY toYYYYMM(day) ORDER BY (project, input_fingerprint, day)",
            "cityHash64(project, input_fingerprint)",
        ),
        (
            "failure_groups_daily",
            "project LowCardinality(String), group_id UInt64, day Date, "
            "error_type SimpleAggregateFunction(any, LowCardinality(String)), "
            "pattern SimpleAggregateFunction(any, String), is_noise SimpleAggregateFunction(max, Bool), "
            "example_message AggregateFunction(any, String), "
            "failures AggregateFunction(uniqExact, UInt64), tasks AggregateFunction(uniqExact, UInt64), "
            "example_tasks AggregateFunction(groupUniqArray(5), String), "
            f"first_seen SimpleAggregateFunction(min, {TS}), last_seen SimpleAggregateFunction(max, {TS})",
            "AggregatingMergeTree|PARTITION BY toYYYYMM(day) ORDER BY (project, group_id, day)",
            "cityHash64(project, group_id)",
        ),
        (
            "alert_rules",
            "rule_id String, name String, metric LowCardinality(String), op LowCardinality(String), "
            "threshold Float64, window_minutes UInt32, filters String, per LowCardinality(String), "
            "min_calls UInt32, webhook_url String, enabled Bool, deleted Bool, "
            f"updated_at {TS}",
            "ReplacingMergeTree|ORDER BY rule_id|updated_at",
            "cityHash64(rule_id)",
        ),
        (
            "alert_state",
            "rule_id String, slice_value String, status LowCardinality(String), value Float64, "
            f"threshold Float64, started_at {TS}, updated_at {TS}",
            "ReplacingMergeTree|ORDER BY (rule_id, slice_value)|updated_at",
            "cityHash64(rule_id)",
        ),
        (
            "alert_log",
            f"ts {TS}, rule_id String, rule_name String, slice_value String, "
            "status LowCardinality(String), value Float64, threshold Float64, message String, "
            "delivered Bool",
            "MergeTree|PARTITION BY toYYYYMM(ts) ORDER BY (rule_id, ts)",
            "cityHash64(rule_id)",
        ),
    ]


_VIEWS = (
    ("metrics_5m_mv", "metrics_5m", "metrics"),
    ("fingerprint_daily_mv", "fingerprint_daily", "fingerprints"),
    ("failure_groups_daily_mv", "failure_groups_daily", "groups"),
)


def _select(kind: str, ctx: MigrationContext, source: str) -> str:
    if kind == "metrics":
        return _metrics_select(ctx, source)
    if kind == "fingerprints":
        return _fingerprint_select(source)
    return _groups_select(source)


def backfill_statements(
    ctx: MigrationContext,
    where: str = "1",
    kinds: tuple[str, ...] = ("metrics", "fingerprints", "groups"),
) -> list[str]:
    """``INSERT … SELECT`` statements that (re)fill the rollups of ``kinds`` (default: all) from stored events.

    Safe to run any number of times and over ranges the views already cover: every state
    is a set, so re-inserted events are absorbed. ``where`` is a trusted SQL condition on
    ``events`` (e.g. a time range with bound parameters).
    """
    events = ctx.table("events")
    statements = []
    for _view, table, kind in _VIEWS:
        if kind not in kinds:
            continue
        source = f"(SELECT * FROM {events} WHERE {where})"
        statements.append(f"INSERT INTO {ctx.table(table)}\n{_select(kind, ctx, source)}")
    return statements


def _create_statements(ctx: MigrationContext, only: str | None = None) -> list[str]:
    """CREATE statements of every table and view (``only``: of that table and its view)."""
    statements: list[str] = []
    for table, columns, engine_spec, sharding in _tables(ctx):
        if only is not None and table != only:
            continue
        family, *clauses = engine_spec.split("|")
        version_column = clauses[-1] if family == "ReplacingMergeTree" else ""
        keys = clauses[0]
        storage = ctx.storage_name(table)
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {ctx.table(storage)}{ctx.on_cluster} (\n    {columns}\n)"
            f"\nENGINE = {ctx.engine(family, storage, version_column)}\n{keys}"
        )
        statements.extend(ctx.distributed(table, sharding))
    events_storage = ctx.table(ctx.storage_name("events"))
    for view, table, kind in _VIEWS:
        if only is not None and table != only:
            continue
        statements.append(
            f"CREATE MATERIALIZED VIEW IF NOT EXISTS {ctx.table(view)}{ctx.on_cluster} "
            f"TO {ctx.table(ctx.storage_name(table))}\nAS {_select(kind, ctx, events_storage)}"
        )
    return statements


def forwards(ctx: MigrationContext) -> list[str]:
    return _create_statements(ctx) + backfill_statements(ctx)


def backwards(ctx: MigrationContext) -> list[str]:
    statements = [
        f"DROP VIEW IF EXISTS {ctx.table(view)}{ctx.on_cluster} SYNC" for view, _t, _k in _VIEWS
    ]
    for table, *_rest in _tables(ctx):
        statements.extend(ctx.drop(table))
    return statements


MIGRATION = Migration(2, "rollups", forwards, backwards)
