"""Helpers for testing agents that use RetryLens: capture what they emitted.

    from retrylens.testing import capture_events

    with capture_events() as captured:
        governor = Governor(policy, project="shop", emit=captured.emit)
        run_my_agent(governor)
    assert captured.decisions() == [Decision.RETRY_BACKOFF]

Events travel through the real :class:`~retrylens.ingest.Emitter` into an in-memory sink
and are parsed back from their wire bytes, so a test also proves they serialize and
validate exactly as the ingest consumer will see them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from retrylens.schemas import Decision, EventKind, RetryEvent, TaskOutcome
from retrylens.sdk.transport.emitter import Emitter, Record


class MemorySink:
    """An in-memory transport: accepts every record, keeps them in order."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self._lock = threading.Lock()

    def deliver(self, records: list[Record]) -> int:
        with self._lock:
            self.records.extend(records)
        return len(records)

    def close(self) -> None:
        pass


class CapturedEvents:
    def __init__(self, emitter: Emitter, sink: MemorySink) -> None:
        self._emitter = emitter
        self.sink = sink

    def emit(self, event: RetryEvent) -> bool:
        return self._emitter.emit(event)

    def records(self) -> list[Record]:
        """Every (key, bytes) record delivered so far, after flushing the emitter."""
        self._emitter.flush(timeout_s=10)
        return list(self.sink.records)

    @property
    def events(self) -> list[RetryEvent]:
        """Every event delivered so far, parsed back from its serialized bytes."""
        return [RetryEvent.from_json_bytes(value) for _, value in self.records()]

    def of_kind(self, kind: EventKind | str) -> list[RetryEvent]:
        return [e for e in self.events if e.kind == kind]

    def kinds(self) -> list[str]:
        return [e.kind.value for e in self.events]

    def decisions(self) -> list[Decision]:
        return [e.decision for e in self.of_kind(EventKind.DECISION)]

    def for_task(self, task_id: str) -> list[RetryEvent]:
        return [e for e in self.events if e.task_id == task_id]

    def outcomes(self) -> dict[str, TaskOutcome]:
        """How each finished task ended, by task id.

        Read from any event that carries an outcome: ``task_finished``, or the compact
        ``attempt_succeeded`` that records a clean first-try success on its own (a
        governed call that succeeds at once emits no ``task_finished``).
        """
        return {e.task_id: e.outcome for e in self.events if e.outcome is not None}


@contextmanager
def capture_events() -> Iterator[CapturedEvents]:
    """Collect emitted events in memory for assertions; closes the emitter on exit."""
    sink = MemorySink()
    emitter = Emitter(sink=sink, spool=None)
    try:
        yield CapturedEvents(emitter, sink)
    finally:
        emitter.close()
