"""A circuit breaker per dependency: closed → open on a failure ratio → half-open probes.

Counting is over the last ``window`` calls (at least ``min_calls`` before it may open);
time comes from the injected clock, so tests and the simulated fleet are exact.

A blip the task's retry recovers from is one success, not a failure and a success: the
recovery (``record(True, recovers=True)``) takes back one failure still in the window. So
a long task whose every step fails once and then succeeds leaves its dependency closed
(counted plainly, failing every other call opens it after five steps), while a dependency
that stays failing, or fails most tries before one gets through, still opens it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .policy import BreakerPolicy


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(self, policy: BreakerPolicy, clock: Callable[[], float]) -> None:
        self.policy = policy
        self._clock = clock
        self._outcomes: deque[bool] = deque(maxlen=policy.window)
        self._state = BreakerState.CLOSED
        self._opened_at = 0.0
        self._probes = 0
        self._lock = threading.Lock()

    @property
    def state(self) -> BreakerState:
        with self._lock:
            return self._current()

    def _current(self) -> BreakerState:
        if (
            self._state is BreakerState.OPEN
            and self._clock() - self._opened_at >= self.policy.open_s
        ):
            self._state, self._probes, self._opened_at = BreakerState.HALF_OPEN, 0, self._clock()
        elif (
            self._state is BreakerState.HALF_OPEN
            and self._clock() - self._opened_at >= self.policy.open_s
        ):
            self._probes, self._opened_at = (
                0,
                self._clock(),
            )  # a probe never reported back: allow another
        return self._state

    def allow(self) -> bool:
        """May a call go to the dependency now? Half-open lets ``half_open_probes`` through."""
        if not self.policy.enabled:
            return True
        with self._lock:
            state = self._current()
            if state is BreakerState.CLOSED:
                return True
            if state is BreakerState.HALF_OPEN and self._probes < self.policy.half_open_probes:
                self._probes += 1
                return True
            return False

    def is_open(self) -> bool:
        """Open right now (read-only: does not take a probe)."""
        return self.policy.enabled and self.state is BreakerState.OPEN

    def record(self, success: bool, *, recovers: bool = False) -> None:
        """Count one call's outcome; ``recovers``: a success that retried a failure of this
        dependency, whose failure it takes back (the latest one still in the window)."""
        with self._lock:
            state = self._current()
            if state is BreakerState.HALF_OPEN:
                if success:
                    self._state = BreakerState.CLOSED
                    self._outcomes.clear()
                else:
                    self._trip()
                return
            if success and recovers:
                self._take_back_a_failure()
            self._outcomes.append(success)
            failures = self._outcomes.count(False)
            if (
                len(self._outcomes) >= self.policy.min_calls
                and failures / len(self._outcomes) >= self.policy.failure_ratio
            ):
                self._trip()

    def _take_back_a_failure(self) -> None:
        for i in range(len(self._outcomes) - 1, -1, -1):
            if not self._outcomes[i]:
                del self._outcomes[i]
                return

    def outcomes(self) -> list[bool]:
        """The outcomes in the window, oldest first (a copy)."""
        with self._lock:
            return list(self._outcomes)

    def _trip(self) -> None:
        self._state, self._opened_at, self._probes = BreakerState.OPEN, self._clock(), 0
        self._outcomes.clear()

    def __repr__(self) -> str:
        return f"CircuitBreaker({self.state.value}, last={list(self._outcomes)[-5:]})"
