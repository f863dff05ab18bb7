"""A virtual clock for tests and the simulated fleet: time moves only when told to."""

from __future__ import annotations


class VirtualClock:
    """A clock that only moves when told to: ``sleep`` becomes ``advance``."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += max(0.0, seconds)

    def set(self, t: float) -> None:
        self.t = max(self.t, t)

    async def aadvance(self, seconds: float) -> None:
        import asyncio

        self.advance(seconds)
        await asyncio.sleep(0)
