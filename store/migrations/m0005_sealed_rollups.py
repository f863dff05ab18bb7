"""Sealed rollups: closed 5-minute buckets as plain counters, so reads stop growing with events.

Why: the set states of ``metrics_5m`` (migration 0002) are exact under re-sent events but
hold one hash per attempt, task and event, so reading them costs as much as a raw scan.
Once a bucket is closed (older than a grace period), the sealing job
(:mod:`retrylens.analytics.sealing`) recomputes it exactly from ``events FINAL`` into
``metrics_sealed`` and records it in ``metrics_seal_log``; readers then take that bucket
from ``metrics_sealed`` and only the unsealed buckets from ``metrics_5m``, whose rows of
sealed buckets the job deletes (``backwards`` refills them).

``metrics_sealed`` holds, per (bucket, project, agent, phase, policy version, error type):

- for every distinct-count measure, a plain count of the *local* keys (attempts or tasks
  whose events all lie in this one bucket and one (agent, phase, policy) slice), which is
  additive across rows;
- the event-level measures as additive values: sums of cost and tokens, and exact
  histograms (value → count) of retry latencies and backoffs for exact quantiles;
- ``any_error = 1`` rows (one per slice without the error type) whose counts ignore the
  error type, read instead of the others when a query neither filters nor groups by error
  type (an attempt has events with and without an error type, so per-error-type counts do
  not add up); they carry the slice's values too, so such a query reads only them.

``metrics_sealed_open`` holds the other keys — those spanning buckets or slices, a small
minority — as ``uniqExact`` states per slice, which readers merge with the unsealed set
states so that such a key is still counted once. It has rows only where such keys exist.

Every seal writes a new ``generation``; readers take, per bucket, the newest generation of
``metrics_seal_log``, so a re-seal replaces a bucket atomically; old generations are then
deleted. ``metrics_touched`` (fed by a view on ``events``) records which tasks received
events and when, so that a late event re-seals every bucket its task has events in.
"""

from __future__ import annotations

from .base import Migration, MigrationContext

#: The distinct-count measures of ``metrics_5m`` (migration 0002), in column order.
COUNT_MEASURES: tuple[str, ...] = (
    "calls", "failures", "retries", "retry_successes", "degrades", "handoffs", "budget_exhaustions",
    "tasks", "tasks_retried", "tasks_recovered", "tasks_handed_off",
)
TS = "DateTime64(3, 'UTC')"
SLICE_COLUMNS = (
    "project LowCardinality(String), bucket DateTime('UTC'), agent_name LowCardinality(String), "
    "phase LowCardinality(String), policy_version LowCardinality(String), error_type LowCardinality(String)"
)


def _sealed_columns() -> str:
    counts = ", ".join(f"`{name}` UInt64" for name in COUNT_MEASURES)
    return (
        f"{SLICE_COLUMNS}, any_error Bool, generation UInt64,\n    {counts},\n"
        "    retry_latency_values Array(UInt32), retry_latency_counts Array(UInt64),\n"
        "    backoff_values Array(UInt32), backoff_counts Array(UInt64),\n"
        "    failed_cost Float64, failed_tokens UInt64, retry_cost Float64, retry_tokens UInt64"
    )


def _open_columns() -> str:
    states = ", ".join(f"`{name}` AggregateFunction(uniqExact, UInt64)" for name in COUNT_MEASURES)
    return f"{SLICE_COLUMNS}, generation UInt64,\n    {states}"


def _tables() -> list[tuple[str, str, str, str, str]]:
    """(table, columns, engine family, key clauses, sharding key)."""
    slice_key = "agent_name, phase, policy_version, error_type, generation"
    return [
        (
            "metrics_sealed", _sealed_columns(), "MergeTree",
            f"PARTITION BY toYYYYMM(bucket) ORDER BY (project, bucket, any_error, {slice_key})",
            "cityHash64(project)",
        ),
        (
            "metrics_sealed_open", _open_columns(), "MergeTree",
            f"PARTITION BY toYYYYMM(bucket) ORDER BY (project, bucket, {slice_key})",
            "cityHash64(project)",
        ),
        (
            "metrics_seal_log",
            f"bucket DateTime('UTC'), generation UInt64, sealed_at {TS}, events UInt64",
            "ReplacingMergeTree", "ORDER BY bucket", "cityHash64(bucket)",
        ),
        (
            "metrics_touched",
            f"project LowCardinality(String), task_id String, inserted_at {TS}",
            "MergeTree",
            "ORDER BY (inserted_at, project, task_id) TTL toDateTime(inserted_at) + INTERVAL 7 DAY DELETE",
            "cityHash64(project, task_id)",
        ),
    ]


def forwards(ctx: MigrationContext) -> list[str]:
    statements: list[str] = []
    for table, columns, family, keys, sharding in _tables():
        storage = ctx.storage_name(table)
        version = "generation" if family == "ReplacingMergeTree" else ""
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {ctx.table(storage)}{ctx.on_cluster} (\n    {columns}\n)"
            f"\nENGINE = {ctx.engine(family, storage, version)}\n{keys}"
        )
        statements.extend(ctx.distributed(table, sharding))
    statements.append(
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {ctx.table('metrics_touched_mv')}{ctx.on_cluster} "
        f"TO {ctx.table(ctx.storage_name('metrics_touched'))}\n"
        "AS SELECT project, task_id, now64(3, 'UTC') AS inserted_at "
        f"FROM {ctx.table(ctx.storage_name('events'))} GROUP BY project, task_id"
    )
    return statements


def backwards(ctx: MigrationContext) -> list[str]:
    """Drop the sealed tables and refill the set states that sealing deleted from ``metrics_5m``."""
    statements = [f"DROP VIEW IF EXISTS {ctx.table('metrics_touched_mv')}{ctx.on_cluster} SYNC"]
    for table, *_rest in _tables():
        statements.extend(ctx.drop(table))
    return statements + _refill_statements(ctx)


# ---------------------------------------------------------------------------------------------
# What ``backwards`` refills: migration 0002's three rollups from ``events``, with 0002's
# definitions as released (a frozen copy: later migrations change the live definitions, and
# what this migration's ``backwards`` does must not change with them).

_ATTEMPT_KINDS = "('attempt_started', 'attempt_failed', 'attempt_succeeded')"
_OUTCOME_KINDS = "('attempt_failed', 'attempt_succeeded')"
_DEGRADING = "('degrade_scope', 'degrade_precision', 'degrade_dependency')"
_ATTEMPT_KEY = "cityHash64(project, task_id, correlation_id)"
_TASK_KEY = "cityHash64(project, task_id)"
_EVENT_KEY = "cityHash64(event_id)"
_IS_RETRY = "attempt >= 2"
_IS_HANDOFF = "(kind = 'handoff' OR decision = 'handoff_human')"
_UNIQ = "uniqExact"
#: ``metrics_5m``'s measures: (name, aggregate function, value, condition), in column order.
_MEASURES: tuple[tuple[str, str, str, str], ...] = (
    ("calls", _UNIQ, _ATTEMPT_KEY, f"kind IN {_ATTEMPT_KINDS}"),
    ("failures", _UNIQ, _ATTEMPT_KEY, "kind = 'attempt_failed'"),
    ("retries", _UNIQ, _ATTEMPT_KEY, f"kind IN {_ATTEMPT_KINDS} AND {_IS_RETRY}"),
    ("retry_successes", _UNIQ, _ATTEMPT_KEY, f"kind = 'attempt_succeeded' AND {_IS_RETRY}"),
    ("degrades", _UNIQ, _ATTEMPT_KEY, f"kind = 'decision' AND decision IN {_DEGRADING}"),
    ("handoffs", _UNIQ, _ATTEMPT_KEY, _IS_HANDOFF),
    ("budget_exhaustions", _UNIQ, _ATTEMPT_KEY, "error_type = 'budget_exhausted'"),
    ("tasks", _UNIQ, _TASK_KEY, "1"),
    ("tasks_retried", _UNIQ, _TASK_KEY, f"kind IN {_ATTEMPT_KINDS} AND {_IS_RETRY}"),
    ("tasks_recovered", _UNIQ, _TASK_KEY, f"kind = 'attempt_succeeded' AND {_IS_RETRY}"),
    ("tasks_handed_off", _UNIQ, _TASK_KEY, _IS_HANDOFF),
    ("retry_latency", "groupUniqArray", f"({_EVENT_KEY}, latency_ms)", f"kind IN {_OUTCOME_KINDS} AND {_IS_RETRY}"),
    ("backoff", "groupUniqArray", f"({_EVENT_KEY}, backoff_ms)", "kind = 'decision' AND backoff_ms > 0"),
    (
        "attempt_costs",
        "groupUniqArray",
        f"({_EVENT_KEY}, cost_usd, toUInt64(tokens_in) + tokens_out, kind = 'attempt_failed', {_IS_RETRY})",
        f"kind IN {_OUTCOME_KINDS} AND (kind = 'attempt_failed' OR {_IS_RETRY})",
    ),
)
_DIMENSIONS = "project, agent_name, phase, error_type, policy_version"


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


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


def _normalised_message() -> str:
    expression = "lower(error_message)"
    for pattern, replacement in _NORMALISERS:
        expression = f"replaceRegexpAll({expression}, {_sql_string(pattern)}, {_sql_string(replacement)})"
    return f"left(trimBoth({expression}), 200)"


_NOISE = (
    "(error_type = 'rate_limit' OR error_status = 429 OR "
    "match(lower(error_message), 'rate.?limit|quota|too many requests|throttl'))"
)


def _metrics_select(source: str) -> str:
    states = ",\n    ".join(f"{fn}IfState({value}, {cond}) AS {name}" for name, fn, value, cond in _MEASURES)
    return (
        f"SELECT {_DIMENSIONS}, toStartOfInterval(ts, INTERVAL 300 SECOND) AS bucket,\n    {states}\n"
        f"FROM {source} GROUP BY {_DIMENSIONS}, bucket"
    )


def _fingerprint_select(source: str) -> str:
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


def _groups_select(source: str) -> str:
    return (
        "SELECT project, group_id, day, any(et) AS error_type, any(pat) AS pattern,\n"
        "    max(noise) AS is_noise, anyState(error_message) AS example_message,\n"
        "    uniqExactState(attempt_key) AS failures, uniqExactState(task_key) AS tasks,\n"
        "    groupUniqArrayState(5)(task_id) AS example_tasks,\n"
        "    min(ts) AS first_seen, max(ts) AS last_seen\n"
        f"FROM (SELECT project, task_id, ts, error_message, toDate(ts) AS day,\n"
        f"    toString(error_type) AS et, {_normalised_message()} AS pat,\n"
        f"    cityHash64(et, pat) AS group_id, {_NOISE} AS noise,\n"
        f"    {_ATTEMPT_KEY} AS attempt_key, {_TASK_KEY} AS task_key\n"
        f"  FROM {source} WHERE kind = 'attempt_failed')\n"
        "GROUP BY project, group_id, day"
    )


def _refill_statements(ctx: MigrationContext) -> list[str]:
    """Refill ``metrics_5m``, ``fingerprint_daily`` and ``failure_groups_daily`` from ``events`` (idempotent)."""
    source = f"(SELECT * FROM {ctx.table('events')} WHERE 1)"
    selects = (
        ("metrics_5m", _metrics_select),
        ("fingerprint_daily", _fingerprint_select),
        ("failure_groups_daily", _groups_select),
    )
    return [f"INSERT INTO {ctx.table(table)}\n{select(source)}" for table, select in selects]


MIGRATION = Migration(5, "sealed_rollups", forwards, backwards)
