"""CPU-heavy request work in a worker process, so that it never holds the server's event loop.

Inflating a gzip body, parsing a protobuf or a large JSON document are C calls that hold the
interpreter lock for their whole length: moved to a thread, they still stop the event loop
(``/healthz``, every other tenant's request) for as long as they run. One worker process
(started beside ``serve``'s start-up, else on first use; ``spawn``: the server has threads,
which ``fork`` must not copy; it ends when the server ends, ``kill -9`` included)
does that work for every app of this process; its answers are small (an OTLP export comes
back as the spans kept for the mapping, a refused body as its reason), so taking them back
costs the server little. Requests wait for the worker in turn, and the worker runs at a
lower priority (:data:`WORKER_NICENESS`): a flood of heavy bodies slows the heavy bodies, not
the server.

A worker that dies (out of memory on a hostile body) is replaced on the next call; the
request that killed it answers 503.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from fastapi import HTTPException

T = TypeVar("T")

_pool: ProcessPoolExecutor | None = None
_lock = threading.Lock()


def _executor() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_start_worker)
        return _pool


#: The worker's niceness above the server's: its work is whatever any client sent, so it takes the
#: CPU the server's event loop and store reads leave (on a small machine it would take a core from them).
WORKER_NICENESS = 10


def _start_worker() -> None:
    """In the worker: lower its priority, and end it when the server ends however it ends
    (a ``kill -9`` leaves no orphan; the worker holds its own queue's pipe, so no EOF tells it)."""
    os.nice(WORKER_NICENESS)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), name="parent-watch", daemon=True).start()


def _exit_with(sentinel: int) -> None:
    multiprocessing.connection.wait([sentinel])
    os._exit(0)


def _discard(broken: ProcessPoolExecutor) -> None:
    global _pool
    with _lock:
        if _pool is broken:
            _pool = None
    broken.shutdown(wait=False, cancel_futures=True)


async def in_worker(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in the worker process (``function`` and its arguments must pickle)."""
    pool = _executor()
    try:
        return await asyncio.get_running_loop().run_in_executor(pool, function, *args)
    except BrokenProcessPool as exc:
        _discard(pool)
        raise HTTPException(503, "the server's worker process stopped on this request; try again") from exc


def _ready() -> None:
    """Nothing: submitted at start-up so the worker is spawned before the first request needs it."""


def warm_up() -> Future[None]:
    """Start the worker now; the future is done once it answers. A spawned worker imports the
    server's main module (1-5 s): ``retrylens serve`` starts it first and waits for it only before
    it listens, so a first OTLP export never waits for it."""
    return _executor().submit(_ready)


#: How long the server's shutdown waits for the worker to finish the body it is parsing. Its
#: work is a request's, never durable state (the request's client re-sends what got no answer),
#: so past this the worker is killed rather than the shutdown hung: a hostile body, or a worker
#: starved on a loaded machine, once held an app's shutdown past five minutes.
SHUTDOWN_WAIT_S = 10.0


def shutdown(wait_s: float = SHUTDOWN_WAIT_S) -> None:
    """Stop the worker (the server's shutdown; a later call starts a new one): pending work is
    cancelled, running work gets ``wait_s`` seconds, then the worker is killed."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is None:
        return
    # The executor's own processes (CPython keeps them by pid): shutdown(wait=True) has no bound,
    # and interpreter exit joins the executor's manager thread, which waits for them too.
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + wait_s
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join(5)
