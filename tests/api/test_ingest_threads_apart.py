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
