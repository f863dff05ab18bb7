"""Each project's intake budget in CPU seconds: past it, ``429`` with ``Retry-After``.

The byte budget (:mod:`.ingest_budget`) bounds what a key sends, not what its bodies cost: an
OTLP export of ~1 MB with 60,000 attributes the mapping never reads costs the server far more
CPU than 1 MB of events, and at the default 2 MiB/s a flood of them took most of a 2-core
server (session 17: ``/healthz`` p99 2.5-8.5x idle, another tenant's reads 1.5-3x). Here each
export's intake work is **measured** and charged to the project that caused it: the worker
process's inflating and parsing (its thread's CPU time) and the intake thread's mapping, judging
and spool append (that thread's CPU time). A project may spend ``api_ingest_cpu_burst_s``
CPU seconds at once and ``api_ingest_cpu_share`` CPU seconds a second after that (a share of
one core); a project in debt has its next ingest requests refused before their bodies are read
(with the byte budget's hold and answer, :mod:`.ingest_budget`), and its debt is repaid at
the rate. One project's spending never touches another's bucket.

What is not measured and so not charged: receiving the body on the event loop, and storing the
accepted events later (the ingest thread's decode and chDB's inserts): both grow with what the
budget lets in, so bounding the measured part bounds them too.

Who pays: a key for one project pays for that project; a key for several pays for the project
its request names in ``X-RetryLens-Project`` (or, once parsed, in the spans), and a request whose
project is not known (refused before it was parsed) is charged to all of the key's projects in
equal parts. The local token is never charged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from .token_buckets import TokenBuckets

#: The header a key for several projects names the one its request is for (OTLP and the budgets).
PROJECT_HEADER = "x-retrylens-project"


@dataclass
class CostBudget:
    """Per-project token buckets of CPU seconds (``rate`` CPU seconds a second, ``burst`` at once).
    The CPU is measured on the threads that do the work, but charged and checked on the event
    loop only (the route charges once the work is back), so no lock is needed."""

    rate: float
    burst: float
    clock: Callable[[], float] = time.monotonic
    _buckets: TokenBuckets = field(init=False)

    def __post_init__(self) -> None:
        self._buckets = TokenBuckets(self.rate, self.burst, self.clock)

    def wait_s(self, projects: Collection[str]) -> float:
        """0 if every one of ``projects`` may send now, else the seconds until all their debts are repaid."""
        return max((self._buckets.wait_s(p) for p in projects), default=0.0)

    def charge(self, projects: Collection[str], cpu_s: float) -> None:
        """Charge ``cpu_s`` to ``projects`` in equal parts (a bucket may go into debt)."""
        if not projects or cpu_s <= 0:
            return
        share = cpu_s / len(projects)
        for project in projects:
            self._buckets.take(project, share)


def payers(projects: frozenset[str] | None, named: str | None) -> frozenset[str]:
    """The projects a request of a key for ``projects`` is charged to before its project is known:
    the one it names, if the key may write it, else all of the key's (none for the local token)."""
    if projects is None:
        return frozenset()
    if named is not None and named in projects:
        return frozenset({named})
    return projects
