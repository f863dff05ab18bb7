"""Which threads may run below the API's priority: none that runs Python in the API's process.

A thread's niceness (Linux: ``setpriority`` on its thread id) decides when the kernel runs it,
but in one interpreter only the thread holding the interpreter lock runs Python. A niced thread
that holds the lock and is then descheduled in favour of other work keeps every other thread of
the process waiting for the lock: the event loop answering ``/healthz`` and the reads' threads
wait as long as the kernel keeps the low-priority holder off the CPU (a priority inversion).
Measured (session 19, ``bench/RESULTS.md``, ``bench/gil_inversion.py``): beside two CPU burners
in its scheduling group, a thread waking every 5 ms waited p99 139-293 ms for the lock when a
Python thread busy 10 ms in 40 ran at niceness 10, 41-78 ms when it ran at 0 (without burners in
the group the niced thread did no harm: the inversion needs higher-priority CPU work beside it,
which a server under load has in its own engine threads); under the OTLP flood the server's
niced ingest and intake threads held the lock in garbage collections of 30-90 ms wall (a
generation-0 pass takes well under 1 ms of CPU).

So the server's Python threads (spool ingestor, Kafka consumer, intake thread, sealer, alerts)
stay at the API's priority: their Python work is bounded by the lock anyway, and the lock is
handed over every switch interval to a waiter the kernel runs. What runs below it is work that
does not hold the lock: the engine's threads of the background inserts and sealing statements
(``os_thread_priority``, :data:`retrylens.store.events.BACKGROUND_INSERT_NICENESS`) and the
worker process that inflates and parses bodies (:data:`retrylens.api.offload.WORKER_NICENESS`,
an interpreter of its own).
"""

from __future__ import annotations

import os
import sys
import threading


def thread_niceness() -> int:
    """The calling thread's niceness (Linux; the process's elsewhere)."""
    tid = threading.get_native_id() if sys.platform.startswith("linux") else 0
    return os.getpriority(os.PRIO_PROCESS, tid)
