"""A retried call leaves no reference cycles: its task is freed as soon as it returns.

A caught exception's traceback holds the frames it passed through; a frame that keeps
the exception in a local closes a cycle, and then the whole task (run, state, attempts,
events' inputs) waits for the cyclic garbage collector instead of being freed at once —
on the retry path that was ~40 objects per call and a collection every ~10 calls.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest

from retrylens.sdk import Governor, RetryPolicy
from retrylens.sdk.core.policy import BackoffPolicy


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _flaky(fail_first: int) -> Callable[[], str]:
    state = {"n": 0}

    def work() -> str:
        state["n"] += 1
        if state["n"] <= fail_first:
            raise TimeoutError("upstream timed out")
        return "ok"

    return work


def _governor(events: list[object]) -> Governor:
    return Governor(
        RetryPolicy(backoff=BackoffPolicy(base_ms=0, cap_ms=0)),
        emit=events.append,
        sleep=lambda s: None,
        validate_events=False,
    )


def test_a_retried_call_leaves_nothing_for_the_cycle_collector(no_collector: None) -> None:
    events: list[object] = []
    governor = _governor(events)
    governor.call(_flaky(1), goal="warm up", agent="a")  # first-use caches, lazy imports
    gc.collect()
    for _ in range(5):
        assert governor.call(_flaky(1), goal="look up order 7", agent="a") == "ok"
    events.clear()
    assert gc.collect() == 0


def test_a_failing_side_effect_leaves_nothing_for_the_cycle_collector(no_collector: None) -> None:
    events: list[object] = []
    governor = _governor(events)
    insert = governor.side_effect("crm.insert", repeat_on_timeout=True)(_flaky(1))

    def work() -> str:
        return insert()

    governor.call(work, goal="warm up", agent="a")
    gc.collect()
    insert = governor.side_effect("crm.insert", repeat_on_timeout=True)(_flaky(1))
    assert governor.call(work, goal="record order 8", agent="a") == "ok"
    events.clear()
    assert gc.collect() == 0
