"""A clock a test turns by hand, and a sleep that only turns it (tenacity's ``nap`` seam).

Token buckets, the CPU budget and the SDK's circuit breaker read an injected clock; with this
one a test says exactly how much time passes and never really sleeps, so its figures are exact
on a loaded machine too. One helper instead of the copies the budget and breaker tests had.
"""

from __future__ import annotations


class ManualClock:
    """Seconds that move only when the test (or :meth:`sleep`) moves them; every sleep is kept."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        """An ``asyncio.sleep`` that passes virtual time only, and records how long it was asked for."""
        self.slept.append(seconds)
        self.now += seconds
