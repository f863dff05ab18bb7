"""One thread for the intake work an OTLP export asks of the server's own process: mapping its
spans to events, judging them, appending them to the spool.

That work used to run in the request thread pool the API's reads run in, on as many of its
threads as requests arrived: under one tenant's flood of exports it took pool threads the reads
wait for. Here it runs one export at a time on a thread of its own: a flood queues behind its own
exports. The thread stays at the API's priority: it runs Python, and a niced thread holding the
interpreter lock stalled the event loop whenever the kernel left it waiting
(:mod:`retrylens.ingest.priority`); what it can take is one interpreter's share, handed back
every switch interval. Inflating and parsing the body happen before, in the worker process
(:mod:`.offload`, niced: an interpreter of its own); storing the events after, in the ingest thread.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

THREAD_NAME = "retrylens-intake"

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=THREAD_NAME)
        return _pool


async def on_intake_thread(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on the intake thread, in turn with every other export's intake."""
    return await asyncio.get_running_loop().run_in_executor(_executor(), functools.partial(function, *args))


def shutdown() -> None:
    """Let the intake thread finish what it was given and stop (the server's shutdown)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True)
