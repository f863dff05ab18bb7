"""The side-effect protocol after a failure that may have happened after the request
(issue 35 item 1): fast, in-process, for the mutation targets of ``effects`` and ``loop``.

Each tool books into a ledger (the planted truth: what really happened) and then fails the
way a real client does after the other side acted — a reset, a deadline's cancellation —
or before it acted — a refused connection. The wire-level proof, with real clients and a
server, is ``test_effect_failure_shapes.py``.
"""

from __future__ import annotations

import asyncio
import random
import warnings
from datetime import UTC, datetime
from typing import Any

import pytest

from retrylens.errors import TaskStopped
from retrylens.schemas import EventKind, TaskOutcome
from retrylens.sdk import Governor
from retrylens.testing import CapturedEvents, capture_events

START = datetime(2026, 12, 1, tzinfo=UTC)


def governor(captured: CapturedEvents) -> Governor:
    return Governor.with_virtual_time(start=START, emit=captured.emit, rng=random.Random(5))


def statuses(captured: CapturedEvents) -> list[str]:
    return [s.status.value for e in captured.of_kind(EventKind.SIDE_EFFECT) for s in e.side_effects]


def quietly(decorator: Any, fn: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the no-contract warning
        return decorator(fn)


def test_a_reset_after_the_booking_stops_the_task_instead_of_booking_twice() -> None:
    ledger: list[str] = []

    def book(entry: str) -> str:
        ledger.append(entry)
        raise ConnectionResetError(104, "Connection reset by peer")

    with capture_events() as captured:
        g = governor(captured)
        booked = quietly(g.side_effect("ledger.book"), book)
        with pytest.raises(TaskStopped) as stopped:
            g.call(lambda: booked("rent"), goal="book the rent")
        assert ledger == ["rent"]
        assert stopped.value.verdict.reason.startswith(
            "ambiguous outcome of side effect ledger.book: it may have happened and "
            "ledger.book declares no way to tell"
        )
        assert statuses(captured) == ["failed"]


def test_an_unsafe_effect_after_a_broken_pipe_is_handed_to_a_person_not_repeated() -> None:
    ledger: list[str] = []

    def book(entry: str) -> str:
        ledger.append(entry)
        raise BrokenPipeError(32, "Broken pipe")

    with capture_events() as captured:
        g = governor(captured)
        booked = g.side_effect("ledger.book", unsafe=True)(book)
        with pytest.raises(TaskStopped) as stopped:
            g.call(lambda: booked("rent"), goal="book the rent")
        assert ledger == ["rent"]
        assert "declared unsafe to repeat" in stopped.value.verdict.reason


def test_a_refused_connection_before_the_booking_is_retried_and_books_once() -> None:
    ledger: list[str] = []
    tries: list[int] = []

    def book(entry: str) -> str:
        tries.append(1)
        if len(tries) == 1:
            raise ConnectionRefusedError(111, "Connection refused")
        ledger.append(entry)
        return "booked"

    with capture_events() as captured:
        g = governor(captured)
        booked = quietly(g.side_effect("ledger.book", unsafe=True), book)
        assert g.call(lambda: booked("rent"), goal="book the rent") == "booked"
        assert ledger == ["rent"]
        assert statuses(captured) == ["failed", "committed"]


def test_a_reset_is_repeated_when_the_contract_says_it_is_harmless_or_keyed() -> None:
    harmless: list[str] = []
    keys: list[str] = []

    def touch(entry: str) -> str:
        harmless.append(entry)
        if len(harmless) == 1:
            raise ConnectionResetError(104, "reset")
        return "ok"

    def keyed(entry: str, idempotency_key: str = "") -> str:
        keys.append(idempotency_key)
        if len(keys) == 1:
            raise ConnectionResetError(104, "reset")
        return "ok"

    with capture_events() as captured:
        g = governor(captured)
        touched = g.side_effect("cache.touch", repeat_on_timeout=True)(touch)
        sent = g.side_effect("payments.charge")(keyed)
        assert g.call(lambda: touched("a"), goal="touch") == "ok"
        assert g.call(lambda: sent("a"), goal="charge") == "ok"
    assert harmless == ["a", "a"]
    assert len(keys) == 2 and keys[0] == keys[1] != ""


def test_a_deadline_in_the_agent_after_the_booking_stops_the_task() -> None:
    ledger: list[str] = []

    async def book(entry: str) -> str:
        ledger.append(entry)
        await asyncio.sleep(5)  # the answer never comes in time
        return "booked"

    with capture_events() as captured:
        g = governor(captured)
        booked = quietly(g.side_effect("ledger.book"), book)

        async def agent() -> str:
            return await asyncio.wait_for(booked("rent"), 0.01)

        with pytest.raises(TaskStopped) as stopped:
            asyncio.run(g.acall(agent, goal="book the rent"))
        assert ledger == ["rent"]
        assert stopped.value.verdict.reason.startswith("ambiguous outcome of side effect")
        assert statuses(captured) == ["failed"]


def test_a_deadline_cut_effect_with_verify_is_asked_on_the_next_try_not_repeated() -> None:
    ledger: list[str] = []
    asked: list[str] = []

    async def book(entry: str) -> str:
        ledger.append(entry)
        await asyncio.sleep(5)
        return "booked"

    def landed(entry: str) -> bool:
        asked.append(entry)
        return entry in ledger

    with capture_events() as captured:
        g = governor(captured)
        booked = g.side_effect("ledger.book", verify=landed)(book)

        async def agent() -> Any:
            return await asyncio.wait_for(booked("rent"), 0.01)

        assert asyncio.run(g.acall(agent, goal="book the rent")) is None  # verify said: done
        assert ledger == ["rent"]
        assert asked == ["rent"]
        assert statuses(captured) == ["failed", "committed"]


def test_a_cancellation_from_outside_goes_on_and_nothing_is_repeated() -> None:
    ledger: list[str] = []

    async def book(entry: str) -> str:
        ledger.append(entry)
        await asyncio.sleep(5)
        return "booked"

    async def main(g: Governor) -> None:
        booked = quietly(g.side_effect("ledger.book"), book)
        task = asyncio.ensure_future(g.acall(lambda: booked("rent"), goal="book the rent"))
        while not ledger:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with capture_events() as captured:
        g = governor(captured)
        asyncio.run(main(g))
        assert ledger == ["rent"]
        assert statuses(captured) == ["failed"]
        assert list(captured.outcomes().values()) == [TaskOutcome.CANCELLED]


# -- an outcome nobody recorded: the key store says "intended" ---------------------------
def _intended(store: Any, task_id: str, tool: str, *args: Any) -> None:
    """Plant what a process that died inside the tool leaves: the intent, no outcome."""
    from retrylens.schemas import SideEffectStatus
    from retrylens.sdk.core.side_effects import KeyRecord, idempotency_key

    key = idempotency_key(task_id, tool, {"args": args, "kwargs": {}})
    store.put(KeyRecord(key, task_id, tool, SideEffectStatus.INTENDED))


@pytest.mark.parametrize("unsafe", [False, True], ids=["no_contract", "unsafe"])
def test_an_effect_whose_earlier_try_has_no_recorded_outcome_is_not_run_again(
    unsafe: bool,
) -> None:
    from retrylens.sdk import MemoryKeyStore

    ledger: list[str] = []
    store = MemoryKeyStore()
    _intended(store, "task-resumed", "ledger.book", "rent")
    with capture_events() as captured:
        g = Governor.with_virtual_time(start=START, emit=captured.emit, key_store=store)
        booked = quietly(g.side_effect("ledger.book", unsafe=unsafe), ledger.append)
        with pytest.raises(TaskStopped) as stopped:
            g.call(lambda: booked("rent"), goal="book the rent", task_id="task-resumed")
    assert ledger == []  # it may have happened before: not run blindly
    assert stopped.value.verdict.reason.startswith(
        "ambiguous outcome of side effect ledger.book: an earlier try began"
    )


def test_an_ambiguous_failure_stays_unknown_in_the_key_store_for_a_rerun() -> None:
    """A task re-run under the same id after the hand-off does not repeat the effect."""
    from retrylens.sdk import MemoryKeyStore

    ledger: list[str] = []

    def book(entry: str) -> str:
        ledger.append(entry)
        raise ConnectionResetError(104, "reset")

    store = MemoryKeyStore()
    for _ in range(2):
        g = Governor.with_virtual_time(start=START, key_store=store)
        booked = quietly(g.side_effect("ledger.book"), book)
        with pytest.raises(TaskStopped):
            g.call(lambda: booked("rent"), goal="book the rent", task_id="task-again")  # noqa: B023
    assert ledger == ["rent"]
    (record,) = store._records.values()
    assert record.status.value == "intended"
