"""The decision loop's guarantees, read on emitted events, through both drivers.

Issue 25 item 2: the survivors of mutating ``sdk/core/loop.py`` (the sans-I/O attempt loop)
and ``sdk/core/stopping.py``/``sdk/core/steps.py``. Each test runs the same task through
``governor.call`` (the plain driver) and ``governor.acall`` (the asyncio driver), on a
virtual clock, so the waits are read exactly off the events' timestamps.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Generator
from datetime import UTC, datetime
from typing import Any

import pytest

from retrylens.errors import ChainCancelled, HandedOff, TaskStopped
from retrylens.schemas import Decision, ErrorType, EventKind, RetryEvent
from retrylens.sdk import CallbackChannel, Governor
from retrylens.sdk.core.policy import parse_policy
from retrylens.sdk.core.side_effects import MemoryKeyStore
from retrylens.sdk.text.sanitizer import Failure
from retrylens.sdk.transport.handoff import HandoffPackage
from retrylens.testing import capture_events

START = datetime(2026, 12, 2, tzinfo=UTC)
Steps = Generator[tuple[str, Any, dict[str, Any]], Any, Any]
DRIVERS = pytest.mark.parametrize("is_async", [False, True], ids=["call", "acall"])


#: Waits of whole seconds without jitter: a wait off by a thousandth shows in the events'
#: millisecond timestamps.
SLOW = parse_policy({"backoff": {"base_ms": 4000, "cap_ms": 60000, "jitter": 0.0}})


def governor(**kwargs: Any) -> Governor:
    kwargs.setdefault("rng", random.Random(7))
    return Governor.with_virtual_time(start=START, **kwargs)


class Flaky:
    """A tool failing with ``errors`` in turn, then answering ``result``."""

    def __init__(self, *errors: BaseException, result: Any = "ok") -> None:
        self.errors, self.result, self.calls = list(errors), result, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.result


def run(g: Governor, is_async: bool, task: Callable[[], Steps], **kwargs: Any) -> Any:
    """``task`` governed by ``call``, or (``is_async``) by ``acall``.

    ``task()`` is a generator: it yields each step as ``(name, tool, options)`` and gets the
    step's result back, so that one body serves both drivers: ``governor.step`` under
    ``call``, ``await governor.astep`` of an ``async def`` wrapper under ``acall``.
    """
    if not is_async:

        def body() -> Any:
            steps, value = task(), None
            try:
                while True:
                    name, tool, options = steps.send(value)
                    value = g.step(name, tool, **options)
            except StopIteration as done:
                return done.value

        return g.call(body, **kwargs)

    async def abody() -> Any:
        steps, value = task(), None
        try:
            while True:
                name, tool, options = steps.send(value)

                async def atool(_tool: Any = tool) -> Any:
                    return _tool()

                value = await g.astep(name, atool, **options)
        except StopIteration as done:
            return done.value

    return asyncio.run(g.acall(abody, **kwargs))


def gaps_ms(events: list[RetryEvent]) -> list[tuple[int | None, float]]:
    """For each decision: its backoff and the time until the next attempt started (ms)."""
    out = []
    for i, e in enumerate(events):
        if e.kind is not EventKind.DECISION:
            continue
        nxt = next((n for n in events[i + 1 :] if n.kind is EventKind.ATTEMPT_STARTED), None)
        if nxt is not None:
            out.append((e.backoff_ms, (nxt.ts - e.ts).total_seconds() * 1000))
    return out


# -- sdk/core/loop.py: task ---------------------------------------------------------------------
@DRIVERS
def test_a_task_succeeds_on_the_attempt_its_retried_step_began(is_async: bool) -> None:
    """Pass 1 fails as a whole, pass 2's step fails and is retried in place as attempt 3:
    the success is recorded on attempt 3 (its number, and its correlation id, which joins
    an attempt's events), the one that succeeded."""
    passes = 0
    lookup = Flaky(ConnectionError("reset"), result="found")

    def task() -> Steps:
        nonlocal passes
        passes += 1
        if passes == 1:
            raise TimeoutError("the model timed out")
        return (yield "lookup", lookup, {})

    with capture_events() as captured:
        g = governor(emit=captured.emit)
        assert run(g, is_async, task, goal="find the order") == "found"
        events = captured.events
    started = {e.attempt: e.correlation_id for e in events if e.kind is EventKind.ATTEMPT_STARTED}
    (succeeded,) = [e for e in events if e.kind is EventKind.ATTEMPT_SUCCEEDED]
    assert sorted(started) == [1, 2, 3] and len(set(started.values())) == 3
    assert (succeeded.attempt, succeeded.correlation_id) == (3, started[3])
    assert (passes, lookup.calls) == (2, 2)


@DRIVERS
def test_a_tasks_own_failure_after_a_retried_step_is_recorded_on_the_attempt_it_ended(
    is_async: bool,
) -> None:
    """Pass 2 (attempt 2): the step fails and succeeds as attempt 3, then the task's own
    code fails: that failure ends attempt 3; pass 3 (attempt 4) skips the done step."""
    passes = 0
    lookup = Flaky(ConnectionError("reset"), result="found")

    def task() -> Steps:
        nonlocal passes
        passes += 1
        if passes == 1:
            raise TimeoutError("the model timed out")
        found = yield "lookup", lookup, {}
        if passes == 2:
            raise ValueError("the answer failed validation")
        return found

    with capture_events() as captured:
        g = governor(emit=captured.emit)
        assert run(g, is_async, task, goal="find the order") == "found"
        events = captured.events
    started = {e.attempt: e.correlation_id for e in events if e.kind is EventKind.ATTEMPT_STARTED}
    failed = [(e.attempt, e.correlation_id) for e in events if e.kind is EventKind.ATTEMPT_FAILED]
    assert len(set(started.values())) == 4
    assert failed == [(n, started[n]) for n in (1, 2, 3)]
    (succeeded,) = [e for e in events if e.kind is EventKind.ATTEMPT_SUCCEEDED]
    assert (succeeded.attempt, succeeded.correlation_id) == (4, started[4])
    assert (passes, lookup.calls) == (3, 2)


@DRIVERS
def test_the_task_waits_exactly_each_backoff_and_nothing_without_one(is_async: bool) -> None:
    """Two timeouts (a backoff each) and a validation failure (no wait) of the whole task:
    the next attempt starts exactly ``backoff_ms`` after each decision."""
    failures = [TimeoutError("slow"), TimeoutError("slow again"), ValueError("bad answer")]

    def task() -> Steps:
        if failures:
            raise failures.pop(0)
        yield from ()
        return "done"

    with capture_events() as captured:
        g = governor(emit=captured.emit, policy=SLOW)
        assert run(g, is_async, task, goal="answer") == "done"
        events = captured.events
    # the first failure is decided after the driver's fast first try, the others in the loop
    assert gaps_ms(events) == [(4000, 4000.0), (8000, 8000.0), (0, 0.0)]


# -- sdk/core/loop.py: step ---------------------------------------------------------------------
@DRIVERS
def test_a_retried_step_waits_exactly_its_backoff(is_async: bool) -> None:
    search = Flaky(TimeoutError("slow"), TimeoutError("slow"), result="hits")
    with capture_events() as captured:
        g = governor(emit=captured.emit, policy=SLOW)
        assert run(g, is_async, lambda: (yield "search", search, {}), goal="search") == "hits"
        events = captured.events
    assert gaps_ms(events) == [(4000, 4000.0), (8000, 8000.0)]


@DRIVERS
def test_a_steps_failure_is_recorded_in_its_phase_and_the_tasks_own_in_the_tasks(
    is_async: bool,
) -> None:
    """A step named with ``phase``/``dependency`` fails and is retried there (attempt 2);
    the task's own code then times out in that same attempt: that failure is the task's
    (``planning``, ``llm``), not the step's, so the index's breaker never counts it, and the
    re-run pass (attempt 3) starts where the task is."""
    search = Flaky(TimeoutError("the index timed out"), result="hits")
    passes = 0

    def task() -> Steps:
        nonlocal passes
        passes += 1
        found = yield "search", search, {"phase": "retrieval", "dependency": "index"}
        if passes == 1:
            raise TimeoutError("the model timed out")
        return found

    with capture_events() as captured:
        g = governor(emit=captured.emit)
        assert run(g, is_async, task, goal="answer", phase="planning", dependency="llm") == "hits"
        events = captured.events
    failed = [(e.phase, e.dependency) for e in events if e.kind is EventKind.ATTEMPT_FAILED]
    started = [(e.phase, e.dependency) for e in events if e.kind is EventKind.ATTEMPT_STARTED]
    assert failed == [("retrieval", "index"), ("planning", "llm")]
    assert started == [("planning", "llm"), ("retrieval", "index"), ("planning", "llm")]
    assert [e.dependency for e in events if e.kind is EventKind.DECISION] == ["index", "llm"]
    (succeeded,) = [e for e in events if e.kind is EventKind.ATTEMPT_SUCCEEDED]
    assert (succeeded.attempt, succeeded.phase, succeeded.dependency) == (3, "planning", "llm")


@DRIVERS
def test_a_step_that_stops_the_task_hands_off_from_its_own_phase(is_async: bool) -> None:
    pay = Flaky(RuntimeError("the PSP answered something unknown"))
    with capture_events() as captured:
        g = governor(emit=captured.emit, handoff=CallbackChannel(lambda package: None))
        with pytest.raises(HandedOff):
            run(
                g,
                is_async,
                lambda: (yield "pay", pay, {"phase": "payment", "dependency": "psp"}),
                goal="pay",
                phase="planning",
            )
        events = captured.events
    (handoff,) = [e for e in events if e.kind is EventKind.HANDOFF]
    assert (handoff.phase, handoff.dependency) == ("payment", "psp")
    assert [e.decision for e in events if e.kind is EventKind.DECISION] == [Decision.HANDOFF_HUMAN]


# -- sdk/core/stopping.py: the hand-off package -------------------------------------------------
@DRIVERS
def test_the_handoff_package_carries_the_failed_output_and_the_tasks_story(
    is_async: bool,
) -> None:
    packages: list[HandoffPackage] = []
    lookup = Flaky(result={"order": "A-17"})

    def task() -> Steps:
        yield "lookup", lookup, {}
        raise Failure(
            ErrorType.UNKNOWN, "the ledger said something odd", code="E9", status=502,
            output="half an answer",
        )  # fmt: skip

    g = governor(handoff=CallbackChannel(packages.append))
    with pytest.raises(HandedOff):
        run(g, is_async, task, goal="reconcile A-17")
    (package,) = packages
    assert package.failed_output == "half an answer"
    assert package.outputs == {"lookup": {"order": "A-17"}}
    assert package.reason.startswith("unclassified failure (E9)")
    assert (package.attempts, package.inputs) == (1, "reconcile A-17")
    (error,) = package.errors
    assert (error["attempt"], error["phase"], error["error_type"]) == (1, "execution", "unknown")
    assert error["message"] == "the ledger said something odd"
    assert (package.error["code"], package.error["status"]) == ("E9", 502)
    assert package.context, "the last attempt's messages, for the person to read"


@DRIVERS
def test_a_handoff_package_without_an_output_says_none(is_async: bool) -> None:
    packages: list[HandoffPackage] = []

    def task() -> Steps:
        yield from ()
        raise Failure(ErrorType.UNKNOWN, "no answer at all")

    g = governor(handoff=CallbackChannel(packages.append))
    with pytest.raises(HandedOff):
        run(g, is_async, task, goal="reconcile")
    assert packages[0].failed_output == ""


# -- sdk/core/steps.py --------------------------------------------------------------------------
@DRIVERS
def test_a_tasks_own_usage_counts_after_a_step_that_reported_none(is_async: bool) -> None:
    """A step answering without usage leaves the attempt's usage unknown, so the usage of
    the task's own answer is read and recorded."""

    def task() -> Steps:
        hits = yield "search", lambda: {"hits": ["A-17"]}, {}
        return {
            "text": f"found {hits['hits'][0]}",
            "usage": {"prompt_tokens": 40, "completion_tokens": 2},
        }

    with capture_events() as captured:
        g = governor(emit=captured.emit)
        run(g, is_async, task, goal="find A-17")
        (event,) = [e for e in captured.events if e.kind is EventKind.ATTEMPT_SUCCEEDED]
    assert (event.tokens_in, event.tokens_out) == (40, 2)


@DRIVERS
def test_a_read_only_tools_calls_are_named_by_their_arguments_and_numbered_from_the_second(
    is_async: bool,
) -> None:
    """The steps of ``@governor.tool`` calls, as the hand-off package shows them: the same
    call three times in one pass is three steps, the first under the call's own name."""
    packages: list[HandoffPackage] = []
    g = governor(handoff=CallbackChannel(packages.append))
    looked: list[str] = []

    @g.tool("orders.lookup")
    def lookup(order: str) -> str:
        looked.append(order)
        return f"{order}: shipped"

    @g.tool("orders.alookup")
    async def alookup(order: str) -> str:
        looked.append(order)
        return f"{order}: shipped"

    def task() -> None:
        for _ in range(3):
            lookup("A-17")
        raise Failure(ErrorType.UNKNOWN, "odd")

    async def atask() -> None:
        for _ in range(3):
            await alookup("A-17")
        raise Failure(ErrorType.UNKNOWN, "odd")

    with pytest.raises(HandedOff):
        if is_async:
            asyncio.run(g.acall(atask, goal="track A-17"))
        else:
            g.call(task, goal="track A-17")
    first, second, third = packages[0].outputs
    assert "#" not in first and (second, third) == (f"{first}#2", f"{first}#3")
    assert looked == ["A-17"] * 3


# -- sdk/core/drivers.py ------------------------------------------------------------------------
@DRIVERS
def test_a_clean_task_opened_without_the_fast_path_is_still_one_compact_event(
    is_async: bool,
) -> None:
    """A function taking ``attempt`` skips the fast first try; a clean success is still
    recorded as one compact event, under both drivers."""
    with capture_events() as captured:
        g = governor(emit=captured.emit)

        def work(attempt: Any) -> str:
            return f"done on attempt {attempt.number}"

        async def awork(attempt: Any) -> str:
            return f"done on attempt {attempt.number}"

        if is_async:
            assert asyncio.run(g.acall(awork, goal="g")) == "done on attempt 1"
        else:
            assert g.call(work, goal="g") == "done on attempt 1"
        events = captured.events
    assert [e.kind for e in events] == [EventKind.ATTEMPT_SUCCEEDED]


def test_acall_after_a_failed_first_try_is_cancelled_by_its_task_id() -> None:
    """``cancel_chain`` reaches an awaiting task whose first try failed (its task id was
    made when the failure was recorded): the await is cancelled, not waited out."""
    task_ids: list[str] = []
    g = Governor(
        parse_policy({"backoff": {"base_ms": 1, "jitter": 0.0}}),
        rng=random.Random(3),
        emit=lambda event: task_ids.append(event.task_id) or True,
    )
    calls = 0

    async def work() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TimeoutError("the model timed out")
        await asyncio.sleep(10)
        return "never"

    async def main() -> None:
        running = asyncio.create_task(g.acall(work, goal="a long answer"))
        while calls < 2:
            await asyncio.sleep(0.01)
        g.cancel_chain(task_ids[0])
        done, _ = await asyncio.wait({running}, timeout=2)  # not cancelled by the wait itself
        assert done == {running}, "the cancel did not reach the awaiting task"
        with pytest.raises(ChainCancelled):
            running.result()

    asyncio.run(main())


def test_acall_runs_a_pre_flight_check_off_the_event_loop() -> None:
    """A pre-flight check is an HTTP call: the event loop keeps serving other tasks meanwhile."""
    ticked = threading.Event()

    class Review:
        def adapt(self, run: Any) -> None:
            assert ticked.wait(2), "the event loop was blocked by the pre-flight check"

    g = governor(preflight=Review())

    async def work() -> str:
        return "ok"

    async def main() -> str:
        async def tick() -> None:
            ticked.set()

        answer, _ = await asyncio.gather(g.acall(work, goal="g"), tick())
        return answer

    assert asyncio.run(main()) == "ok"


def _charge_under_acall(g: Governor, verify: Any, ledger: list[str]) -> Any:
    @g.side_effect("payments", verify=verify)
    async def charge(order: str) -> None:
        ledger.append(order)
        raise TimeoutError("timed out after the provider booked it")

    return asyncio.run(g.acall(lambda: charge("A-17"), goal="charge A-17"))


def test_acall_runs_a_sync_verify_in_the_callers_thread_by_default() -> None:
    """A sync verify may use thread-bound resources (a SQLite connection): by default it
    runs inline, in the thread of the event loop, not in a worker."""
    ledger: list[str] = []
    threads: list[int] = []

    def has_entry(order: str) -> bool:
        threads.append(threading.get_ident())
        return order in ledger

    assert _charge_under_acall(governor(), has_entry, ledger) is None
    assert threads == [threading.get_ident()] and ledger == ["A-17"]


def test_acall_with_bounded_sync_hooks_uses_a_sync_verifys_answer() -> None:
    ledger: list[str] = []
    g = governor(bound_sync_hooks=True)
    assert _charge_under_acall(g, lambda order: order in ledger, ledger) is None
    assert ledger == ["A-17"]  # confirmed by verify: committed once, not repeated


def test_acall_with_bounded_sync_hooks_awaits_what_a_sync_verify_returns() -> None:
    """A sync verify returning an awaitable (a lambda around an ``async def``) is awaited,
    never truth-tested: the effect that did not happen is not recorded committed."""
    ledger: list[str] = []

    async def has_entry(order: str) -> bool:
        return False  # the provider has no record of it

    g = governor(bound_sync_hooks=True)
    with pytest.raises(TaskStopped):
        _charge_under_acall(g, lambda order: has_entry(order), ledger)


def test_call_runs_a_sync_verify_in_the_callers_thread_by_default() -> None:
    ledger: list[str] = []
    threads: list[int] = []
    g = governor()

    def has_entry(order: str) -> bool:
        threads.append(threading.get_ident())
        return order in ledger

    @g.side_effect("payments", verify=has_entry)
    def charge(order: str) -> None:
        ledger.append(order)
        raise TimeoutError("timed out after the provider booked it")

    assert g.call(lambda: charge("A-17"), goal="charge A-17") is None
    assert threads == [threading.get_ident()] and ledger == ["A-17"]


def test_a_plain_call_on_an_event_loop_delivers_a_quick_channels_package_before_it_returns() -> (
    None
):
    """``governor.call`` made from a coroutine: a channel that says it does not block is
    called (bounded) before the call ends, so the package is there when the caller looks."""
    packages: list[HandoffPackage] = []

    def page(package: HandoffPackage) -> None:
        time.sleep(0.05)  # a quick callback, but not instantaneous
        packages.append(package)

    g = governor(handoff=CallbackChannel(page))

    async def main() -> None:
        with pytest.raises(HandedOff):
            g.call(_odd, goal="reconcile")
        assert len(packages) == 1

    asyncio.run(main())


def _odd() -> None:
    raise Failure(ErrorType.UNKNOWN, "something odd")


def test_acall_with_its_own_task_id_is_cancelled_during_its_first_try() -> None:
    g = governor()

    async def work() -> str:
        await asyncio.sleep(10)
        return "never"

    async def main() -> None:
        running = asyncio.create_task(g.acall(work, goal="a long answer", task_id="order-9"))
        await asyncio.sleep(0.05)
        g.cancel_chain("order-9")
        done, _ = await asyncio.wait({running}, timeout=2)
        assert done == {running}, "the cancel did not reach the awaiting task"
        with pytest.raises(ChainCancelled):
            running.result()

    asyncio.run(main())


def test_a_sub_agents_acall_is_recorded_under_its_parent() -> None:
    with capture_events() as captured:
        g = governor(emit=captured.emit)

        async def work() -> str:
            return "found"

        async def main() -> str:
            with g.start("plan a trip", agent="lead") as parent:
                answer = await g.acall(work, goal="find flights", agent="worker", parent=parent)
                return f"{parent.state.task_id}:{answer}"

        parent_id, answer = asyncio.run(main()).split(":")
        children = [e for e in captured.events if e.agent.name == "worker"]
    assert answer == "found" and children
    assert {e.parent_task_id for e in children} == {parent_id}


class _ThreadedStore(MemoryKeyStore):
    """A key store that notes the thread of each read and write (as a SQLite one would care)."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    def get(self, key: str) -> Any:
        self.threads.add(threading.get_ident())
        return super().get(key)

    def put(self, record: Any) -> Any:
        self.threads.add(threading.get_ident())
        return super().put(record)


def test_acall_does_key_store_io_off_the_event_loop() -> None:
    store = _ThreadedStore()
    g = governor(key_store=store)
    booked: list[str] = []

    async def book(order: str, idempotency_key: str = "") -> str:
        booked.append(order)
        return "b-1"

    guarded = g.side_effect("bookings")(book)
    assert asyncio.run(g.acall(lambda: guarded("A-17"), goal="book A-17")) == "b-1"
    assert store.threads and threading.get_ident() not in store.threads


class _Pager:
    """A hand-off channel that does not say whether it blocks: it is assumed to."""

    def __init__(self, ticked: threading.Event) -> None:
        self.ticked, self.sent = ticked, 0

    def send(self, package: HandoffPackage) -> None:
        assert self.ticked.wait(2), "the event loop was blocked by the channel"
        self.sent += 1


def test_acall_runs_a_channel_that_may_block_off_the_event_loop() -> None:
    ticked = threading.Event()
    pager = _Pager(ticked)
    with capture_events() as captured:
        g = governor(emit=captured.emit, handoff=pager)

        async def main() -> None:
            async def tick() -> None:
                await asyncio.sleep(0.01)
                ticked.set()

            ticking = asyncio.create_task(tick())
            with pytest.raises(HandedOff):
                await g.acall(_aodd, goal="reconcile")
            await ticking

        asyncio.run(main())
        (handoff,) = captured.of_kind(EventKind.HANDOFF)
    assert pager.sent == 1 and "channel failed" not in handoff.decision_reason


async def _aodd() -> None:
    raise Failure(ErrorType.UNKNOWN, "something odd")
