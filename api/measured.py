"""A call's outcome with the CPU time its thread spent on it, so that the project that asked for
the work can be charged for it (:mod:`.cost_budget`), whether the call returned or raised.

Picklable (a module-level function and a dataclass), so it runs as well in the worker process
(:mod:`.offload`) as on the intake thread (:mod:`.intake_thread`); both run one call at a time on
one thread, so the thread's CPU time is that call's alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Measured(Generic[T]):
    """What ``function(*args)`` returned (or raised) and the CPU seconds of its thread meanwhile."""

    cpu_s: float
    value: T | None = None
    error: Exception | None = None

    def result(self) -> T:
        """The value, or the call's exception raised again."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]  # None only when the function returned None


def measured(function: Callable[..., T], *args: Any) -> Measured[T]:
    """``function(*args)`` timed by its thread's CPU clock; an exception is kept, not raised."""
    start = time.thread_time()
    try:
        value = function(*args)
    except Exception as exc:
        return Measured(time.thread_time() - start, error=exc)
    return Measured(time.thread_time() - start, value=value)
