"""The server's ingest threads insert on a connection of their own: a tenant's read never queues
behind another tenant's insert. They run Python at the API's priority (only the engine's threads of
their inserts are niced): a niced thread holding the interpreter lock stalls the event loop."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from apitest_support import GLOBEX
from fastapi.testclient import TestClient

from retrylens.api.app import create_app
from retrylens.api.server import IngestThreads
from retrylens.config import Settings
from retrylens.ingest.priority import thread_niceness
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse

HOLD_S = 1.2


def test_a_read_does_not_wait_for_a_long_call_of_the_ingest_threads(api_settings: Settings,
                                                                   seeded: EventStore) -> None:
    threads = IngestThreads(api_settings, seeded)
    started = threading.Event()

    def long_insert_side_call() -> None:  # holds the ingest connection as a long insert would
        started.set()
        threads.store.client.query("SELECT sleepEachRow(0.4) FROM numbers(3)")

    try:
        with TestClient(create_app(api_settings, seeded)) as client:
            client.get("/v1/projects/globex/metrics", headers=GLOBEX)  # warm
            holder = threading.Thread(target=long_insert_side_call)
            holder.start()
            started.wait()
            time.sleep(0.2)
            begun = time.perf_counter()
            answer = client.get("/v1/projects/globex/metrics", headers=GLOBEX)
            waited = time.perf_counter() - begun
            holder.join()
        assert answer.status_code == 200
        assert waited < HOLD_S / 2, f"the read waited {waited:.2f} s for the ingest connection"
    finally:
        threads.stop()


LINUX_ONLY = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness is Linux's")


def _noting_niceness(target: Callable[..., Any], seen: list[tuple[str, int]]) -> Callable[..., Any]:
    """``target``, noting the niceness of the thread that runs it while it runs."""

    def run(*args: Any, **kwargs: Any) -> Any:
        seen.append((threading.current_thread().name, thread_niceness()))
        return target(*args, **kwargs)

    return run


def _wait_for(seen: list[tuple[str, int]], what: str) -> None:
    deadline = time.monotonic() + 30  # a thread starting on a loaded machine
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    assert seen, f"{what} never ran"


@LINUX_ONLY
def test_the_spool_ingest_thread_runs_python_at_the_apis_priority(api_settings: Settings, store: EventStore,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """It shares the interpreter lock with the event loop: niced, it held the lock while the kernel
    left it waiting, and healthz waited with it (``retrylens.ingest.priority``). Its inserts' engine
    threads are still niced (``test_store_connections``)."""
    from retrylens.ingest.spool_ingestor import SpoolIngestor

    seen: list[tuple[str, int]] = []
    monkeypatch.setattr(SpoolIngestor, "run_once", _noting_niceness(SpoolIngestor.run_once, seen))
    mine = thread_niceness()
    threads = IngestThreads(api_settings, store, spool_interval_s=0.05)
    threads.start()
    try:
        _wait_for(seen, "the spool ingestor")
        time.sleep(0.2)  # a few passes
    finally:
        threads.stop()
    assert {niceness for name, niceness in seen if name == "retrylens-spool-ingestor"} == {mine}
    assert thread_niceness() == mine


@LINUX_ONLY
def test_sealing_and_alert_evaluation_run_python_at_the_apis_priority(api_settings: Settings, store: EventStore,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A sealing pass's statements run on the engine's threads (niced on the store apart the server
    gives it); the threads that issue them run Python beside the event loop, at its priority."""
    import retrylens.analytics.sealing as sealing
    import retrylens.api.server as server

    sealed: list[tuple[str, int]] = []
    evaluated: list[tuple[str, int]] = []
    monkeypatch.setattr(sealing, "seal_rollups", _noting_niceness(sealing.seal_rollups, sealed))
    monkeypatch.setattr(server, "run_periodically", _noting_niceness(server.run_periodically, evaluated))
    mine = thread_niceness()
    stop = server.start_maintenance(store, api_settings)
    try:
        _wait_for(sealed, "the sealer")
        _wait_for(evaluated, "the alert evaluation")
    finally:
        stop()
    assert sealed[0] == ("retrylens-rollup-sealer", mine)
    assert evaluated[0] == ("retrylens-alerts", mine)


@LINUX_ONLY
def test_an_otlp_exports_intake_runs_on_its_own_thread_at_the_apis_priority(
        api_settings: Settings, store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mapping and judging an export's events ran in the request pool, as many at once as exports
    arrived; they run on one intake thread, one export at a time. It runs Python beside the event
    loop: niced, it stalled healthz whenever the kernel left it waiting with the interpreter lock."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    import retrylens.api.otlp as otlp
    from retrylens.api.intake_thread import THREAD_NAME

    judged: list[tuple[str, int]] = []
    monkeypatch.setattr(otlp, "judge", _noting_niceness(otlp.judge, judged))  # the real judge, watched
    export = ExportTraceServiceRequest()
    span = export.resource_spans.add().scope_spans.add().spans.add(
        trace_id=(7).to_bytes(16, "big"), span_id=b"\x01" * 8, name="chat",
        start_time_unix_nano=1_760_000_000 * 10**9, end_time_unix_nano=1_760_000_001 * 10**9)
    span.attributes.add(key="gen_ai.operation.name").value.string_value = "invoke_agent"
    mine = thread_niceness()
    with TestClient(create_app(api_settings, store)) as client:
        answer = client.post("/v1/traces", content=export.SerializeToString(),
                             headers={**GLOBEX, "Content-Type": "application/x-protobuf"})
        assert answer.status_code == 200, answer.text
    assert [(name.startswith(THREAD_NAME), niceness) for name, niceness in judged] == [(True, mine)]
    assert thread_niceness() == mine
