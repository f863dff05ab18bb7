"""The dashboard's first screen on 1M events vs on 10k events, same run.

Two fresh databases in one embedded store get 10k and 1M events generated inside
ClickHouse (``INSERT … SELECT … FROM numbers(N)``): tasks of eight events (task started;
attempt 1 started and failed or succeeded; a decision; attempt 2; a hand-off for some
failing tasks; task finished) spread over the 7 days before the last hour, 3 projects,
5 agents, 3 phases, 2 policy versions, 6 error types. One sealing pass then runs, as the
server's sealer keeps closed buckets sealed in a deployment.

The first screen is timed exactly as the page issues it, through
:class:`~retrylens.dashboard.source.StoreSource`: the sidebar's filter choices, the
headline metrics, the trend and the failure types of the default range (last 24 hours),
and the first page of hand-offs. Each figure is the median of ``--repeat`` runs.

    python bench/dashboard.py --json      # {"ms_10k": …, "ms_1m": …, …}
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from retrylens.config import load_settings
from retrylens.dashboard.filters import Filters
from retrylens.dashboard.source import StoreSource
from retrylens.store import EventStore, open_store

SIZES = {"10k": 10_000, "1m": 1_000_000}
GENERATE = """
INSERT INTO [[db]].events (event_id, schema_version, ts, project, agent_name, agent_role, task_id,
    correlation_id, attempt, phase, kind, error_type, error_message, decision, decision_reason, backoff_ms,
    policy_version, tokens_in, tokens_out, cost_usd, latency_ms, outcome)
SELECT generateUUIDv4(number), 1,
    now64(3) - toIntervalSecond(3600) - toIntervalMillisecond(intDiv(({n:UInt64} - number) * 604800000, {n:UInt64})),
    ['shop', 'search', 'ops'][task % 3 + 1], ['planner', 'coder', 'researcher', 'writer', 'critic'][task % 5 + 1],
    'worker', concat('b-', toString(task)), if(att = 0, concat('b-', toString(task)), concat('b-', toString(task), ':', toString(att))),
    att, ['planning', 'execution', 'review'][task % 3 + 1], kind_s,
    if(kind_s = 'attempt_failed', ['timeout', 'rate_limit', 'server_error', 'logic', 'tool_error', 'schema_mismatch'][cityHash64(task) % 6 + 1], ''),
    if(kind_s = 'attempt_failed', concat('error ', toString(cityHash64(task) % 50), ' in step ', toString(task % 1000)), ''),
    multiIf(kind_s = 'decision' AND failed1, 'retry_backoff', kind_s = 'handoff', 'handoff_human', 'none'),
    multiIf(kind_s = 'decision' AND failed1, 'transient: retry after backoff', kind_s = 'handoff', 'retry cap reached', ''),
    if(kind_s = 'decision' AND failed1, 500 + cityHash64(task, 7) % 4000, 0),
    ['v1', 'v2'][intDiv(task, 1000) % 2 + 1],
    if(kind_s IN ('attempt_failed', 'attempt_succeeded'), 100 + task % 900, 0),
    if(kind_s IN ('attempt_failed', 'attempt_succeeded'), 50 + task % 300, 0),
    if(kind_s IN ('attempt_failed', 'attempt_succeeded'), (task % 100) / 10000., 0.),
    if(kind_s IN ('attempt_failed', 'attempt_succeeded'), 100 + cityHash64(number) % 3000, 0),
    if(kind_s = 'task_finished', if(handed, 'handed_off', 'succeeded'), '')
FROM (
    SELECT number, intDiv(number, 8) AS task, number % 8 AS step, cityHash64(task, 1) % 100 < 30 AS failed1,
        failed1 AND cityHash64(task, 2) % 100 < 20 AS handed,
        [0, 1, 1, 1, 2, 2, 2, 0][step + 1] AS att,
        multiIf(step = 2 AND failed1, 'attempt_failed', step = 5 AND handed, 'attempt_failed',
                step = 6 AND handed, 'handoff',
                ['task_started', 'attempt_started', 'attempt_succeeded', 'decision', 'attempt_started',
                 'attempt_succeeded', 'decision', 'task_finished'][step + 1]) AS kind_s
    FROM numbers({n:UInt64})
)
"""


def seed(store: EventStore, n: int) -> float:
    """Generate ``n`` events and seal the closed buckets; returns the seconds it took."""
    start = time.perf_counter()
    store.client.command(store.sql(GENERATE), parameters={"n": n}, settings={"max_insert_block_size": 1_000_000})
    try:
        from retrylens.analytics.sealing import seal_rollups
    except ImportError:  # older analytics without sealed rollups: the set-state rollups only
        pass
    else:
        seal_rollups(store)
    return time.perf_counter() - start


def first_screen(source: StoreSource) -> dict[str, Callable[[], object]]:
    """The page's queries for the default filters, by name."""
    filters = Filters()
    return {
        "options": lambda: source.options(None, filters.slice().start),
        "summary": lambda: source.summary(filters.slice()),
        "trend": lambda: source.trend(filters.slice(), filters.trend_bucket()),
        "failure_types": lambda: source.failure_types(filters.slice()),
        "handoffs_page": lambda: source.handoffs(filters.slice(), limit=26, offset=0),
    }


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def run(repeat: int, data_dir: Path, sizes: dict[str, int] = SIZES) -> dict[str, object]:
    result: dict[str, object] = {"repeat": repeat}
    for label, n in sizes.items():
        settings = load_settings(data_dir=data_dir, clickhouse_dsn="", kafka_bootstrap_servers="",
                                 clickhouse_database=f"bench_dash_{label}_{uuid.uuid4().hex[:6]}")
        store = open_store(settings)
        seed_s = seed(store, n)
        queries = first_screen(StoreSource(store, settings=settings))
        parts = {name: round(median_ms(fn, repeat), 2) for name, fn in queries.items()}

        def whole(queries: dict[str, Callable[[], object]] = queries) -> None:
            for fn in queries.values():
                fn()

        result[f"ms_{label}"] = round(median_ms(whole, repeat), 2)
        result[f"parts_{label}"] = parts
        result[f"events_{label}"] = store.count_rows()
        result[f"seed_s_{label}"] = round(seed_s, 2)
    result["ratio_1m_to_10k"] = round(result["ms_1m"] / result["ms_10k"], 2)  # type: ignore[operator]
    result["at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per figure (median)")
    parser.add_argument("--smoke", action="store_true", help="tiny size: 1k and 2k events, one run each")
    args = parser.parse_args()
    if args.smoke:
        args.repeat = 1
    sizes = {"10k": 1_000, "1m": 2_000} if args.smoke else SIZES
    with tempfile.TemporaryDirectory(prefix="retrylens-bench-dashboard-", ignore_cleanup_errors=True) as tmp:
        result = run(args.repeat, Path(tmp), sizes)
    if args.json:
        print(json.dumps(result))
        return
    for label in SIZES:
        print(f"{label}: {result[f'events_{label}']:,} events, first screen {result[f'ms_{label}']} ms "
              f"(median of {args.repeat}); parts {result[f'parts_{label}']}", file=sys.stdout)
    print(f"1M / 10k = {result['ratio_1m_to_10k']}")


if __name__ == "__main__":
    main()
