"""Builders shared by the API tests: two projects, their keys, seeded events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from retrylens.analytics.synthetic import synthetic_events
from retrylens.schemas import RetryEvent
from retrylens.store import EventStore
from retrylens.store.event_table import event_row

KEYS = {"acme": "key-acme-0123456789", "globex": "key-globex-9876543210"}
ACME = {"X-API-Key": KEYS["acme"]}
GLOBEX = {"X-API-Key": KEYS["globex"]}
NOW = datetime.now(UTC).replace(microsecond=0)


def insert(store: EventStore, events: list[RetryEvent]) -> None:
    store.insert_rows([event_row(e, topic="test", partition=0, offset=i) for i, e in enumerate(events)])


def seed(store: EventStore, *, acme_tasks: int = 80, globex_tasks: int = 20) -> None:
    """Synthetic tasks for both projects (globex's must never show up in acme's answers)."""
    insert(store, synthetic_events(acme_tasks, seed=1, project="acme", now=NOW)
           + synthetic_events(globex_tasks, seed=2, project="globex", now=NOW - timedelta(minutes=5)))


def project_routes(app) -> list[tuple[str, str]]:
    """(method, path template) of every operation in the OpenAPI spec that takes a ``{project}``."""
    return [(method.upper(), path) for path, item in app.openapi()["paths"].items() if "{project}" in path
            for method in item]


def fill(path: str, project: str) -> str:
    return (path.replace("{project}", project).replace("{agent}", "planner").replace("{task_id}", "t1-000001")
            .replace("{fingerprint}", "abc123").replace("{dimension}", "agent"))


BODIES = {"PUT": {"enabled": True}}
