"""Every measure and rate the product shows, defined once.

Why: the same figure is computed by several readers — raw SQL (:mod:`.metrics`), the open
set's view (migration 0009), the sealing pass (:mod:`.seal_sql`), the rollup read
(:mod:`.rollup_query`) — and checked against the simulated fleet's ground truth
(:mod:`retrylens.simulation.fleet`). They all build on the definitions here, and the
README's metrics section is generated from them (:func:`metrics_table`).

**One counting event per key.** A count is the number of distinct keys — an attempt is
``(project, task_id, attempt)``, a task ``(project, task_id)`` — among the events that
meet its condition, and every condition picks at most ONE event of a key: an attempt
counts at its outcome event (``attempt_failed`` / ``attempt_succeeded``), a task at the
event that carries its outcome (``task_finished``, or the compact event of a first-try
success), a hand-off at its ``handoff`` event. So a key counts once whatever correlation
ids its events carry, whether the task was recorded compact or in full, however often an
event was re-sent, and it falls in exactly one time bucket and one slice: trends and
breakdowns add up to the totals. Attempts and tasks still running are counted when they end.

A task's outcome event carries ``attempt`` = the number of attempts it made, which sorts
it into the four kinds resilience4j reports (``successful_without_retry`` and so on).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

Unit = Literal["attempt", "task"]

ATTEMPT_KEY = "cityHash64(project, task_id, attempt)"
TASK_KEY = "cityHash64(project, task_id)"
EVENT_KEY = "cityHash64(event_id)"
#: Attempts are numbered from 1; attempt ≥ 2 is a retry.
FIRST_RETRY_ATTEMPT = 2
IS_RETRY = f"attempt >= {FIRST_RETRY_ATTEMPT}"
ENDED = "kind IN ('attempt_failed', 'attempt_succeeded')"
#: Decisions that degrade a task (count as ``degrades``).
DEGRADING_DECISIONS: tuple[str, ...] = ("degrade_scope", "degrade_precision", "degrade_dependency")
DEGRADING = "(" + ", ".join(f"'{d}'" for d in DEGRADING_DECISIONS) + ")"
_FAILED_TASK = "outcome NOT IN ('', 'succeeded')"


@dataclass(frozen=True)
class Count:
    """Distinct ``unit`` keys among the events where ``condition`` (SQL, one event per key) holds."""

    name: str
    unit: Unit
    condition: str
    meaning: str

    @property
    def key(self) -> str:
        return ATTEMPT_KEY if self.unit == "attempt" else TASK_KEY


@dataclass(frozen=True)
class Sum:
    """A count that is the sum of stored counts (kept apart, they need not be stored twice)."""

    name: str
    parts: tuple[str, ...]
    meaning: str


@dataclass(frozen=True)
class Value:
    """A measure over event values (latencies, backoffs, costs, tokens)."""

    name: str
    meaning: str


@dataclass(frozen=True)
class Rate:
    """``numerator / denominator``; ``None`` when the denominator is zero."""

    name: str
    numerator: str
    denominator: str
    meaning: str


#: Stored counts, in the order of their bits in the rollups' ``key_measures`` (bit i = COUNTS[i]).
COUNTS: tuple[Count, ...] = (
    Count("calls", "attempt", ENDED, "attempts that ended (failed or succeeded)"),
    Count("failures", "attempt", "kind = 'attempt_failed'", "failed attempts"),
    Count("retries", "attempt", f"{ENDED} AND {IS_RETRY}", "attempts numbered 2 or more that ended"),
    Count("retry_successes", "attempt", f"kind = 'attempt_succeeded' AND {IS_RETRY}", "retries that succeeded"),
    Count(
        "degrades", "attempt", f"kind = 'decision' AND decision IN {DEGRADING}",
        "failed attempts whose decision degraded the task (scope, precision or dependency)",
    ),
    Count(
        "handoffs", "attempt", "kind = 'handoff'",
        "hand-offs to a human (the attempt's `handoff_human` decision is the same hand-off, not"
        " counted again)",
    ),
    Count(
        "budget_exhaustions", "attempt", "kind = 'attempt_failed' AND error_type = 'budget_exhausted'",
        "attempts that failed with `budget_exhausted`",
    ),
    Count(
        "successful_without_retry", "task", f"outcome = 'succeeded' AND NOT {IS_RETRY}",
        "tasks that succeeded on their first attempt",
    ),
    Count(
        "successful_with_retry", "task", f"outcome = 'succeeded' AND {IS_RETRY}",
        "tasks that succeeded after one or more retries",
    ),
    Count(
        "failed_with_retry", "task", f"{_FAILED_TASK} AND {IS_RETRY}",
        "tasks that ended otherwise (failed, handed off, cancelled) after one or more retries",
    ),
    Count(
        "failed_without_retry", "task", f"{_FAILED_TASK} AND NOT {IS_RETRY}",
        "tasks that ended otherwise without a retry",
    ),
    Count("tasks_handed_off", "task", "outcome = 'handed_off'", "tasks that ended handed to a human"),
)

SUMS: tuple[Sum, ...] = (
    Sum(
        "tasks",
        ("successful_without_retry", "successful_with_retry", "failed_with_retry", "failed_without_retry"),
        "tasks that ended",
    ),
    Sum("tasks_retried", ("successful_with_retry", "failed_with_retry"), "tasks that ended after a retry"),
    Sum("tasks_recovered", ("successful_with_retry",), "tasks that succeeded after a retry"),
)

#: Conditions of the event-level values (one outcome event per attempt, one decision per failure).
RETRY_OUTCOME = f"{ENDED} AND {IS_RETRY}"
WAITED = "kind = 'decision' AND backoff_ms > 0"
COSTED = f"{ENDED} AND (kind = 'attempt_failed' OR {IS_RETRY})"

VALUES: tuple[Value, ...] = (
    Value("mean_retry_duration_ms", "mean `latency_ms` of retries (exact)"),
    Value("p95_retry_duration_ms", "95th percentile of `latency_ms` of retries"),
    Value("p95_backoff_ms", "95th percentile of `backoff_ms` of decisions that waited"),
    Value("failed_cost_usd", "`cost_usd` of failed attempts"),
    Value("failed_tokens", "tokens in + out of failed attempts"),
    Value("retry_cost_usd", "`cost_usd` of retries"),
    Value("retry_tokens", "tokens in + out of retries"),
)

RATES: tuple[Rate, ...] = (
    Rate("retry_rate", "retries", "calls", "retries / calls"),
    Rate("retry_success_rate", "retry_successes", "retries", "retries that succeeded / retries"),
    Rate("degradation_rate", "degrades", "failures", "degradations / failures"),
    Rate("handoff_rate", "handoffs", "failures", "hand-offs / failures"),
    Rate("recovery_rate", "tasks_recovered", "tasks_retried", "tasks that succeeded after a retry / tasks retried"),
    Rate(
        "retry_cost_per_retried_task_usd", "retry_cost_usd", "tasks_retried",
        "cost of retries / tasks retried",
    ),
)

COUNT_NAMES: tuple[str, ...] = tuple(c.name for c in COUNTS)
#: Bit of each stored count in ``key_measures`` and in the open set's ``keys``.
MEASURE_BITS: dict[str, int] = {name: i for i, name in enumerate(COUNT_NAMES)}
#: Values that come from histograms in the rollups (within the histogram's relative error there).
PERCENTILES: tuple[str, ...] = ("p95_retry_duration_ms", "p95_backoff_ms")


def count(name: str) -> Count:
    return next(c for c in COUNTS if c.name == name)


def measure_mask_sql(unit: Unit) -> str:
    """SQL: the bits of the ``unit``-keyed counts that an event counts for (UInt16)."""
    bits = [f"if({c.condition}, {1 << MEASURE_BITS[c.name]}, 0)" for c in COUNTS if c.unit == unit]
    return f"toUInt16({' + '.join(bits)})"


@dataclass(frozen=True)
class Metrics:
    """Counts and derived metrics of one slice; a ratio with a zero denominator is ``None``.

    Every field is defined in :data:`COUNTS`, :data:`SUMS`, :data:`VALUES` or :data:`RATES`.
    """

    calls: int = 0
    failures: int = 0
    retries: int = 0
    retry_successes: int = 0
    degrades: int = 0
    handoffs: int = 0
    budget_exhaustions: int = 0
    tasks: int = 0
    tasks_retried: int = 0
    tasks_recovered: int = 0
    tasks_handed_off: int = 0
    successful_without_retry: int = 0
    successful_with_retry: int = 0
    failed_with_retry: int = 0
    failed_without_retry: int = 0
    retry_rate: float | None = None
    retry_success_rate: float | None = None
    mean_retry_duration_ms: float | None = None
    p95_retry_duration_ms: float | None = None
    p95_backoff_ms: float | None = None
    degradation_rate: float | None = None
    handoff_rate: float | None = None
    recovery_rate: float | None = None
    failed_cost_usd: float = 0.0
    failed_tokens: int = 0
    retry_cost_usd: float = 0.0
    retry_tokens: int = 0
    retry_cost_per_retried_task_usd: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


METRIC_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Metrics))


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def metrics_from(counts: Mapping[str, int], values: Mapping[str, Any]) -> Metrics:
    """The metrics of stored ``counts`` (by :data:`COUNT_NAMES`) and ``values`` (by :data:`VALUES`
    names; missing costs and tokens are 0, missing means and percentiles ``None``)."""
    numbers: dict[str, Any] = {name: int(counts.get(name, 0)) for name in COUNT_NAMES}
    for total in SUMS:
        numbers[total.name] = sum(numbers[part] for part in total.parts)
    for value in VALUES:
        given = values.get(value.name)
        if value.name.endswith("_tokens"):
            given = int(given or 0)
        elif value.name.endswith("_usd"):
            given = float(given or 0.0)
        numbers[value.name] = given
    for rate in RATES:
        numbers[rate.name] = _ratio(numbers[rate.numerator], numbers[rate.denominator])
    return Metrics(**numbers)


def metrics_table() -> list[str]:
    """The README's metrics table (markdown lines), generated from the definitions."""
    rows = ["| metric | kind | definition |", "|---|---|---|"]
    for c in COUNTS:
        rows.append(f"| `{c.name}` | {c.unit} count | {c.meaning}; counted at `{c.condition}` |")
    for s in SUMS:
        rows.append(f"| `{s.name}` | task count | {s.meaning}: {' + '.join(f'`{p}`' for p in s.parts)} |")
    for v in VALUES:
        rows.append(f"| `{v.name}` | value | {v.meaning} |")
    for r in RATES:
        rows.append(f"| `{r.name}` | rate | {r.meaning} (`{r.numerator}` / `{r.denominator}`) |")
    return rows
