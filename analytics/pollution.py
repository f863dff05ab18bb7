"""Context-pollution and loop signals per task, and how they relate to retry success.

Signals, computed in ClickHouse from a task's events (exact, ``FINAL``):

- ``duplicate_messages``: adjacent identical messages in one attempt's context (equal
  digests, or equal consecutive user messages) — the echoed-input bug;
- ``carried_errors``: retry attempts whose context contains the text of an earlier
  attempt's error — the failed attempt leaking into the next one;
- ``repeated_tool_calls``: tool calls identical (name and canonical arguments) to the call
  just before them within one attempt, summed over the task's attempts — the commonest real
  loop (7.3 % of the tool calls in ../shared/data/agent_traces/dev.jsonl repeat the previous
  call exactly; ``bench/tool_call_repeats.py``). The SDK counts them per attempt
  (``Attempt.tool_call``, ``side_effect``, the adapters) into the snapshot's column;
- ``trailing_errors``: most error messages back to back at the end of one attempt's context;
- ``recent_error_share``: highest error share of the last N messages of a context;
- ``context_growth``: context tokens of the last attempt / of the first;
- ``loop_failures``: most failures of the task in one phase (3 or more reads as a loop);
- ``sdk_score``: the highest ``pollution_score`` the SDK put on the task's events.

``score`` combines them (weights in :data:`WEIGHTS`) with the SDK's own score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .failure_classes import RETRIES_EXHAUSTED
from .filters import Slice

WEIGHTS = {"duplicate": 0.25, "carried": 0.35, "repeated": 0.2, "growth": 0.2}
GROWTH_LIMIT = 1.5
POLLUTED_SCORE = 0.3
LOOP_FAILURES = 3

_PER_TASK = (
    "SELECT project, task_id,"
    " max(if(context_snapshot = '', 0, greatest("
    "   arrayCount((x, y) -> x = y, arrayPopBack(dg), arrayPopFront(dg)),"
    "   arrayCount((x, y) -> x.1 = 'user' AND y.1 = 'user' AND x.2 = y.2, arrayPopBack(lm), arrayPopFront(lm)))))"
    "   AS duplicate_messages,"
    " groupArrayIf((attempt, left(error_message, 40)), kind = 'attempt_failed' AND length(error_message) >= 8)"
    "   AS errs,"
    " groupArrayIf((attempt, arrayStringConcat(arrayMap(m -> m.2, lm), '\\n')),"
    "   context_snapshot != '' AND attempt >= 2) AS ctxs,"
    " arrayCount(c -> arrayExists(e -> e.1 < c.1 AND position(c.2, e.2) > 0, errs), ctxs) AS carried_errors,"
    " groupArrayIf((attempt, _repeats), _repeats > 0) AS repeats,"
    " arraySum(arrayMap(a -> arrayMax(arrayMap(r -> r.2, arrayFilter(r -> r.1 = a, repeats))),"
    "   arrayDistinct(arrayMap(r -> r.1, repeats)))) AS repeated_tool_calls,"
    " max(_trailing) AS trailing_errors, max(_recent) AS recent_error_share,"
    " argMinIf(context_token_count, attempt, context_token_count > 0 AND attempt >= 1) AS first_tokens,"
    " argMaxIf(context_token_count, attempt, context_token_count > 0 AND attempt >= 1) AS last_tokens,"
    " if(first_tokens = 0, 1., last_tokens / first_tokens) AS context_growth,"
    " groupArrayIf(phase, kind = 'attempt_failed') AS failed_phases,"
    " arrayMax(arrayMap(p -> countEqual(failed_phases, p), arrayPushBack(failed_phases, ''))) AS loop_failures,"
    " max(pollution_score) AS sdk_score,"
    " max(attempt >= 2 AND kind IN ('attempt_started', 'attempt_failed', 'attempt_succeeded')) AS retried,"
    " max(attempt >= 2 AND kind = 'attempt_succeeded') AS recovered,"
    " least(1., greatest(sdk_score,"
    f"   {WEIGHTS['duplicate']} * (duplicate_messages > 0) + {WEIGHTS['carried']} * (carried_errors > 0)"
    f"   + {WEIGHTS['repeated']} * (repeated_tool_calls > 0) + {WEIGHTS['growth']} * (context_growth > {GROWTH_LIMIT})))"
    "   AS score"
    " FROM (SELECT *, JSONExtract(context_snapshot, 'message_digests', 'Array(String)') AS dg,"
    "   JSONExtract(context_snapshot, 'last_messages', 'Array(Tuple(role String, content String))') AS lm,"
    "   repeated_tool_calls AS _repeats, trailing_errors AS _trailing, recent_error_share AS _recent"
    "   FROM [[db]].events FINAL WHERE {where})"
    " GROUP BY project, task_id"
)


@dataclass(frozen=True)
class TaskPollution:
    project: str
    task_id: str
    duplicate_messages: int
    carried_errors: int
    repeated_tool_calls: int
    trailing_errors: int
    recent_error_share: float
    context_growth: float
    loop_failures: int
    sdk_score: float
    score: float
    retried: bool
    recovered: bool

    @property
    def looping(self) -> bool:
        return self.loop_failures >= LOOP_FAILURES


@dataclass(frozen=True)
class SignalEffect:
    """Retry success of retried tasks with and without one signal."""

    signal: str
    tasks_with: int
    recovery_with: float | None
    tasks_without: int
    recovery_without: float | None


@dataclass(frozen=True)
class PollutionReport:
    tasks: int
    polluted_tasks: int
    looping_tasks: int
    effects: list[SignalEffect]


def _per_task_sql(store: EventStore, where: Slice) -> tuple[str, dict[str, Any]]:
    clause, params = where.where()
    return store.sql(_PER_TASK.replace("{where}", clause)), params


def _task(row: dict[str, Any]) -> TaskPollution:
    return TaskPollution(
        project=row["project"], task_id=row["task_id"], duplicate_messages=int(row["duplicate_messages"]),
        carried_errors=int(row["carried_errors"]), repeated_tool_calls=int(row["repeated_tool_calls"]),
        trailing_errors=int(row["trailing_errors"]), recent_error_share=round(float(row["recent_error_share"]), 4),
        context_growth=float(row["context_growth"]), loop_failures=int(row["loop_failures"]),
        sdk_score=float(row["sdk_score"]), score=float(row["score"]),
        retried=bool(row["retried"]), recovered=bool(row["recovered"]),
    )


def task_pollution(
    store: EventStore, where: Slice = Slice(), *, min_score: float = 0.0, limit: int = 100, offset: int = 0
) -> list[TaskPollution]:
    """Per-task signals, most polluted first."""
    inner, params = _per_task_sql(store, where)
    params.update({"min": float(min_score), "limit": max(0, int(limit)), "offset": max(0, int(offset))})
    sql = (
        f"SELECT * FROM ({inner}) WHERE score >= {{min:Float64}}"
        " ORDER BY score DESC, loop_failures DESC, task_id LIMIT {limit:UInt32} OFFSET {offset:UInt32}"
    )
    return [_task(row) for row in query_rows(store.client, sql, params)]


_SIGNALS = {
    "polluted": f"score >= {POLLUTED_SCORE}",
    "duplicate_messages": "duplicate_messages > 0",
    "carried_errors": "carried_errors > 0",
    "repeated_tool_calls": "repeated_tool_calls > 0",
    "trailing_errors": "trailing_errors > 0",
    "context_growth": f"context_growth > {GROWTH_LIMIT}",
    "looping": f"loop_failures >= {LOOP_FAILURES}",
}


def pollution_report(store: EventStore, where: Slice = Slice()) -> PollutionReport:
    """How each signal relates to retry success: recovery rate of retried tasks with vs without it."""
    inner, params = _per_task_sql(store, where)
    parts = ["count() AS tasks", f"countIf({_SIGNALS['polluted']}) AS polluted", f"countIf({_SIGNALS['looping']}) AS looping"]
    for name, condition in _SIGNALS.items():
        parts += [
            f"countIf(retried AND {condition}) AS {name}_n",
            f"countIf(retried AND recovered AND {condition}) AS {name}_ok",
            f"countIf(retried AND NOT ({condition})) AS {name}_n0",
            f"countIf(retried AND recovered AND NOT ({condition})) AS {name}_ok0",
        ]
    row = query_rows(store.client, f"SELECT {', '.join(parts)} FROM ({inner})", params)[0]

    def rate(ok: int, n: int) -> float | None:
        return ok / n if n else None

    effects = [
        SignalEffect(
            name, int(row[f"{name}_n"]), rate(row[f"{name}_ok"], row[f"{name}_n"]),
            int(row[f"{name}_n0"]), rate(row[f"{name}_ok0"], row[f"{name}_n0"]),
        )
        for name in _SIGNALS
    ]
    return PollutionReport(int(row["tasks"]), int(row["polluted"]), int(row["looping"]), effects)


# --- signal measures for alert rules ------------------------------------------------------

#: Alertable measures of the loop and pollution signals over a window, per attempt outcome
#: event (each attempt's snapshot counts once): name → (SQL aggregate, meaning).
_ATTEMPT_ENDS = "kind IN ('attempt_failed', 'attempt_succeeded')"
SIGNAL_MEASURES: dict[str, tuple[str, str]] = {
    "max_trailing_errors": (f"maxIf(trailing_errors, {_ATTEMPT_ENDS})", "most error messages back to back at a context's end"),
    "max_recent_error_share": (
        f"maxIf(recent_error_share, {_ATTEMPT_ENDS})", "highest error share of a context's last N messages",
    ),
    "repeated_tool_calls": (f"sumIf(repeated_tool_calls, {_ATTEMPT_ENDS})", "tool calls identical to the call just before"),
    "looping_attempts": (f"countIf({_ATTEMPT_ENDS} AND repeated_tool_calls > 0)", "attempts with a repeated tool call"),
    "looping_attempt_rate": (
        f"countIf({_ATTEMPT_ENDS} AND repeated_tool_calls > 0) / greatest(countIf({_ATTEMPT_ENDS}), 1)",
        "looping attempts / attempts",
    ),
    "retries_exhausted": (
        f"uniqExactIf(cityHash64(project, task_id), {RETRIES_EXHAUSTED})",
        "tasks stopped because a retry cap or their budget ran out",
    ),
}


def signal_measures(
    store: EventStore, where: Slice = Slice(), *, per: str = ""
) -> dict[str, dict[str, float]]:
    """Slice value (``""`` overall, else the ``per`` dimension's value) → ``calls`` (attempts
    that ended) and every :data:`SIGNAL_MEASURES` value, from the slice's events (exact, ``FINAL``)."""
    clause, params = where.where()
    group = per or "''"
    aggregates = ", ".join(f"{sql} AS m_{name}" for name, (sql, _m) in SIGNAL_MEASURES.items())
    sql = store.sql(
        f"SELECT toString({group}) AS slice_value, countIf({_ATTEMPT_ENDS}) AS calls, {aggregates}"
        f" FROM [[db]].events FINAL WHERE ({clause}) GROUP BY slice_value"
    )
    return {
        str(row["slice_value"]): {"calls": float(row["calls"])}
        | {name: float(row[f"m_{name}"]) for name in SIGNAL_MEASURES}
        for row in query_rows(store.client, sql, params)
    }
