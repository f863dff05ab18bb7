"""The circuit breaker alone, on a hand-turned clock: what opens it and what does not.

A blip that a retry recovers from is one success (``record(True, recovers=True)`` takes
back the blip's failure); only a dependency that stays failing opens the breaker.
"""

from __future__ import annotations

from manual_clock import ManualClock

from retrylens.sdk.core.breaker import BreakerState, CircuitBreaker
from retrylens.sdk.core.policy import BreakerPolicy

DEFAULTS = BreakerPolicy()  # window 20, min_calls 10, failure_ratio 0.5, open_s 30



def test_a_dead_dependency_opens_after_min_calls_failures() -> None:
    breaker = CircuitBreaker(DEFAULTS, ManualClock(0.0))
    for _ in range(DEFAULTS.min_calls - 1):
        breaker.record(False)
    assert breaker.state is BreakerState.CLOSED
    breaker.record(False)
    assert breaker.state is BreakerState.OPEN and not breaker.allow()


def test_failing_every_other_call_opens_when_nothing_recovers() -> None:
    breaker = CircuitBreaker(DEFAULTS, ManualClock(0.0))
    for _ in range(5):
        breaker.record(False)
        breaker.record(True)
    assert breaker.state is BreakerState.OPEN


def test_a_blip_and_its_recovery_are_one_success() -> None:
    breaker = CircuitBreaker(DEFAULTS, ManualClock(0.0))
    for _ in range(50):
        breaker.record(False)
        breaker.record(True, recovers=True)
    assert breaker.state is BreakerState.CLOSED
    assert breaker.outcomes() == [True] * DEFAULTS.window


def test_a_recovery_takes_back_one_failure_only() -> None:
    """Two failures then a recovery: one failure stays (a dependency failing most tries
    still opens, even if every task gets through in the end)."""
    breaker = CircuitBreaker(DEFAULTS, ManualClock(0.0))
    for _ in range(5):
        breaker.record(False)
        breaker.record(False)
        breaker.record(True, recovers=True)
    assert breaker.state is BreakerState.OPEN


def test_a_recovery_with_no_failure_left_in_the_window_is_a_plain_success() -> None:
    breaker = CircuitBreaker(DEFAULTS, ManualClock(0.0))
    breaker.record(True, recovers=True)
    assert breaker.outcomes() == [True]


def test_a_recovering_probe_closes_a_half_open_breaker() -> None:
    clock = ManualClock(0.0)
    breaker = CircuitBreaker(DEFAULTS, clock)
    for _ in range(DEFAULTS.min_calls):
        breaker.record(False)
    clock.now += DEFAULTS.open_s
    assert breaker.allow() and breaker.state is BreakerState.HALF_OPEN
    breaker.record(True, recovers=True)
    assert breaker.state is BreakerState.CLOSED


def test_a_disabled_breaker_always_allows() -> None:
    breaker = CircuitBreaker(BreakerPolicy(enabled=False), ManualClock(0.0))
    for _ in range(30):
        breaker.record(False)
    assert breaker.allow()
