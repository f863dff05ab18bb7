"""The server's ingest threads insert on a connection of their own, below the API's priority:
a tenant's read never queues behind another tenant's insert."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from apitest_support import GLOBEX
from fastapi.testclient import TestClient

from retrylens.api.app import create_app
from retrylens.api.server import IngestThreads
from retrylens.config import Settings
from retrylens.ingest.priority import INGEST_NICENESS, thread_niceness
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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness is Linux's")
def test_the_spool_ingest_thread_runs_below_the_api(api_settings: Settings, store: EventStore) -> None:
    mine = thread_niceness()
    threads = IngestThreads(api_settings, store, spool_interval_s=0.05)
    threads.start()
    try:
        assert threads.spool is not None and threads.spool._thread is not None
        tid = threads.spool._thread.native_id
        assert tid is not None
        deadline = time.monotonic() + 30  # a thread starting on a loaded machine
        while os.getpriority(os.PRIO_PROCESS, tid) == mine and time.monotonic() < deadline:
            time.sleep(0.02)
        assert os.getpriority(os.PRIO_PROCESS, tid) == min(19, mine + INGEST_NICENESS)
        assert thread_niceness() == mine  # the API's thread keeps its priority
    finally:
        threads.stop()


def _niceness_of(thread: threading.Thread, unlike: int) -> int:
    """The thread's niceness once it has set it (a thread starting on a loaded machine)."""
    tid = thread.native_id
    assert tid is not None
    deadline = time.monotonic() + 30
    while os.getpriority(os.PRIO_PROCESS, tid) == unlike and time.monotonic() < deadline:
        time.sleep(0.02)
    return os.getpriority(os.PRIO_PROCESS, tid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness is Linux's")
def test_sealing_and_alert_evaluation_run_below_the_api(api_settings: Settings, store: EventStore) -> None:
    """A sealing pass recomputes every bucket a flood's events touched: it must take the CPU the
    reads leave (it ran at the API's priority, seconds a minute under a flood)."""
    from retrylens.api.server import start_maintenance

    mine = thread_niceness()
    stop = start_maintenance(store, api_settings)
    try:
        named = {t.name: t for t in threading.enumerate()}
        for name in ("retrylens-rollup-sealer", "retrylens-alerts"):
            assert _niceness_of(named[name], mine) == min(19, mine + INGEST_NICENESS), name
        assert thread_niceness() == mine
    finally:
        stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own niceness is Linux's")
def test_an_otlp_exports_intake_runs_on_its_own_thread_below_the_api(api_settings: Settings, store: EventStore,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Mapping and judging an export's events ran in the request pool at the reads' priority, as
    many at once as exports arrived; they run on one intake thread at the ingest threads' niceness."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    import retrylens.api.otlp as otlp
    from retrylens.api.intake_thread import THREAD_NAME

    judged_on: list[threading.Thread] = []
    real_judge = otlp.judge

    def judge_and_note_the_thread(*args: object, **kwargs: object) -> object:  # the real judge, watched
        judged_on.append(threading.current_thread())
        return real_judge(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(otlp, "judge", judge_and_note_the_thread)
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
        assert [t.name.startswith(THREAD_NAME) for t in judged_on] == [True]
        assert _niceness_of(judged_on[0], mine) == min(19, mine + INGEST_NICENESS)
    assert thread_niceness() == mine
