"""A consumer process's start-up heap, kept out of the cyclic collector's full passes.

What a ``retrylens consume`` process builds before its loop (the modules it imported:
pydantic's schemas, chDB, pandas, the Kafka client; its store) lives as long as the
process, and CPython's full collection walks every tracked object of it each time the
loop's allocations (a poll's records, the decoded events) trigger one. On the bench's
100k-event fleet road that was ~1.5 µs of the consumer thread's ~25 µs an event
(``bench/RESULTS.md``, issue 36's ingest road). :func:`settle_startup_heap` collects once and
moves what is left to the permanent generation (:func:`gc.freeze`), which those passes
skip. Frozen objects are still freed by reference counting; only a cycle among them would
never be collected, which is why the garbage is collected first.

Called once per process by the commands that run a consumer loop, not by the consumer
class itself: a process that starts many consumers (the test suite) must not freeze
its heap again and again.
"""

from __future__ import annotations

import gc


def settle_startup_heap() -> int:
    """Collect, then freeze every tracked object alive now; returns how many are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
