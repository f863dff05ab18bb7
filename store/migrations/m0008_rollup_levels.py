"""Every sealed rollup level in one table, a lean open set, project-wide rows, bounded-error histograms.

Why: migrations 0002/0005/0006 kept the open set as eleven ``uniqExact`` states per row and
each sealed level in a counter table plus a set-state table, so a first-screen query read five
``UNION ALL`` parts and merged some forty aggregate states — planning such a query cost more
than reading its rows — and exact latency histograms that did not compress.

``metrics_open`` (fed by a view on ``events``) replaces ``metrics_5m`` as the open set: per
5-minute bucket and slice, the set of ``(key hash, measure bits)`` pairs of its attempts and
tasks (bit ``i`` = counted by ``COUNT_MEASURES[i]``), and the event-level values as sets of
``(event hash, …)`` with histogram keys and nano-dollars computed at insert; sets, so a
re-sent event changes nothing, and enumerable, so readers merge them with the sealed keys.

``metrics_rollup`` holds the sealed 5-minute, hourly and daily levels (``level`` = bucket
seconds) and, per level, rows of these ``grain`` s:

==================  =====================================================================
``slice_error``     per (project, agent, phase, policy version, error type): counts of the
                    *local* keys (attempts or tasks whose events all lie in this bucket and
                    slice), histograms, cost and token sums
``slice``           the same per slice, error type ignored (``error_type = ''``); read when
                    a query neither filters nor groups by error type, because per-error-type
                    counts of one attempt do not add up
``project_error``   ``slice_error`` rows summed over agent, phase and policy (exact: a local
                    key lies in one slice), for queries that filter or group by none of them
``project``         ``slice`` rows summed likewise — the dashboard's first screen reads these
``keys``            one row per *non-local* key and (bucket, slice, error type) where it has
                    events: its hash, the measures it counts for (bit ``i`` of
                    ``key_measures`` = ``COUNT_MEASURES[i]``), and the time span and number of
                    slices of all its events, from which a coarser level tells whether the key
                    is local there. Readers count these hashes together with the open set's,
                    so a key spanning buckets or slices is counted once.
==================  =====================================================================

Latencies and backoffs are histograms over log-spaced keys (:func:`histogram_key_sql`; ≤ 1 %
relative error for p95, see :mod:`retrylens.analytics.histogram`); the exact sum of latencies
keeps the mean exact; costs are whole nano-dollars. Rows are read in small ranges (a day's
``project`` rows, say), so granules are 1024 rows rather than 8192. The 5-minute level is
computed from ``events FINAL``, each coarser level from the one below
(:mod:`retrylens.analytics.sealing`). ``metrics_rollup_log`` records each sealed (level, bucket)
and generation, for the sealer. A pass publishes all its levels at once by adding one row to
``metrics_rollup_state``: the newest published generation, how far each level is sealed, and
the superseded rows not deleted yet; readers read that row only (:mod:`retrylens.analytics.seal_publish`).

Upgrading: the open set is filled from ``events`` (idempotent), so it holds every bucket, and
the old tables are dropped; the next sealing pass seals the whole history into the new layout,
and until then readers read the open set, exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .base import Migration, MigrationContext

# Migration 0002's definitions, as released (a frozen copy: this migration's view and its
# ``backwards`` were built from them, and later migrations change the live ones).
BUCKET_SECONDS = 300
_ATTEMPT_KINDS = "('attempt_started', 'attempt_failed', 'attempt_succeeded')"
_OUTCOME_KINDS = "('attempt_failed', 'attempt_succeeded')"
_DEGRADING = "('degrade_scope', 'degrade_precision', 'degrade_dependency')"
ATTEMPT_KEY = "cityHash64(project, task_id, correlation_id)"
TASK_KEY = "cityHash64(project, task_id)"
EVENT_KEY = "cityHash64(event_id)"
IS_RETRY = "attempt >= 2"
_IS_HANDOFF = "(kind = 'handoff' OR decision = 'handoff_human')"
METRIC_DIMENSIONS = ("project", "agent_name", "phase", "error_type", "policy_version")
_UNIQ, _U64 = "uniqExact", "UInt64"


@dataclass(frozen=True)
class _Measure:
    """One of 0002's measures: ``function`` of ``value`` over events where ``condition`` holds."""

    name: str
    function: str
    value: str
    value_type: str
    condition: str


MEASURES: tuple[_Measure, ...] = (
    _Measure("calls", _UNIQ, ATTEMPT_KEY, _U64, f"kind IN {_ATTEMPT_KINDS}"),
    _Measure("failures", _UNIQ, ATTEMPT_KEY, _U64, "kind = 'attempt_failed'"),
    _Measure("retries", _UNIQ, ATTEMPT_KEY, _U64, f"kind IN {_ATTEMPT_KINDS} AND {IS_RETRY}"),
    _Measure("retry_successes", _UNIQ, ATTEMPT_KEY, _U64, f"kind = 'attempt_succeeded' AND {IS_RETRY}"),
    _Measure("degrades", _UNIQ, ATTEMPT_KEY, _U64, f"kind = 'decision' AND decision IN {_DEGRADING}"),
    _Measure("handoffs", _UNIQ, ATTEMPT_KEY, _U64, _IS_HANDOFF),
    _Measure("budget_exhaustions", _UNIQ, ATTEMPT_KEY, _U64, "error_type = 'budget_exhausted'"),
    _Measure("tasks", _UNIQ, TASK_KEY, _U64, "1"),
    _Measure("tasks_retried", _UNIQ, TASK_KEY, _U64, f"kind IN {_ATTEMPT_KINDS} AND {IS_RETRY}"),
    _Measure("tasks_recovered", _UNIQ, TASK_KEY, _U64, f"kind = 'attempt_succeeded' AND {IS_RETRY}"),
    _Measure("tasks_handed_off", _UNIQ, TASK_KEY, _U64, _IS_HANDOFF),
    _Measure(
        "retry_latency", "groupUniqArray", f"({EVENT_KEY}, latency_ms)", "Tuple(UInt64, UInt32)",
        f"kind IN {_OUTCOME_KINDS} AND {IS_RETRY}",
    ),
    _Measure(
        "backoff", "groupUniqArray", f"({EVENT_KEY}, backoff_ms)", "Tuple(UInt64, UInt32)",
        "kind = 'decision' AND backoff_ms > 0",
    ),
    _Measure(
        "attempt_costs",
        "groupUniqArray",
        f"({EVENT_KEY}, cost_usd, toUInt64(tokens_in) + tokens_out, kind = 'attempt_failed', {IS_RETRY})",
        "Tuple(UInt64, Float64, UInt64, Bool, Bool)",
        f"kind IN {_OUTCOME_KINDS} AND (kind = 'attempt_failed' OR {IS_RETRY})",
    ),
)
COUNT_MEASURES: tuple[str, ...] = tuple(m.name for m in MEASURES if m.function == _UNIQ)

FIVE_MINUTES, HOUR, DAY = BUCKET_SECONDS, 3600, 86_400
LEVELS: tuple[int, ...] = (FIVE_MINUTES, HOUR, DAY)
ROLLUP, LOG, STATE = "metrics_rollup", "metrics_rollup_log", "metrics_rollup_state"
OPEN, OPEN_VIEW = "metrics_open", "metrics_open_mv"
GRAINS = ("keys", "slice_error", "slice", "project_error", "project")
#: Bit of each distinct-count measure in ``key_measures`` and its element in ``metrics_open.keys``.
MEASURE_BITS: dict[str, int] = {name: i for i, name in enumerate(COUNT_MEASURES)}
KEY_COLUMNS = ("key_hash", "key_measures", "key_first", "key_last", "key_slices")
VALUE_COLUMNS = (
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
_MEASURE = {m.name: m for m in MEASURES}
#: Histogram keys: values up to ``EXACT_UP_TO`` are their own key, larger ones fall in log buckets
#: of ratio ``GAMMA`` (relative error ``RELATIVE_ERROR``); key of bucket ``i`` = ``i - KEY_OFFSET``.
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


def measure_mask_sql(task: bool) -> str:
    """SQL: the bits of the task-keyed (or attempt-keyed) measures that an event counts for."""
    bits = [
        f"if({_MEASURE[n].condition}, {1 << MEASURE_BITS[n]}, 0)"
        for n in COUNT_MEASURES
        if (_MEASURE[n].value == TASK_KEY) == task
    ]
    return f"toUInt16({' + '.join(bits)})"


_OPEN_VALUES = (
    (
        "retry_latency",
        "Tuple(UInt64, UInt16, UInt32)",
        f"({EVENT_KEY}, {histogram_key_sql('latency_ms')}, latency_ms)",
        _MEASURE["retry_latency"].condition,
    ),
    (
        "backoff",
        "Tuple(UInt64, UInt16)",
        f"({EVENT_KEY}, {histogram_key_sql('backoff_ms')})",
        _MEASURE["backoff"].condition,
    ),
    (
        "attempt_costs",
        "Tuple(UInt64, Int64, UInt64, Int64, UInt64)",
        f"({EVENT_KEY}, if(kind = 'attempt_failed', {nano_usd_sql('cost_usd')}, 0),"
        " if(kind = 'attempt_failed', toUInt64(tokens_in) + tokens_out, 0),"
        f" if({IS_RETRY}, {nano_usd_sql('cost_usd')}, 0), if({IS_RETRY}, toUInt64(tokens_in) + tokens_out, 0))",
        _MEASURE["attempt_costs"].condition,
    ),
)
_OLD_TABLES = (
    "metrics_sealed",
    "metrics_sealed_open",
    "metrics_seal_log",
    "metrics_sealed_1h",
    "metrics_sealed_open_1h",
    "metrics_seal_log_1h",
)


def _rollup_columns() -> str:
    grains = ", ".join(f"'{g}' = {i}" for i, g in enumerate(GRAINS))
    counts = ", ".join(f"`{name}` UInt64" for name in COUNT_MEASURES)
    return (
        "level UInt32, bucket DateTime('UTC'), project LowCardinality(String), "
        f"grain Enum8({grains}), agent_name LowCardinality(String), phase LowCardinality(String), "
        "policy_version LowCardinality(String), error_type LowCardinality(String), generation UInt64,\n    "
        "key_hash UInt64, key_measures UInt16, key_first DateTime('UTC'), key_last DateTime('UTC'), key_slices UInt32,\n"
        f"    {counts},\n"
        "    retry_latency_keys Array(UInt16), retry_latency_counts Array(UInt64), retry_latency_sum UInt64,\n"
        "    backoff_keys Array(UInt16), backoff_counts Array(UInt64),\n"
        "    failed_nano_usd Int64, failed_tokens UInt64, retry_nano_usd Int64, retry_tokens UInt64"
    )


def _open_columns() -> str:
    dims = ", ".join(f"{d} LowCardinality(String)" for d in METRIC_DIMENSIONS)
    values = ", ".join(
        f"`{name}` AggregateFunction(groupUniqArray, {kind})" for name, kind, _v, _c in _OPEN_VALUES
    )
    keys = "AggregateFunction(groupUniqArrayArray, Array(Tuple(UInt64, UInt16)))"
    return f"{dims}, bucket DateTime('UTC'),\n    `keys` {keys}, {values}"


def _tables() -> list[tuple[str, str, str, str, str]]:
    """(table, columns, engine family, key clauses, sharding key)."""
    return [
        (
            OPEN,
            _open_columns(),
            "AggregatingMergeTree",
            "PARTITION BY toYYYYMM(bucket) ORDER BY (project, bucket, agent_name, phase, error_type, policy_version)",
            "cityHash64(project)",
        ),
        (
            ROLLUP,
            _rollup_columns(),
            "MergeTree",
            "PARTITION BY toYYYYMM(bucket) ORDER BY (project, level, grain, bucket, agent_name, phase, "
            "policy_version, error_type, generation, key_hash) SETTINGS index_granularity = 1024",
            "cityHash64(project)",
        ),
        (
            LOG,
            "level UInt32, bucket DateTime('UTC'), generation UInt64, sealed_at DateTime64(3, 'UTC')",
            "MergeTree",
            "ORDER BY (level, bucket, generation)",
            "cityHash64(bucket)",
        ),
        (
            STATE,
            "revision UInt64, generation UInt64, sealed_to Array(Tuple(UInt32, DateTime('UTC'))), "
            "superseded Array(Tuple(UInt32, DateTime('UTC'), UInt64)), sealed_at DateTime64(3, 'UTC')",
            "ReplacingMergeTree",
            "ORDER BY tuple()",
            "0",
        ),
    ]


def open_select(source: str) -> str:
    """The open-set rows of the events in ``source`` (a table or a subquery)."""
    dims = ", ".join(METRIC_DIMENSIONS)
    pairs = f"[({ATTEMPT_KEY}, {measure_mask_sql(task=False)}), ({TASK_KEY}, {measure_mask_sql(task=True)})]"
    values = ",\n    ".join(
        f"groupUniqArrayIfState({value}, {condition}) AS `{name}`"
        for name, _k, value, condition in _OPEN_VALUES
    )
    return (
        f"SELECT {dims}, toStartOfInterval(ts, INTERVAL {FIVE_MINUTES} SECOND) AS bucket,\n"
        f"    groupUniqArrayArrayState(arrayFilter(k -> k.2 != 0, {pairs})) AS `keys`,\n    {values}\n"
        f"FROM {source} GROUP BY {dims}, bucket"
    )


def open_backfill_statements(ctx: MigrationContext, where: str = "1") -> list[str]:
    """(Re)fill the open set from events where the trusted condition ``where`` holds; idempotent."""
    source = f"(SELECT * FROM {ctx.table('events')} WHERE {where})"
    return [f"INSERT INTO {ctx.table(OPEN)}\n{open_select(source)}"]


def forwards(ctx: MigrationContext) -> list[str]:
    statements: list[str] = []
    for table, columns, family, keys, sharding in _tables():
        storage = ctx.storage_name(table)
        version = "revision" if table == STATE else ""
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {ctx.table(storage)}{ctx.on_cluster} (\n    {columns}\n)"
            f"\nENGINE = {ctx.engine(family, storage, version)}\n{keys}"
        )
        statements.extend(ctx.distributed(table, sharding))
    statements.append(
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {ctx.table(OPEN_VIEW)}{ctx.on_cluster} "
        f"TO {ctx.table(ctx.storage_name(OPEN))}\nAS {open_select(ctx.table(ctx.storage_name('events')))}"
    )
    statements += open_backfill_statements(ctx)
    statements.append(f"DROP VIEW IF EXISTS {ctx.table('metrics_5m_mv')}{ctx.on_cluster} SYNC")
    for table in ("metrics_5m", *_OLD_TABLES):
        statements.extend(ctx.drop(table))
    return statements


def backwards(ctx: MigrationContext) -> list[str]:
    """Drop the new tables and bring back ``metrics_5m`` (refilled) and the empty tables of 0005/0006."""
    statements = [f"DROP VIEW IF EXISTS {ctx.table(OPEN_VIEW)}{ctx.on_cluster} SYNC"]
    for table, *_rest in _tables():
        statements.extend(ctx.drop(table))
    return statements + _metrics_5m_statements(ctx) + _old_level_statements(ctx)


# ---------------------------------------------------------------------------------------------
# What ``backwards`` restores, as released: ``metrics_5m`` and its view (migration 0002),
# refilled from events, and the empty sealed tables of migrations 0005 and 0006 (with 0005's
# ``metrics_touched`` and its view, which this migration keeps; ``IF NOT EXISTS`` leaves them).


def _metrics_5m_select(source: str) -> str:
    states = ",\n    ".join(f"{m.function}IfState({m.value}, {m.condition}) AS {m.name}" for m in MEASURES)
    dims = ", ".join(METRIC_DIMENSIONS)
    return (
        f"SELECT {dims}, toStartOfInterval(ts, INTERVAL {BUCKET_SECONDS} SECOND) AS bucket,\n    {states}\n"
        f"FROM {source} GROUP BY {dims}, bucket"
    )


def _metrics_5m_statements(ctx: MigrationContext) -> list[str]:
    states = ",\n    ".join(f"`{m.name}` AggregateFunction({m.function}, {m.value_type})" for m in MEASURES)
    columns = (
        "project LowCardinality(String), agent_name LowCardinality(String), "
        "phase LowCardinality(String), error_type LowCardinality(String), "
        f"policy_version LowCardinality(String), bucket DateTime('UTC'),\n    {states}"
    )
    storage = ctx.storage_name("metrics_5m")
    refill_source = f"(SELECT * FROM {ctx.table('events')} WHERE 1)"
    return [
        f"CREATE TABLE IF NOT EXISTS {ctx.table(storage)}{ctx.on_cluster} (\n    {columns}\n)"
        f"\nENGINE = {ctx.engine('AggregatingMergeTree', storage)}\nPARTITION BY toYYYYMM(bucket) "
        "ORDER BY (project, bucket, agent_name, phase, error_type, policy_version)",
        *ctx.distributed("metrics_5m", "cityHash64(project)"),
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {ctx.table('metrics_5m_mv')}{ctx.on_cluster} "
        f"TO {ctx.table(storage)}\nAS {_metrics_5m_select(ctx.table(ctx.storage_name('events')))}",
        f"INSERT INTO {ctx.table('metrics_5m')}\n{_metrics_5m_select(refill_source)}",
    ]


_OLD_SLICE = (
    "project LowCardinality(String), bucket DateTime('UTC'), agent_name LowCardinality(String), "
    "phase LowCardinality(String), policy_version LowCardinality(String), error_type LowCardinality(String)"
)
_OLD_COUNTS = ", ".join(f"`{name}` UInt64" for name in COUNT_MEASURES)
_OLD_SEALED = (
    f"{_OLD_SLICE}, any_error Bool, generation UInt64,\n    {_OLD_COUNTS},\n"
    "    retry_latency_values Array(UInt32), retry_latency_counts Array(UInt64),\n"
    "    backoff_values Array(UInt32), backoff_counts Array(UInt64),\n"
    "    failed_cost Float64, failed_tokens UInt64, retry_cost Float64, retry_tokens UInt64"
)
_OLD_OPEN = (
    f"{_OLD_SLICE}, generation UInt64,\n    "
    + ", ".join(f"`{name}` AggregateFunction(uniqExact, UInt64)" for name in COUNT_MEASURES)
)
_OLD_SLICE_KEY = "agent_name, phase, policy_version, error_type, generation"
_OLD_LOG = "bucket DateTime('UTC'), generation UInt64, sealed_at DateTime64(3, 'UTC'), events UInt64"
#: (table, columns, engine family, key clauses, sharding key): 0005's tables, then 0006's.
_OLD_LEVEL_TABLES: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "metrics_sealed", _OLD_SEALED, "MergeTree",
        f"PARTITION BY toYYYYMM(bucket) ORDER BY (project, bucket, any_error, {_OLD_SLICE_KEY})", "cityHash64(project)",
    ),
    (
        "metrics_sealed_open", _OLD_OPEN, "MergeTree",
        f"PARTITION BY toYYYYMM(bucket) ORDER BY (project, bucket, {_OLD_SLICE_KEY})", "cityHash64(project)",
    ),
    ("metrics_seal_log", _OLD_LOG, "ReplacingMergeTree", "ORDER BY bucket", "cityHash64(bucket)"),
    (
        "metrics_touched", "project LowCardinality(String), task_id String, inserted_at DateTime64(3, 'UTC')",
        "MergeTree", "ORDER BY (inserted_at, project, task_id) TTL toDateTime(inserted_at) + INTERVAL 7 DAY DELETE",
        "cityHash64(project, task_id)",
    ),
    (
        "metrics_sealed_1h", _OLD_SEALED, "MergeTree",
        f"PARTITION BY toYYYYMM(bucket) ORDER BY (project, bucket, any_error, {_OLD_SLICE_KEY})", "cityHash64(project)",
    ),
    (
        "metrics_sealed_open_1h", _OLD_OPEN, "MergeTree",
        f"PARTITION BY toYYYYMM(bucket) ORDER BY (project, bucket, {_OLD_SLICE_KEY})", "cityHash64(project)",
    ),
    ("metrics_seal_log_1h", _OLD_LOG, "ReplacingMergeTree", "ORDER BY bucket", "cityHash64(bucket)"),
)


def _old_level_statements(ctx: MigrationContext) -> list[str]:
    statements: list[str] = []
    for table, columns, family, keys, sharding in _OLD_LEVEL_TABLES:
        storage = ctx.storage_name(table)
        version = "generation" if family == "ReplacingMergeTree" else ""
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {ctx.table(storage)}{ctx.on_cluster} (\n    {columns}\n)"
            f"\nENGINE = {ctx.engine(family, storage, version)}\n{keys}"
        )
        statements.extend(ctx.distributed(table, sharding))
        if table == "metrics_touched":
            statements.append(
                f"CREATE MATERIALIZED VIEW IF NOT EXISTS {ctx.table('metrics_touched_mv')}{ctx.on_cluster} "
                f"TO {ctx.table(storage)}\n"
                "AS SELECT project, task_id, now64(3, 'UTC') AS inserted_at "
                f"FROM {ctx.table(ctx.storage_name('events'))} GROUP BY project, task_id"
            )
    return statements


MIGRATION = Migration(8, "rollup_levels", forwards, backwards)
