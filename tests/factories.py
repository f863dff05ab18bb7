"""Small builders for test events and payloads (tests read as specifications)."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from retrylens.schemas import RetryEvent

BASE_TS = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def make_event(**overrides: Any) -> RetryEvent:
    fields: dict[str, Any] = {
        "project": "acme",
        "agent": {"name": "planner", "role": "planning"},
        "task_id": "task-1",
        "correlation_id": "task-1/0",
        "kind": "attempt_started",
        "ts": BASE_TS,
    }
    fields.update(overrides)
    return RetryEvent(**fields)


def make_events(n: int, *, tasks: int = 100, seed: int = 0, project: str = "acme") -> list[RetryEvent]:
    """``n`` varied valid events spread over ``tasks`` tasks (deterministic under ``seed``)."""
    rng = random.Random(seed)
    kinds = ["attempt_started", "attempt_failed", "attempt_succeeded", "decision"]
    events = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        task = f"task-{rng.randrange(tasks)}"
        extra: dict[str, Any] = {}
        if kind == "attempt_failed":
            extra = {"error_type": rng.choice(["timeout", "rate_limit", "logic"]), "retryable": True}
        if kind == "decision":
            extra = {"decision": "retry_backoff", "backoff_ms": rng.randrange(100, 5000), "decision_reason": "timeout"}
        events.append(
            RetryEvent(
                event_id=uuid.UUID(int=rng.getrandbits(128), version=4),
                project=project,
                agent={"name": "worker", "role": "exec"},
                task_id=task,
                correlation_id=f"{task}/{i % 3}",
                attempt=i % 3,
                kind=kind,
                ts=BASE_TS + timedelta(milliseconds=i),
                tokens_in=rng.randrange(1000),
                **extra,
            )
        )
    return events


def payload(**overrides: Any) -> bytes:
    """A serialized valid event with ``overrides`` applied to its JSON fields."""
    body = orjson.loads(make_event().to_json_bytes())
    body["event_id"] = str(uuid.uuid4())
    body.update(overrides)
    return orjson.dumps(body)
