"""Background ingest threads run below the API's priority, so a flood of one tenant's events
takes the CPU the API's requests leave rather than a share of it.

On Linux a thread has a niceness of its own (``setpriority`` on its thread id); threads it
starts inherit it, which includes the engine threads chDB starts for that thread's inserts.
Elsewhere (macOS, Windows) the niceness is per process, so nothing is changed there.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

log = logging.getLogger(__name__)

#: How far below the API an ingest thread runs: the same as the request worker process
#: (:data:`retrylens.api.offload.WORKER_NICENESS`), whose work is also whatever clients sent.
INGEST_NICENESS = 10


def lower_this_thread(by: int = INGEST_NICENESS) -> bool:
    """Raise the calling thread's niceness by ``by`` (Linux); True if it was changed.

    Never raises: a thread that cannot be reniced (a container without the permission, another
    platform) keeps ingesting at the priority it has."""
    if not sys.platform.startswith("linux"):
        return False
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + by))
    except OSError as exc:
        log.debug("could not lower the ingest thread's priority: %s", exc)
        return False
    return True


def thread_niceness() -> int:
    """The calling thread's niceness (Linux; the process's elsewhere)."""
    tid = threading.get_native_id() if sys.platform.startswith("linux") else 0
    return os.getpriority(os.PRIO_PROCESS, tid)
