"""The ground truth of every metric, from what the simulation itself ran — never from events.

Why: the metrics are computed from stored events by several readers; checking them against
fixtures written by the same hand proves little (a hand-off was counted twice for that
reason). The simulated fleet knows each attempt it ran (:class:`~.drivers.AttemptTruth`):
whether it failed, what it cost, what latency it reported and what the governor decided.
This module totals those tallies under the definitions of
:mod:`retrylens.analytics.definitions`, so that every read path can be held to them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from retrylens.analytics.definitions import (
    DEGRADING_DECISIONS,
    FIRST_RETRY_ATTEMPT,
    Metrics,
    metrics_from,
)

from .drivers import Tally

P95 = 0.95


def exact_quantile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between order statistics (numpy's default, ClickHouse's
    ``quantileExactInclusive``); ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    h = (len(ordered) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return float(ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo]))


def _nano(usd: float) -> int:
    return round(usd * 1e9)


def truth_of(tallies: Iterable[Tally]) -> Metrics:
    """Every metric of ``tallies`` as :func:`~retrylens.analytics.metrics.metrics_summary` names it."""
    counts: Counter[str] = Counter()
    latencies: list[int] = []
    backoffs: list[int] = []
    failed_nano = retry_nano = failed_tokens = retry_tokens = 0
    for tally in tallies:
        retried = len(tally.log) >= FIRST_RETRY_ATTEMPT
        kind = "successful" if tally.succeeded else "failed"
        counts[f"{kind}_{'with' if retried else 'without'}_retry"] += 1
        counts["tasks_handed_off"] += tally.handed_off
        counts["handoffs"] += tally.handed_off
        for attempt in tally.log:
            retry = attempt.number >= FIRST_RETRY_ATTEMPT
            counts["calls"] += 1
            counts["retries"] += retry
            if attempt.failed:
                counts["failures"] += 1
                counts["degrades"] += attempt.decision in DEGRADING_DECISIONS
                counts["budget_exhaustions"] += attempt.error_type == "budget_exhausted"
                failed_nano += _nano(attempt.cost_usd)
                failed_tokens += attempt.tokens
                if attempt.backoff_ms > 0:
                    backoffs.append(attempt.backoff_ms)
            else:
                counts["retry_successes"] += retry
            if retry:
                latencies.append(attempt.latency_ms)
                retry_nano += _nano(attempt.cost_usd)
                retry_tokens += attempt.tokens
    return metrics_from(counts, {
        "mean_retry_duration_ms": sum(latencies) / len(latencies) if latencies else None,
        "p95_retry_duration_ms": exact_quantile(latencies, P95),
        "p95_backoff_ms": exact_quantile(backoffs, P95),
        "failed_cost_usd": failed_nano / 1e9,
        "failed_tokens": failed_tokens,
        "retry_cost_usd": retry_nano / 1e9,
        "retry_tokens": retry_tokens,
    })


def truth_by(tallies: Iterable[Tally], dimension: str, *, project: str | None = None) -> dict[str, Metrics]:
    """:func:`truth_of` per ``project`` or ``agent`` (of ``project`` only, when given)."""
    if dimension not in ("project", "agent"):
        raise ValueError(f"the truth is kept per project or agent, not {dimension!r}")
    groups: dict[str, list[Tally]] = {}
    for tally in tallies:
        if project is None or tally.project == project:
            groups.setdefault(getattr(tally, dimension), []).append(tally)
    return {value: truth_of(group) for value, group in sorted(groups.items())}
