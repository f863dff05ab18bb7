"""Stops a consumer that sees a burst of invalid messages.

Without it, a producer bug turns into a drained topic: every message lands in the
dead-letter queue, offsets advance, and the valid-looking silence hides the outage.
Tripping stops the consumer before committing, so nothing is lost and the operator fixes
the producer (or the consumer) and restarts. In the strategy chain it is a policy of the
flush step (:class:`BurstPolicy`): a batch is judged before its dead letters are sent.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from itertools import islice, repeat
from typing import TYPE_CHECKING

from retrylens.errors import InvalidBurstError

from . import metrics

if TYPE_CHECKING:
    from .batch import Batch


@dataclass
class InvalidBurstBreaker:
    max_consecutive: int
    max_ratio: float
    window: int
    _recent: deque[bool] = field(init=False)
    _invalid_in_window: int = field(default=0, init=False)
    consecutive: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._recent = deque(maxlen=self.window)

    def record_valid(self, count: int) -> None:
        """Record ``count`` valid verdicts in a row (a clean chunk); valid ones never trip."""
        if count <= 0:
            return
        evicted = max(0, len(self._recent) + count - self.window)
        self._invalid_in_window -= sum(1 for verdict in islice(self._recent, evicted) if not verdict)
        self._recent.extend(repeat(True, min(count, self.window)))
        self.consecutive = 0

    def record(self, valid: bool) -> str | None:
        """Record one verdict; returns why the breaker trips, or None."""
        if len(self._recent) == self.window and not self._recent[0]:
            self._invalid_in_window -= 1
        self._recent.append(valid)
        if valid:
            self.consecutive = 0
            return None
        self._invalid_in_window += 1
        self.consecutive += 1
        if self.consecutive >= self.max_consecutive:
            return f"{self.consecutive} consecutive invalid messages (limit {self.max_consecutive})"
        if len(self._recent) == self.window and self._invalid_in_window / self.window > self.max_ratio:
            return (
                f"{self._invalid_in_window} of the last {self.window} messages invalid "
                f"(limit {self.max_ratio:.0%})"
            )
        return None


class BurstPolicy:
    """The dead-letter step's policy: judge a batch's verdicts, in the order they were
    read, before any of its letters is sent; raise :class:`InvalidBurstError` on a burst.

    Messages the tenant binding refused (well-formed events of a project not bound to
    their topic) are dead-lettered with their reason but are not counted either way: one
    tenant's misrouted producer must not stop ingest for every tenant, and its refusals
    between broken messages must not hide a corrupt stream."""

    def __init__(self, breaker: InvalidBurstBreaker) -> None:
        self.breaker = breaker

    def check(self, batch: Batch) -> None:
        for topic, partition, offsets, invalid, refused in batch.verdicts:
            if not invalid:
                self.breaker.record_valid(len(offsets))
                continue
            bad = set(invalid)
            for index, offset in enumerate(offsets):
                if index in refused:
                    continue
                trip = self.breaker.record(index not in bad)
                if trip is not None:
                    metrics.BREAKER_TRIPS.inc()
                    raise InvalidBurstError(trip, topic=topic, partition=partition, offset=offset)
