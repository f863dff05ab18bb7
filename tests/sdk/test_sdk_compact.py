"""The fast path of a clean first attempt and the compact event that records it."""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from retrylens.schemas import EventKind, RetryEvent, TaskOutcome
from retrylens.sdk import (
    ChainCancelled,
    Governor,
    RetryPolicy,
    TaskStopped,
    current_run,
    parse_policy,
)
from retrylens.sdk.core.first_try import is_compact
from retrylens.sdk.core.ids import SystemIds
from retrylens.sdk.text.features import extract_input_features, input_fingerprint
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)
FULL_SUCCESS = [
    EventKind.TASK_STARTED,
    EventKind.ATTEMPT_STARTED,
    EventKind.ATTEMPT_SUCCEEDED,
    EventKind.TASK_FINISHED,
]


def make_governor(**kwargs: object) -> Governor:
    kwargs.setdefault("rng", random.Random(3))
    return Governor.with_virtual_time(start=START, **kwargs)  # type: ignore[arg-type]


def flaky(fails: int = 1, *, seconds: float = 0.0, clock: object = None):  # noqa: ANN201
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        if clock is not None and seconds:
            clock.advance(seconds)  # type: ignore[attr-defined]
        if len(calls) <= fails:
            raise TimeoutError("model timed out")
        return "ok"

    return fn


def test_a_first_try_success_is_one_compact_event_that_stands_for_the_whole_task() -> None:
    with capture_events() as captured:
        governor = make_governor(emit=captured.emit, policy=RetryPolicy(id="p", version="7"))
        assert (
            governor.call(lambda: "ok", goal="Refund order A-17", agent="support", dependency="gpt")
            == "ok"
        )
        [event] = captured.events
    assert is_compact(event) and event.kind is EventKind.ATTEMPT_SUCCEEDED and event.attempt == 1
    assert event.outcome is TaskOutcome.SUCCEEDED
    assert event.input_fingerprint == input_fingerprint("Refund order A-17")
    assert event.input_features == extract_input_features(
        "Refund order A-17", agent="support", model="gpt"
    )
    assert (event.agent.name, event.phase, event.dependency) == ("support", "execution", "gpt")
    assert (event.policy_id, event.policy_version, event.project) == ("p", "7", "default")
    assert (
        event.task_id.startswith("task-")
        and event.trace_id
        and event.span_id
        and event.parent_span_id
    )
    assert event.correlation_id != event.task_id and event.ts == START


def test_the_compact_event_is_valid_as_emitted_not_only_after_the_wire() -> None:
    events: list[RetryEvent] = []
    make_governor(emit=events.append, validate_events=False).call(
        lambda: 1, goal="sum the invoice", agent="a"
    )
    [event] = events
    assert RetryEvent.model_validate(event.model_dump()) == event
    assert event.model_fields_set == set(RetryEvent.model_fields)


def test_the_compact_event_matches_what_the_full_path_would_compact() -> None:
    fast: list[RetryEvent] = []
    slow: list[RetryEvent] = []
    make_governor(emit=fast.append).call(lambda: 1, goal="sum the invoice", agent="a")
    make_governor(emit=slow.append).call(
        lambda attempt: 1, goal="sum the invoice", agent="a"
    )  # needs its run
    ids = {"event_id", "task_id", "trace_id", "span_id", "parent_span_id", "correlation_id"}
    assert [e.model_dump(exclude=ids) for e in fast] == [e.model_dump(exclude=ids) for e in slow]


def test_a_failure_records_the_full_sequence_with_the_real_start_time() -> None:
    with capture_events() as captured:
        governor = make_governor(emit=captured.emit)
        clock = governor.clock
        assert governor.call(flaky(1, seconds=2.0, clock=clock), goal="g", agent="a") == "ok"
        events = captured.events
    assert [e.kind for e in events] == [
        EventKind.TASK_STARTED,
        EventKind.ATTEMPT_STARTED,
        EventKind.ATTEMPT_FAILED,
        EventKind.DECISION,
        EventKind.ATTEMPT_STARTED,
        EventKind.ATTEMPT_SUCCEEDED,
        EventKind.TASK_FINISHED,
    ]
    assert events[0].ts == events[1].ts == START
    assert events[2].ts == START + timedelta(seconds=2) and events[2].latency_ms == 2000
    assert not any(is_compact(e) for e in events)
    assert events[0].input_features and events[-1].outcome is TaskOutcome.SUCCEEDED
    assert (
        len({e.task_id for e in events}) == 1
        and events[1].correlation_id == events[2].correlation_id
    )


def test_a_side_effect_in_the_first_attempt_gives_the_full_sequence() -> None:
    with capture_events() as captured:
        governor = make_governor(emit=captured.emit)
        insert = governor.side_effect("db.insert")(lambda row: f"id-{row}")
        assert governor.call(lambda: insert(7), goal="store row 7", agent="a") == "id-7"
        kinds = [e.kind for e in captured.events]
    assert kinds == [
        EventKind.TASK_STARTED,
        EventKind.ATTEMPT_STARTED,
        EventKind.SIDE_EFFECT,
        EventKind.ATTEMPT_SUCCEEDED,
        EventKind.TASK_FINISHED,
    ]


def test_current_run_inside_a_first_attempt_is_the_tasks_run_and_a_clean_success_stays_compact() -> (
    None
):
    seen = []
    with capture_events() as captured:
        governor = make_governor(emit=captured.emit)

        def fn() -> str:
            seen.append(current_run())
            return "ok"

        governor.call(fn, goal="g", agent="a", task_id="t-1")
        [event] = captured.events
    assert seen[0] is not None and seen[0].state.task_id == "t-1" and seen[0].state.attempt == 1
    assert is_compact(event) and event.task_id == "t-1"


def test_an_interrupt_in_the_first_attempt_is_recorded_as_a_failed_task() -> None:
    with capture_events() as captured:
        governor = make_governor(emit=captured.emit)

        def interrupted() -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            governor.call(interrupted, goal="g", agent="a")
        events = captured.events
    assert [e.kind for e in events] == [
        EventKind.TASK_STARTED,
        EventKind.ATTEMPT_STARTED,
        EventKind.TASK_FINISHED,
    ]
    assert events[-1].outcome is TaskOutcome.FAILED


def test_a_cancelled_task_id_never_runs_on_the_fast_path() -> None:
    governor = make_governor()
    governor.cancel_chain("t-9")
    calls = []
    with pytest.raises(ChainCancelled):
        governor.call(lambda: calls.append(1), goal="g", agent="a", task_id="t-9")
    assert calls == []


def test_a_first_try_success_feeds_the_dependency_breaker_and_throttle() -> None:
    policy = parse_policy({"breaker": {"window": 4, "min_calls": 2, "open_s": 60}})
    governor = make_governor(policy=policy)
    governor.call(lambda: 1, goal="g", agent="a", dependency="api")
    assert governor.throttles["api"].tokens == governor.policy.fleet_budget.max_tokens
    assert governor.breakers["api"].allow()
    with pytest.raises(TaskStopped):
        governor.call(flaky(10), goal="g2", agent="a", dependency="api")
    assert governor.throttles["api"].tokens < governor.policy.fleet_budget.max_tokens


def test_the_full_task_run_api_keeps_four_events_unless_asked_for_the_compact_form() -> None:
    for compact, expected in ((False, FULL_SUCCESS), (True, [EventKind.ATTEMPT_SUCCEEDED])):
        events: list[RetryEvent] = []
        governor = make_governor(emit=events.append)
        with governor.start("g", agent="a", compact=compact) as run:
            run.succeed(run.begin())
        assert [e.kind for e in events] == expected


def test_acall_is_compact_on_success_and_full_on_failure() -> None:
    async def ok() -> str:
        return "ok"

    calls: list[int] = []

    async def once_failing() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise TimeoutError("slow")
        return "ok"

    with capture_events() as captured:
        governor = make_governor(emit=captured.emit)
        assert asyncio.run(governor.acall(ok, goal="g", agent="a")) == "ok"
        assert asyncio.run(governor.acall(once_failing, goal="g2", agent="a")) == "ok"
        events = captured.events
    assert is_compact(events[0])
    assert [e.kind for e in events[1:]] == [
        EventKind.TASK_STARTED,
        EventKind.ATTEMPT_STARTED,
        EventKind.ATTEMPT_FAILED,
        EventKind.DECISION,
        EventKind.ATTEMPT_STARTED,
        EventKind.ATTEMPT_SUCCEEDED,
        EventKind.TASK_FINISHED,
    ]


def test_unseeded_ids_are_well_formed_and_unique() -> None:
    events: list[RetryEvent] = []
    governor = Governor(emit=events.append)
    for _ in range(300):
        governor.call(lambda: 1, goal="g", agent="a")
    assert len({e.event_id for e in events}) == len({e.task_id for e in events}) == 300
    assert all(e.event_id.version == 4 and e.event_id.variant == uuid.RFC_4122 for e in events)
    assert all(RetryEvent.model_validate(e.model_dump()) for e in events)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_worker_never_repeats_its_parents_ids() -> None:
    ids = SystemIds()
    ids.hex(32)  # the parent's buffer now holds ids a careless child would hand out again
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next ids and leave at once
        os.write(write, "".join(ids.hex(32) for _ in range(4)).encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 4096).decode()
    os.close(read)
    os.waitpid(pid, 0)
    parent = "".join(ids.hex(32) for _ in range(4))
    assert len(child) == len(parent) == 128 and child != parent


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_worker_never_repeats_its_parents_event_ids() -> None:
    """Event ids come from a raw-byte buffer of their own: a child throws it away too."""
    ids = SystemIds()
    ids.uuid4()  # the parent's raw buffer now holds ids a careless child would repeat
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, "".join(ids.uuid4().hex for _ in range(4)).encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 4096).decode()
    os.close(read)
    os.waitpid(pid, 0)
    parent = "".join(ids.uuid4().hex for _ in range(4))
    assert len(child) == len(parent) == 128 and child != parent


def test_system_event_ids_are_distinct_version_4_uuids_across_buffer_refills() -> None:
    ids = SystemIds()
    made = [ids.uuid4() for _ in range(3 * SystemIds.CHUNK_BYTES // 16 + 7)]  # 3 refills
    assert len(set(made)) == len(made)
    assert all(u.version == 4 and u.variant == uuid.RFC_4122 for u in made)
    assert all(uuid.UUID(str(u)) == u and u.is_safe is uuid.SafeUUID.unknown for u in made)
    assert len({ids.hex(32) for _ in range(300)}) == 300  # hex ids keep their own buffer


def test_captured_outcomes_read_compact_and_full_tasks_alike() -> None:
    with capture_events() as captured:
        governor = make_governor(emit=captured.emit)
        governor.call(lambda: 1, goal="g", agent="a", task_id="clean")
        governor.call(flaky(1), goal="g", agent="a", task_id="retried")
        assert captured.outcomes() == {
            "clean": TaskOutcome.SUCCEEDED,
            "retried": TaskOutcome.SUCCEEDED,
        }


def test_the_schema_allows_only_a_succeeded_outcome_on_an_attempt_succeeded_event() -> None:
    base = {"project": "p", "agent": {"name": "a"}, "task_id": "t", "correlation_id": "c"}
    assert RetryEvent(**base, kind="attempt_succeeded", attempt=1, outcome="succeeded").outcome
    with pytest.raises(ValueError, match="compact form"):
        RetryEvent(**base, kind="attempt_succeeded", attempt=1, outcome="failed")
