"""Adapter tests read their results where users do: events emitted by the real emitter,
processed by the ingest processor, stored in ClickHouse, and measured by the analytics."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from retrylens.analytics.filters import Slice
from retrylens.analytics.metrics import Metrics, metrics_summary
from retrylens.ingest.processor import SourceRef, ValidEvent, process
from retrylens.schemas import RetryEvent
from retrylens.sdk import Governor, parse_policy
from retrylens.store import EventStore
from retrylens.testing import CapturedEvents, capture_events

NO_JITTER = parse_policy({"backoff": {"jitter": 0.0, "base_ms": 1, "cap_ms": 2}})


@dataclass
class Recorded:
    captured: CapturedEvents
    governor: Governor
    project: str

    def events(self) -> list[RetryEvent]:
        return self.captured.events  # flushes the emitter first

    def store(self, store: EventStore) -> Metrics:
        """Ingest everything emitted so far into ``store``; the project's raw metrics."""
        rows = []
        for offset, (_, value) in enumerate(self.captured.records()):
            valid = process(value, SourceRef(self.project, 0, offset))
            assert isinstance(valid, ValidEvent), valid
            rows.append(valid.row)
        store.insert_rows(rows)
        return metrics_summary(store, Slice(project=self.project), source="raw")


@contextmanager
def recording(
    project: str = "adapters", *, seed: int = 7, **governor: object
) -> Iterator[Recorded]:
    with capture_events() as captured:
        g = Governor(
            governor.pop("policy", NO_JITTER),  # type: ignore[arg-type]
            project=project,
            emit=captured.emit,
            rng=random.Random(seed),
            **governor,  # type: ignore[arg-type]
        )
        yield Recorded(captured, g, project)
