"""The SQL of a sealing pass (:mod:`.sealing`): 5-minute buckets from events, coarser levels from finer ones.

Every statement writes rows of one level of ``metrics_rollup`` (migration 0008) for the buckets
``{buckets:Array(DateTime('UTC'))}`` as generation ``{generation:UInt64}``, reading only
``[{lo}, {hi})``. The 5-minute level is computed from ``events FINAL`` (a re-sent event counts
once): a key (attempt or task) whose events all lie in one bucket and one (agent, phase, policy)
slice is *local* and becomes a plain count; any other key becomes a ``keys`` row carrying the
time span and slice count of all its events. A coarser level is computed from the level below
without touching events: counts and histograms add up, and a ``keys`` row whose key's events
all lie in one coarser bucket and one slice becomes a plain count there (counted once with
``uniqExact`` over its rows in that bucket and slice), the others stay ``keys`` rows.
``project`` rows of a level are the sums of its slice rows (exact: a local key lies in one slice).
"""

from __future__ import annotations

from retrylens.store.schema import (
    FIVE_MINUTES,
    KEY_COLUMNS,
    LOG,
    ROLLUP,
    VALUE_COLUMNS,
)
from retrylens.store.schema import histogram_key_sql as key_sql
from retrylens.store.schema import nano_usd_sql as nano_usd

from .definitions import (
    ATTEMPT_KEY,
    COSTED,
    COUNTS,
    IS_RETRY,
    MEASURE_BITS,
    RETRY_OUTCOME,
    TASK_KEY,
    WAITED,
    measure_mask_sql,
)
from .definitions import COUNT_NAMES as COUNT_MEASURES

_COUNT = {c.name: c for c in COUNTS}
_SLICE = "agent_name, phase, policy_version"
_ROW = f"level, bucket, project, grain, {_SLICE}, error_type, generation"
_COUNTS = ", ".join(f"`{n}`" for n in COUNT_MEASURES)
_IN_BUCKETS = "IN {buckets:Array(DateTime('UTC'))}"
_EMPTY_VALUES = (
    "CAST([], 'Array(UInt16)'), CAST([], 'Array(UInt64)'), toUInt64(0), CAST([], 'Array(UInt16)'),"
    " CAST([], 'Array(UInt64)'), toInt64(0), toUInt64(0), toInt64(0), toUInt64(0)"
)
_SUMMED_VALUES = (
    "sumMap(lat_k, lat_c) AS lat, sum(lat_s) AS s_lat, sumMap(bo_k, bo_c) AS bo, sum(fc) AS s_fc,"
    " sum(ft) AS s_ft, sum(rc) AS s_rc, sum(rt) AS s_rt"
)
_WRITTEN_VALUES = "lat.1, lat.2, s_lat, bo.1, bo.2, s_fc, s_ft, s_rc, s_rt"


def bucket_of(level: int, column: str = "ts") -> str:
    """The ``level`` bucket (a UTC ``DateTime``) of ``column``."""
    return f"toDateTime(toStartOfInterval({column}, INTERVAL {int(level)} SECOND), 'UTC')"


def _is_task_measure(name: str) -> bool:
    return _COUNT[name].unit == "task"


def _chunk_events(spans: bool) -> str:
    """Events of every task with an event in ``{buckets}``, each flagged local or not; with
    ``spans``, also the time span and slice count of its task's and its attempt's events."""
    events = "[[db]].events"
    extra = ""
    if spans:
        for who, part in (
            ("task", "project, task_id"),
            ("attempt", "project, task_id, attempt"),
        ):
            extra += (
                f",\n  toDateTime(min(ts) OVER (PARTITION BY {part}), 'UTC') AS {who}_first,"
                f" toDateTime(max(ts) OVER (PARTITION BY {part}), 'UTC') AS {who}_last,"
                f" uniqExact(({_SLICE})) OVER (PARTITION BY {part}) AS {who}_slices"
            )
    slice_of = f"(b, {_SLICE})"
    return (
        f"SELECT *, {bucket_of(FIVE_MINUTES)} AS b,\n"
        f"  uniqExact({slice_of}) OVER (PARTITION BY project, task_id) = 1 AS task_local,\n"
        f"  uniqExact({slice_of}) OVER (PARTITION BY project, task_id, attempt) = 1 AS attempt_local{extra}\n"
        f"FROM {events} FINAL\n"
        f"WHERE (project, task_id) IN (SELECT project, task_id FROM {events}\n"
        "  WHERE ts >= {lo:DateTime64(3, 'UTC')} AND ts < {hi:DateTime64(3, 'UTC')}"
        f" AND {bucket_of(FIVE_MINUTES)} {_IN_BUCKETS})"
    )


def _event_measures() -> str:
    """Per 5-minute row: local counts, histograms, exact latency sum, costs and tokens."""
    counts = []
    for name in COUNT_MEASURES:
        c = _COUNT[name]
        local = "task_local" if _is_task_measure(name) else "attempt_local"
        counts.append(f"uniqExactIf({c.key}, ({c.condition}) AND {local}) AS c_{name}")
    latency, backoff, costs = RETRY_OUTCOME, WAITED, COSTED
    tokens = "toUInt64(tokens_in) + tokens_out"
    values = [
        f"sumMapIf([{key_sql('latency_ms')}], [toUInt64(1)], {latency}) AS lat",
        f"sumIf(toUInt64(latency_ms), {latency}) AS s_lat",
        f"sumMapIf([{key_sql('backoff_ms')}], [toUInt64(1)], {backoff}) AS bo",
        f"sumIf({nano_usd('cost_usd')}, ({costs}) AND kind = 'attempt_failed') AS s_fc",
        f"sumIf({tokens}, ({costs}) AND kind = 'attempt_failed') AS s_ft",
        f"sumIf({nano_usd('cost_usd')}, ({costs}) AND {IS_RETRY}) AS s_rc",
        f"sumIf({tokens}, ({costs}) AND {IS_RETRY}) AS s_rt",
    ]
    return ",\n    ".join(counts + values)


def five_minute_statements() -> list[str]:
    """Seal the 5-minute ``{buckets}`` from events: slice rows, ``keys`` rows, then ``project`` rows."""
    c_names = ", ".join(f"c_{n}" for n in COUNT_MEASURES)
    slices = (
        f"INSERT INTO [[db]].{ROLLUP} ({_ROW}, {_COUNTS}, {', '.join(VALUE_COLUMNS)})\n"
        f"SELECT {FIVE_MINUTES}, b, project, if(any_error, 'slice', 'slice_error'), {_SLICE}, et,"
        f" {{generation:UInt64}}, {c_names}, {_WRITTEN_VALUES}\n"
        "FROM (\n"
        f"  SELECT project, b, {_SLICE}, if(any_error, '', error_type) AS et, any_error,\n    {_event_measures()}\n"
        f"  FROM ({_chunk_events(spans=False)})\n"
        f"  ARRAY JOIN [false, true] AS any_error WHERE b {_IN_BUCKETS}\n"
        f"  GROUP BY project, b, {_SLICE}, et, any_error\n)"
    )
    keys = (
        f"INSERT INTO [[db]].{ROLLUP} ({_ROW}, {', '.join(KEY_COLUMNS)})\n"
        f"SELECT {FIVE_MINUTES}, b, project, 'keys', {_SLICE}, error_type, {{generation:UInt64}},"
        " k.1 AS kh, groupBitOr(k.2), min(k.3), max(k.4), max(k.5)\n"
        f"FROM ({_chunk_events(spans=True)})\n"
        f"ARRAY JOIN [({ATTEMPT_KEY}, if(attempt_local, 0, {measure_mask_sql('attempt')}), attempt_first, attempt_last,"
        f" attempt_slices), ({TASK_KEY}, if(task_local, 0, {measure_mask_sql('task')}), task_first, task_last, task_slices)] AS k\n"
        f"WHERE b {_IN_BUCKETS} AND k.2 != 0\n"
        f"GROUP BY project, b, {_SLICE}, error_type, kh"
    )
    return [slices, keys, project_statement(FIVE_MINUTES)]


def project_statement(level: int) -> str:
    """``project`` rows of ``{buckets}`` at ``level``: this generation's slice rows summed over the slices."""
    sums = ", ".join(f"sum(`{n}`) AS s_{n}" for n in COUNT_MEASURES)
    return (
        f"INSERT INTO [[db]].{ROLLUP} (level, bucket, project, grain, error_type, generation, {_COUNTS},"
        f" {', '.join(VALUE_COLUMNS)})\n"
        f"SELECT level, bucket, project, g, error_type, generation, {', '.join(f's_{n}' for n in COUNT_MEASURES)},"
        f" {_WRITTEN_VALUES}\n"
        f"FROM (SELECT level, bucket, project, if(grain = 'slice', 'project', 'project_error') AS g, error_type,"
        f" generation, {sums},\n"
        "    sumMap(retry_latency_keys, retry_latency_counts) AS lat, sum(retry_latency_sum) AS s_lat,"
        " sumMap(backoff_keys, backoff_counts) AS bo, sum(failed_nano_usd) AS s_fc, sum(failed_tokens) AS s_ft,"
        " sum(retry_nano_usd) AS s_rc, sum(retry_tokens) AS s_rt\n"
        f"  FROM [[db]].{ROLLUP} WHERE level = {int(level)} AND generation = {{generation:UInt64}}"
        f" AND bucket {_IN_BUCKETS} AND grain IN ('slice', 'slice_error')\n"
        "  GROUP BY level, bucket, project, g, error_type, generation)"
    )


def _finer_rows(finer: int, coarser: int) -> str:
    """Rows of level ``finer`` inside the coarser ``{buckets}``, each finer bucket at its current
    generation: this pass's when this pass rewrote it (``{renewed}``), else the newest published."""
    span = "bucket >= {lo:DateTime('UTC')} AND bucket < {hi:DateTime('UTC')}"
    return (
        f"SELECT *, {bucket_of(coarser, 'bucket')} AS cb FROM [[db]].{ROLLUP}\n"
        f"  WHERE level = {int(finer)} AND {span} AND cb {_IN_BUCKETS}\n"
        "  AND (bucket, generation) IN (SELECT bucket, max(generation) FROM (\n"
        f"    SELECT bucket, generation FROM [[db]].{LOG} WHERE level = {int(finer)} AND {span}\n"
        "    UNION ALL SELECT arrayJoin({renewed:Array(DateTime('UTC'))}), {generation:UInt64}) GROUP BY bucket)"
    )


def _local(level: int) -> str:
    """A key row's key has all its events in one ``level`` bucket and one slice."""
    return f"({bucket_of(level, 'key_first')} = {bucket_of(level, 'key_last')} AND key_slices = 1)"


def derive_statements(finer: int, coarser: int) -> list[str]:
    """Seal the ``coarser`` ``{buckets}`` from level ``finer``: slice rows, ``keys`` rows, ``project`` rows."""
    summed = ", ".join(f"sum(c_{n}) AS s_{n}" for n in COUNT_MEASURES)
    rows = _finer_rows(finer, coarser)
    counters = (
        f"SELECT cb, project, toString(grain) AS g, {_SLICE}, toString(error_type) AS et,"
        f" {', '.join(f'`{n}` AS c_{n}' for n in COUNT_MEASURES)},"
        " retry_latency_keys AS lat_k, retry_latency_counts AS lat_c, retry_latency_sum AS lat_s,"
        " backoff_keys AS bo_k, backoff_counts AS bo_c, failed_nano_usd AS fc, failed_tokens AS ft,"
        " retry_nano_usd AS rc, retry_tokens AS rt\n"
        f"  FROM ({rows}) WHERE grain IN ('slice', 'slice_error')"
    )
    now_local = (
        f"SELECT cb, project, if(any_error, 'slice', 'slice_error') AS g, {_SLICE},"
        " if(any_error, '', toString(error_type)) AS et,"
        f" {', '.join(f'uniqExactIf(key_hash, bitTest(key_measures, {MEASURE_BITS[n]})) AS c_{n}' for n in COUNT_MEASURES)},"
        f" {_EMPTY_VALUES}\n"
        f"  FROM ({rows}) ARRAY JOIN [false, true] AS any_error WHERE grain = 'keys' AND {_local(coarser)}\n"
        f"  GROUP BY cb, project, g, {_SLICE}, et"
    )
    slices = (
        f"INSERT INTO [[db]].{ROLLUP} ({_ROW}, {_COUNTS}, {', '.join(VALUE_COLUMNS)})\n"
        f"SELECT {int(coarser)}, cb, project, g, {_SLICE}, et, {{generation:UInt64}},"
        f" {', '.join(f's_{n}' for n in COUNT_MEASURES)}, {_WRITTEN_VALUES}\n"
        f"FROM (SELECT cb, project, g, {_SLICE}, et, {summed}, {_SUMMED_VALUES}\n"
        f"  FROM ({counters}\n  UNION ALL\n  {now_local})\n"
        f"  GROUP BY cb, project, g, {_SLICE}, et)"
    )
    keys = (
        f"INSERT INTO [[db]].{ROLLUP} ({_ROW}, {', '.join(KEY_COLUMNS)})\n"
        f"SELECT {int(coarser)}, cb, project, 'keys', {_SLICE}, error_type, {{generation:UInt64}},"
        " key_hash, groupBitOr(key_measures), min(key_first), max(key_last), max(key_slices)\n"
        f"FROM ({rows}) WHERE grain = 'keys' AND NOT {_local(coarser)}\n"
        f"GROUP BY cb, project, {_SLICE}, error_type, key_hash"
    )
    return [slices, keys, project_statement(coarser)]
