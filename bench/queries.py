"""Dashboard first-screen queries over N events: rollups vs a raw FINAL scan, same run.

Events are generated inside ClickHouse (``INSERT … SELECT … FROM numbers(N)``) into a fresh
embedded store: tasks of six events (task_started; attempt 1 started, failed or succeeded,
a decision; attempt 2 started and finished) spread over 30 days, 3 projects, 5 agents,
3 phases, 3 policy versions, 6 error types. The first screen is: the headline metrics,
the hourly trend of the last 7 days and the failure-type distribution, for one project.
Each is timed ``--repeat`` times (median), first from the rollups and then from raw
events with the same definitions. Before timing, one sealing pass (``seal_rollups``, the
job ``retrylens rollups seal`` and the server's sealer run) turns every bucket older than
the grace period into plain counters at the 5-minute, hourly and daily levels, as a running
deployment keeps them; only the last minutes stay in the open set. ``seal_s`` is that first
pass over the whole history; ``sealed_rows`` counts the sealed table's rows per level.

    python bench/queries.py --events 1000000 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import failure_type_distribution, metrics_summary, metrics_trend
from retrylens.analytics.sealing import seal_rollups
from retrylens.config import load_settings
from retrylens.store import open_store
from retrylens.store.sql import query_rows

GENERATE = """
INSERT INTO [[db]].events (event_id, schema_version, ts, project, agent_name, agent_role, task_id,
    correlation_id, attempt, phase, kind, error_type, error_message, decision, backoff_ms, policy_version,
    input_fingerprint, tokens_in, tokens_out, cost_usd, latency_ms, outcome)
SELECT generateUUIDv4(number) AS event_id, 1,
    now64(3) - toIntervalMillisecond(intDiv(({n:UInt64} - number) * 2592000000, {n:UInt64})) AS ts,
    ['shop', 'search', 'ops'][task % 3 + 1], ['planner', 'coder', 'researcher', 'writer', 'critic'][task % 5 + 1],
    'worker', toString(task) AS task_s, concat(task_s, '-', toString(att)) AS corr, att,
    ['planning', 'execution', 'review'][task % 3 + 1], kind_s,
    if(kind_s = 'attempt_failed', ['timeout', 'rate_limit', 'server_error', 'logic', 'tool_error', 'schema_mismatch'][cityHash64(task) % 6 + 1], ''),
    if(kind_s = 'attempt_failed', concat('error ', toString(cityHash64(task) % 50), ' in step ', toString(task % 1000)), ''),
    if(kind_s = 'decision', if(failed1, 'retry_backoff', 'none'), 'none'),
    if(kind_s = 'decision' AND failed1, 500 + cityHash64(task, 7) % 4000, 0),
    ['v1', 'v2', 'v3'][intDiv(task, 1000) % 3 + 1],
    lower(hex(cityHash64(task % 50000))),
    if(kind_s IN ('attempt_failed', 'attempt_succeeded'), 100 + task % 900, 0),
    if(kind_s IN ('attempt_failed', 'attempt_succeeded'), 50 + task % 300, 0),
    if(kind_s IN ('attempt_failed', 'attempt_succeeded'), (task % 100) / 10000., 0.),
    if(kind_s IN ('attempt_failed', 'attempt_succeeded'), 100 + cityHash64(number) % 3000, 0), ''
FROM (
    SELECT number, intDiv(number, 6) AS task, number % 6 AS step, cityHash64(task, 1) % 100 < 30 AS failed1,
        [0, 1, 1, 1, 2, 2][step + 1] AS att,
        if(step = 2 AND failed1, 'attempt_failed',
           ['task_started', 'attempt_started', 'attempt_succeeded', 'decision', 'attempt_started',
            'attempt_succeeded'][step + 1]) AS kind_s
    FROM numbers({n:UInt64})
)
"""


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def screen_queries(store, source: str) -> dict[str, object]:
    """The first screen's three queries for one project, by name."""
    now = datetime.now(UTC)
    where = Slice(project="shop")
    week = where.with_(start=now - timedelta(days=7), end=now)
    return {
        "summary": lambda: metrics_summary(store, where, source=source),
        "trend": lambda: metrics_trend(store, week, bucket="1h", source=source),
        "failure_types": lambda: failure_type_distribution(store, where, source=source),
    }


def first_screen(store, source: str) -> None:
    for query in screen_queries(store, source).values():
        query()


def _rows_per_level(store) -> dict[str, int]:
    sql = store.sql(
        "SELECT level, count() AS n FROM [[db]].metrics_rollup GROUP BY level ORDER BY level"
    )
    return {f"{int(r['level'])}s": int(r["n"]) for r in query_rows(store.client, sql)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="tiny size: the test suite's smoke run")
    args = parser.parse_args(argv)
    if args.smoke:
        args.events, args.repeat = 5_000, 1
    with tempfile.TemporaryDirectory(prefix="retrylens-bench-", ignore_cleanup_errors=True) as tmp:
        settings = load_settings(
            data_dir=Path(tmp), clickhouse_database="bench", kafka_bootstrap_servers=""
        )
        store = open_store(settings)
        started = time.perf_counter()
        store.client.command(
            store.sql(GENERATE),
            parameters={"n": args.events},
            settings={"max_insert_block_size": 1_000_000},
        )
        generate_s = time.perf_counter() - started
        started = time.perf_counter()
        seal_rollups(store)
        seal_s = time.perf_counter() - started
        rollup = _median_ms(lambda: first_screen(store, "rollup"), args.repeat)
        raw = _median_ms(lambda: first_screen(store, "raw"), args.repeat)
        parts = {
            source: {
                name: round(_median_ms(query, args.repeat), 1)
                for name, query in screen_queries(store, source).items()
            }
            for source in ("rollup", "raw")
        }
        stored = store.count_rows()
        sealed_rows = _rows_per_level(store)
        open_rows = int(store.client.command(store.sql("SELECT count() FROM [[db]].metrics_open")))
    result = {
        "events": stored,
        "rollup_ms": round(rollup, 1),
        "raw_ms": round(raw, 1),
        "ratio": round(rollup / raw, 4),
        "rollup_parts_ms": parts["rollup"],
        "raw_parts_ms": parts["raw"],
        "sealed_rows": sealed_rows,
        "open_set_rows": open_rows,
        "generate_s": round(generate_s, 1),
        "seal_s": round(seal_s, 1),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:20} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
