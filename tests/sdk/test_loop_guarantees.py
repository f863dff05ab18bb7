"""The decision loop's guarantees, read on emitted events, through both drivers.

Issue 25 item 2: the survivors of mutating ``sdk/loop.py`` (the sans-I/O attempt loop)
and ``sdk/stopping.py``/``sdk/steps.py``. Each test runs the same task through
``governor.call`` (the plain driver) and ``governor.acall`` (the asyncio driver), on a
virtual clock, so the waits are read exactly off the events' timestamps.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Generator
from datetime import UTC, datetime
from typing import Any

import pytest

from retrylens.errors import HandedOff
from retrylens.schemas import Decision, ErrorType, EventKind, RetryEvent
from retrylens.sdk import CallbackChannel, Governor
from retrylens.sdk.handoff import HandoffPackage
from retrylens.sdk.policy import parse_policy
from retrylens.sdk.sanitizer import Failure
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


# -- sdk/loop.py: task ---------------------------------------------------------------------
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


# -- sdk/loop.py: step ---------------------------------------------------------------------
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


# -- sdk/stopping.py: the hand-off package -------------------------------------------------
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


# -- sdk/steps.py --------------------------------------------------------------------------
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
