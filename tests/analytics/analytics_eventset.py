"""A small fixed event set with hand-computed metrics, shared by the analytics tests.

Project ``alpha`` (five tasks) plus one task of project ``beta`` that must never leak into
``alpha``'s numbers. Attempts are numbered from 1. Times: tasks A and B run in the 10:00
hour, C, D and E in the 11:00 hour of yesterday (UTC; recent, so the table's row TTL keeps them).

    task  agent    phase      policy  attempts (latency ms, cost, tokens in+out)            outcome
    A     planner  planning   v1      1 failed timeout (1000, .010, 150) -> backoff 500      succeeded
                                      2 succeeded (800, .020, 300)
    B     planner  planning   v1      1 failed logic (400, .005, 60) -> retry_same           handed_off
                                      2 failed logic (600, .006, 80) -> handoff_human + handoff event
    C     coder    execution  v2      1 failed rate_limit (200, 0, 0) -> backoff 2000        succeeded
                                      2 failed server_error (300, .001, 10) -> degrade_scope, backoff 1000
                                      3 succeeded (1200, .030, 450)
    D     coder    execution  v2      1 succeeded (500, .010, 100)                           succeeded
    E     coder    execution  v2      1 failed budget_exhausted (100, .002, 25) -> give_up   failed
"""

from __future__ import annotations

import math
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from retrylens.analytics.histogram import RELATIVE_ERROR, key_of, value_of
from retrylens.analytics.metrics import ErrorTypeShare, Metrics, SliceMetrics, TrendPoint
from retrylens.schemas import RetryEvent
from retrylens.sdk.text.features import extract_input_features, input_fingerprint
from retrylens.store import EventStore
from retrylens.store.event_table import event_row

T0 = (datetime.now(UTC) - timedelta(days=1)).replace(hour=10, minute=0, second=0, microsecond=0)
T1 = T0 + timedelta(hours=1)
PLAN_INPUT = "Plan the invoice refund for the customer order"
CODE_INPUT = "Write the export script for the monthly report"
FP_PLAN = input_fingerprint(PLAN_INPUT)
FP_CODE = input_fingerprint(CODE_INPUT)

EXPECTED_ALPHA: dict[str, Any] = {
    "calls": 9,
    "failures": 6,
    "retries": 4,
    "retry_successes": 2,
    "degrades": 1,
    "handoffs": 1,
    "budget_exhaustions": 1,
    "tasks": 5,
    "tasks_retried": 3,
    "tasks_recovered": 2,
    "tasks_handed_off": 1,
    "successful_without_retry": 1,  # D
    "successful_with_retry": 2,  # A, C
    "failed_with_retry": 1,  # B (handed off)
    "failed_without_retry": 1,  # E
    "retry_rate": 4 / 9,
    "retry_success_rate": 2 / 4,
    "mean_retry_duration_ms": (800 + 600 + 300 + 1200) / 4,
    # linear interpolation (numpy's default) over [300, 600, 800, 1200] at 0.95: 800 + 0.85 * 400
    "p95_retry_duration_ms": 1140.0,
    # over [500, 1000, 2000]: 1000 + 0.9 * 1000
    "p95_backoff_ms": 1900.0,
    "degradation_rate": 1 / 6,
    "handoff_rate": 1 / 6,
    "recovery_rate": 2 / 3,
    "failed_cost_usd": 0.010 + 0.005 + 0.006 + 0.0 + 0.001 + 0.002,
    "failed_tokens": 150 + 60 + 80 + 0 + 10 + 25,
    "retry_cost_usd": 0.020 + 0.006 + 0.001 + 0.030,
    "retry_tokens": 300 + 80 + 10 + 450,
    "retry_cost_per_retried_task_usd": (0.020 + 0.006 + 0.001 + 0.030) / 3,
}


#: Metrics the rollups give within ``RELATIVE_ERROR`` (log-spaced histograms); everything else is exact.
APPROXIMATE = ("p95_retry_duration_ms", "p95_backoff_ms")


def bucketed_p95(values: list[int]) -> float:
    """The rollups' p95 of ``values``: numpy's linear interpolation over the values as their
    histogram keys read them back (:mod:`retrylens.analytics.histogram`)."""
    keyed = sorted(value_of(key_of(v)) for v in values)
    position = (len(keyed) - 1) * 0.95
    low = math.floor(position)
    high = min(low + 1, len(keyed) - 1)
    return keyed[low] + (position - low) * (keyed[high] - keyed[low])


#: What the rollups give for the approximate metrics of ``EXPECTED_ALPHA``.
ROLLUP_P95_ALPHA = {
    "p95_retry_duration_ms": bucketed_p95([300, 600, 800, 1200]),
    "p95_backoff_ms": bucketed_p95([500, 1000, 2000]),
}


def assert_metrics(
    metrics: Metrics, expected: dict[str, Any] = EXPECTED_ALPHA, *, source: str = "rollup"
) -> None:
    """``metrics`` equal ``expected``; from the rollups, p95s within the documented relative error
    of the exact values and equal to the bucketed interpolation."""
    for name, value in expected.items():
        got = getattr(metrics, name)
        if source == "rollup" and name in APPROXIMATE and value is not None:
            assert abs(got - value) <= RELATIVE_ERROR * value, (name, got, value)
            if name in ROLLUP_P95_ALPHA and value == EXPECTED_ALPHA[name]:
                assert got == pytest.approx(ROLLUP_P95_ALPHA[name]), name
        else:
            assert got == pytest.approx(value), name


class Within:
    """Equal to any number within ``RELATIVE_ERROR`` (relative) of ``value``; ``None`` only to ``None``."""

    def __init__(self, value: float | None) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        if self.value is None or other is None:
            return self.value is other
        return abs(float(other) - self.value) <= RELATIVE_ERROR * abs(self.value) + 1e-9  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"Within({self.value!r} ± {RELATIVE_ERROR:.0%})"


def approx_rollup(raw: Any) -> Any:
    """``raw`` results (metrics, slices, trends, lists, tuples) as rollup results must equal them:
    exact, but for p95s within the documented bound."""
    if isinstance(raw, Metrics):
        return replace(raw, **{name: Within(getattr(raw, name)) for name in APPROXIMATE})
    if isinstance(raw, SliceMetrics | TrendPoint):
        return replace(raw, metrics=approx_rollup(raw.metrics))
    if isinstance(raw, list | tuple):
        return type(raw)(approx_rollup(item) for item in raw)
    if isinstance(raw, ErrorTypeShare | int | float | str) or raw is None:
        return raw
    raise TypeError(f"cannot compare {type(raw).__name__}")


class _Task:
    """Builds one task's events with consistent ids and increasing timestamps."""

    def __init__(
        self,
        project: str,
        task_id: str,
        agent: str,
        phase: str,
        policy: str,
        start: datetime,
        text: str,
    ):
        self.project, self.task_id, self.agent, self.phase, self.policy = (
            project,
            task_id,
            agent,
            phase,
            policy,
        )
        self.ts = start
        self.text = text
        self.events: list[RetryEvent] = []

    def _emit(self, kind: str, attempt: int, **fields: Any) -> RetryEvent:
        self.ts += timedelta(seconds=1)
        event = RetryEvent(
            event_id=uuid.uuid5(
                uuid.NAMESPACE_URL, f"{self.project}/{self.task_id}/{len(self.events)}"
            ),
            ts=self.ts,
            project=self.project,
            agent={"name": self.agent, "role": "worker"},
            task_id=self.task_id,
            correlation_id=f"{self.task_id}-a{attempt}" if attempt else f"{self.task_id}-task",
            attempt=attempt,
            phase=self.phase,
            kind=kind,
            policy_id="default",
            policy_version=self.policy,
            input_fingerprint=input_fingerprint(self.text),
            **fields,
        )
        self.events.append(event)
        return event

    def start(self) -> None:
        self._emit(
            "task_started", 0, input_features=extract_input_features(self.text, agent=self.agent)
        )

    def attempt(
        self,
        n: int,
        ok: bool,
        *,
        latency: int,
        cost: float,
        tokens: tuple[int, int],
        error: str | None = None,
        message: str = "",
        context: dict | None = None,
        side_effects: list[dict] | None = None,
    ) -> None:
        self._emit("attempt_started", n, context_snapshot=context, side_effects=side_effects or [])
        outcome: dict[str, Any] = {
            "latency_ms": latency,
            "cost_usd": cost,
            "tokens_in": tokens[0],
            "tokens_out": tokens[1],
        }
        if ok:
            self._emit("attempt_succeeded", n, **outcome)
        else:
            self._emit(
                "attempt_failed", n, error_type=error, error_detail={"message": message}, **outcome
            )

    def decide(self, n: int, decision: str, backoff: int = 0, reason: str = "") -> None:
        self._emit(
            "decision", n, decision=decision, backoff_ms=backoff, decision_reason=reason or decision
        )

    def handoff(self, n: int) -> None:
        self._emit("handoff", n, decision_reason="sent to the review queue")

    def finish(self, outcome: str, attempt: int) -> None:
        self._emit("task_finished", attempt, outcome=outcome)


def _ctx(tokens: int, messages: list[tuple[str, str]], digests: list[str] | None = None) -> dict:
    return {
        "message_count": len(messages),
        "token_count": tokens,
        "last_messages": [{"role": r, "content": c} for r, c in messages],
        "message_digests": digests or [],
    }


def build_events() -> list[RetryEvent]:
    a = _Task("alpha", "task-A", "planner", "planning", "v1", T0, PLAN_INPUT)
    a.start()
    a.attempt(
        1,
        False,
        latency=1000,
        cost=0.010,
        tokens=(100, 50),
        error="timeout",
        message="Timeout after 30s calling https://api.example.com/v1/plan?id=7",
        context=_ctx(1000, [("user", "plan it")]),
    )
    a.decide(1, "retry_backoff", 500)
    a.attempt(
        2,
        True,
        latency=800,
        cost=0.020,
        tokens=(200, 100),
        context=_ctx(
            1500,
            [
                ("user", "plan it"),
                ("tool", "Timeout after 30s calling https://api.example.com/v1/plan?id=7"),
            ],
        ),
    )
    a.finish("succeeded", 2)

    b = _Task(
        "alpha", "task-B", "planner", "planning", "v1", T0 + timedelta(minutes=10), PLAN_INPUT
    )
    b.start()
    b.attempt(
        1,
        False,
        latency=400,
        cost=0.005,
        tokens=(50, 10),
        error="logic",
        message="Invalid plan for order 1234: missing field 'refund_total'",
        context=_ctx(800, [("user", "plan")], ["aa" * 8, "bb" * 8]),
    )
    b.decide(1, "retry_same")
    b.attempt(
        2,
        False,
        latency=600,
        cost=0.006,
        tokens=(60, 20),
        error="logic",
        message="Invalid plan for order 5678: missing field 'refund_total'",
        context=_ctx(900, [("user", "plan"), ("user", "plan")], ["aa" * 8, "bb" * 8, "bb" * 8]),
    )
    b.decide(2, "handoff_human")
    b.handoff(2)
    b.finish("handed_off", 2)

    c = _Task("alpha", "task-C", "coder", "execution", "v2", T1, CODE_INPUT)
    c.start()
    effect = [{"tool": "write_file", "idempotency_key": "task-C:write:1", "status": "committed"}]
    c.attempt(
        1,
        False,
        latency=200,
        cost=0.0,
        tokens=(0, 0),
        error="rate_limit",
        message="429 Too Many Requests: rate limit exceeded, retry after 2s",
        side_effects=effect,
    )
    c.decide(1, "retry_backoff", 2000)
    c.attempt(
        2,
        False,
        latency=300,
        cost=0.001,
        tokens=(10, 0),
        error="server_error",
        message="Upstream 503 from /srv/api/handler.py",
        side_effects=effect,
    )
    c.decide(2, "degrade_scope", 1000)
    c.attempt(3, True, latency=1200, cost=0.030, tokens=(300, 150))
    c.finish("succeeded", 3)

    d = _Task("alpha", "task-D", "coder", "execution", "v2", T1 + timedelta(minutes=10), CODE_INPUT)
    d.start()
    d.attempt(1, True, latency=500, cost=0.010, tokens=(80, 20))
    d.finish("succeeded", 1)

    e = _Task("alpha", "task-E", "coder", "execution", "v2", T1 + timedelta(minutes=20), CODE_INPUT)
    e.start()
    e.attempt(
        1,
        False,
        latency=100,
        cost=0.002,
        tokens=(20, 5),
        error="budget_exhausted",
        message="token budget exhausted after 3 attempts",
    )
    e.decide(1, "give_up")
    e.finish("failed", 1)

    z = _Task("beta", "task-Z", "planner", "planning", "v1", T0, PLAN_INPUT)
    z.start()
    z.attempt(
        1,
        False,
        latency=9999,
        cost=9.0,
        tokens=(999, 999),
        error="timeout",
        message="beta secret timeout",
    )
    z.decide(1, "handoff_human")
    z.finish("handed_off", 1)
    return [*a.events, *b.events, *c.events, *d.events, *e.events, *z.events]


def rows_of(events: list[RetryEvent], first_offset: int = 0) -> list[list[Any]]:
    return [
        event_row(e, topic="test", partition=0, offset=first_offset + i)
        for i, e in enumerate(events)
    ]


def load(store: EventStore, *, duplicates: bool = True) -> list[RetryEvent]:
    """Insert the set; with ``duplicates`` re-send task C and A's failure in a later insert."""
    events = build_events()
    store.insert_rows(rows_of(events))
    if duplicates:
        again = [e for e in events if e.task_id == "task-C"] + [
            e for e in events if e.task_id == "task-A" and e.kind == "attempt_failed"
        ]
        store.insert_rows(rows_of(again, first_offset=1000))
    return events
