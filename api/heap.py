"""The server's start-up heap, moved out of the garbage collector's full passes.

Why: once ``retrylens serve`` has imported FastAPI, pandas, scikit-learn and the store client
and built its app, some 200,000 container objects are alive that live as long as the
process. CPython's full (generation-2) collection walks every one of them: 200-300 ms with
the GIL held on the 2-core machine the figures come from, started whenever enough new
objects have survived (under pre-check load the fingerprint index, the similar-failures memo
and the model are rebuilt and grow, so every few minutes). Every request that arrives
meanwhile, a pre-check or a healthz, waits for all of it: the slowest answers of a run.

:func:`freeze_startup_heap` moves what is alive at start-up into the permanent generation,
which collections skip; objects created later are collected as before. The frozen objects
are never reclaimed by the cycle collector, which costs nothing for objects that live as
long as the process; it is called once, by the process that owns it (:func:`.server.serve`),
never by :func:`.app.create_app`, which tests call many times in one process.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Collect once, then freeze every object still alive; returns how many are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
