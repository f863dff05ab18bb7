"""A sync verify or rollback that hangs, bounded when the governor is asked to.

``Governor(bound_sync_hooks=True)`` runs a sync verify/rollback in a worker thread and waits
at most ``hook_timeout_s`` for it, as it does for an async one, so a hanging ledger API
never holds the task's outcome. Off by default: a sync hook then runs inline in the
caller's thread, where thread-bound resources (a SQLite connection) work.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator

import pytest

from retrylens.errors import GaveUp
from retrylens.schemas import EventKind, TaskOutcome
from retrylens.sdk import Governor
from retrylens.testing import CapturedEvents, capture_events

HANG_S = 5.0


@pytest.fixture
def released() -> Iterator[threading.Event]:
    gate = threading.Event()
    yield gate
    gate.set()  # lets the abandoned hook's thread end


def _outcome(captured: CapturedEvents) -> TaskOutcome | None:
    (finished,) = captured.of_kind(EventKind.TASK_FINISHED)
    return finished.outcome


def test_a_sync_verify_that_hangs_is_bounded_and_the_outcome_recorded(
    released: threading.Event,
) -> None:
    def hangs(order: str) -> bool:
        released.wait(HANG_S)
        return True

    def charge(order: str) -> None:
        raise TimeoutError("timed out")

    with capture_events() as captured:
        g = Governor(
            rng=random.Random(1), emit=captured.emit, hook_timeout_s=0.05, bound_sync_hooks=True
        )
        pay = g.side_effect("payments", verify=hangs)(charge)
        started = time.monotonic()
        with pytest.raises(GaveUp) as stopped:
            g.call(lambda: pay("A-1"), goal="charge")
        elapsed = time.monotonic() - started
        outcome = _outcome(captured)
    assert elapsed < HANG_S / 2
    assert "verify failed (TimeoutError: verify did not answer within 0.05 s)" in (
        stopped.value.verdict.reason
    )
    assert outcome is TaskOutcome.FAILED


def test_a_sync_verify_that_hangs_in_an_async_call_is_bounded_too(
    released: threading.Event,
) -> None:
    def hangs(order: str) -> bool:
        released.wait(HANG_S)
        return True

    async def charge(order: str) -> None:
        raise TimeoutError("timed out")

    with capture_events() as captured:
        g = Governor(
            rng=random.Random(1), emit=captured.emit, hook_timeout_s=0.05, bound_sync_hooks=True
        )
        pay = g.side_effect("payments", verify=hangs)(charge)
        started = time.monotonic()
        with pytest.raises(GaveUp) as stopped:
            asyncio.run(g.acall(lambda: pay("A-1"), goal="charge"))
        elapsed = time.monotonic() - started
        outcome = _outcome(captured)
    assert elapsed < HANG_S / 2
    assert "verify did not answer within 0.05 s" in stopped.value.verdict.reason
    assert outcome is TaskOutcome.FAILED


def test_a_bounded_sync_verify_that_answers_still_decides() -> None:
    seen: list[str] = []

    def happened(order: str) -> bool:
        seen.append(threading.current_thread().name)
        return True  # the charge went through: no repeat, the task succeeds

    calls = 0

    def charge(order: str) -> str:
        nonlocal calls
        calls += 1
        raise TimeoutError("timed out")

    with capture_events() as captured:
        g = Governor(rng=random.Random(1), emit=captured.emit, bound_sync_hooks=True)
        pay = g.side_effect("payments", verify=happened)(charge)
        g.call(lambda: pay("A-1"), goal="charge")
        outcome = _outcome(captured)
    assert calls == 1 and seen and seen[0] != threading.main_thread().name
    assert outcome is TaskOutcome.SUCCEEDED


def test_bound_sync_hooks_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="bound_sync_hooks"):
        Governor(bound_sync_hooks="yes")  # type: ignore[arg-type]
