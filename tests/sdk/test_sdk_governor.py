"""The governor's decisions, budgets, fleet protection, kill switch and event trail."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from retrylens.schemas import Decision, ErrorType, EventKind, RetryEvent, TaskOutcome
from retrylens.sdk import (
    CallbackChannel,
    Failure,
    GaveUp,
    Governor,
    HandedOff,
    PolicySource,
    RetryPolicy,
    parse_policy,
)
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)


def make_governor(policy: RetryPolicy | PolicySource | None = None, **kwargs: object) -> Governor:
    """A governor on virtual time with a seeded rng (tests never sleep)."""
    kwargs.setdefault("rng", random.Random(1))
    return Governor.with_virtual_time(policy, start=START, **kwargs)  # type: ignore[arg-type]


def failing(*errors: BaseException, result: object = "ok"):  # noqa: ANN201
    queue = list(errors)

    def fn() -> object:
        if queue:
            raise queue.pop(0)
        return result

    return fn


def test_transient_failure_is_retried_with_backoff_and_every_event_validates() -> None:
    with capture_events() as captured:
        governor = make_governor(emit=captured.emit)
        assert (
            governor.call(
                failing(TimeoutError("slow")), goal="sum the invoice", agent="a", dependency="m"
            )
            == "ok"
        )
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
    decision = events[3]
    assert decision.decision is Decision.RETRY_BACKOFF and 350 <= decision.backoff_ms <= 650
    assert decision.policy_id == "default" and decision.decision_reason
    assert events[-1].outcome is TaskOutcome.SUCCEEDED
    assert (
        len(
            {
                e.correlation_id
                for e in events
                if e.attempt == 1 and e.kind != EventKind.TASK_STARTED
            }
        )
        == 1
    )
    for event in events:
        RetryEvent.model_validate(event.model_dump())


def test_rate_limit_waits_at_least_retry_after() -> None:
    governor = make_governor()
    governor.call(failing(Failure("rate_limit", "429", retry_after_ms=5_000)), goal="g", agent="a")
    assert governor.clock() >= 5.0


def test_schema_mismatch_patches_the_prompt_with_the_missing_field() -> None:
    seen: list[list[dict]] = []

    def fn(attempt) -> str:  # noqa: ANN001
        seen.append(attempt.messages)
        if len(seen) == 1:
            raise Failure("schema_mismatch", "missing total", missing_field="total")
        return "ok"

    make_governor().call(fn, goal="extract", agent="a")
    assert "total" in seen[1][-1]["content"]


def test_logic_error_gets_one_rebuilt_retry_then_stops() -> None:
    governor = make_governor()
    with pytest.raises(GaveUp) as stopped:
        governor.call(failing(*[KeyError("no such order")] * 5), goal="cancel order 9", agent="a")
    assert stopped.value.verdict.decision is Decision.GIVE_UP
    assert "logic retry cap" in stopped.value.verdict.reason


def test_task_budget_bounds_attempts() -> None:
    policy = parse_policy(
        {"budget": {"max_attempts": 3}, "caps": {"timeout": 10}, "degrade_after": 10}
    )
    governor = make_governor(policy)
    calls = []

    def fn() -> None:
        calls.append(1)
        raise TimeoutError("slow")

    with pytest.raises(GaveUp, match="budget"):
        governor.call(fn, goal="g", agent="a")
    assert len(calls) == 3


def test_kill_switch_turns_retries_off_without_a_restart() -> None:
    source = PolicySource(RetryPolicy())
    packages = []
    governor = make_governor(source, handoff=CallbackChannel(packages.append))
    source.kill(agent="billing")
    calls = []

    def fn() -> None:
        calls.append(1)
        raise TimeoutError("slow")

    with pytest.raises(HandedOff, match="kill switch"):
        governor.call(fn, goal="g", agent="billing")
    assert len(calls) == 1 and packages and packages[0].agent == "billing"
    assert governor.call(failing(TimeoutError("x")), goal="g", agent="other") == "ok"


def test_circuit_breaker_opens_and_falls_back_to_the_other_model() -> None:
    policy = parse_policy(
        {"fallbacks": {"big": "small"}, "breaker": {"window": 4, "min_calls": 4, "open_s": 60}}
    )
    governor = make_governor(policy)
    for _ in range(4):
        governor.breakers["big"].record(False)
    used = []

    def fn(attempt) -> str:  # noqa: ANN001
        used.append(attempt.dependency)
        return "ok"

    governor.call(fn, goal="g", agent="a", dependency="big")
    assert used == ["small"]
    governor.clock.advance(61)
    governor.call(fn, goal="g2", agent="a", dependency="big")
    assert used[-1] == "big"  # half-open probe


def test_fleet_retry_budget_stops_a_retry_storm() -> None:
    governor = make_governor(parse_policy({"fleet_budget": {"max_tokens": 10, "ratio": 0.1}}))
    for _ in range(5):
        governor.throttles["api"].record(False)
    with pytest.raises(GaveUp, match="fleet retry budget"):
        governor.call(failing(TimeoutError("slow")), goal="g", agent="a", dependency="api")


def test_same_input_failing_three_times_is_handed_off_immediately() -> None:
    packages = []
    governor = make_governor(handoff=CallbackChannel(packages.append))
    for _ in range(3):
        with pytest.raises(HandedOff):
            governor.call(failing(*[KeyError("x")] * 5), goal="Cancel order #9999999", agent="a")
    calls = []

    def fn() -> None:
        calls.append(1)
        raise KeyError("x")

    with pytest.raises(HandedOff, match="failed 3 times before"):
        governor.call(fn, goal="cancel   order #9999999", agent="a")
    assert len(calls) == 1


def test_failure_type_change_counts_as_progress() -> None:
    policy = parse_policy({"caps": {"validation": 1, "timeout": 1}, "degrade_after": 5})
    governor = make_governor(policy)
    assert (
        governor.call(
            failing(ValueError("bad"), TimeoutError("t"), ValueError("bad")), goal="g", agent="a"
        )
        == "ok"
    )


def test_role_override_changes_caps() -> None:
    policy = parse_policy({"roles": {"critical": {"caps": {"timeout": 0}}}})
    governor = make_governor(policy)
    from retrylens.schemas import AgentRef

    with pytest.raises(GaveUp):
        governor.call(
            failing(TimeoutError("t")), goal="g", agent=AgentRef(name="p", role="critical")
        )
    assert (
        governor.call(failing(TimeoutError("t")), goal="g", agent=AgentRef(name="p", role="other"))
        == "ok"
    )


def test_shadow_candidate_and_exploration_are_logged_with_propensities() -> None:
    policy = parse_policy(
        {
            "shadow": {"candidate": {"caps": {"timeout": 0}}, "exploration": 0.5},
            "breaker": {"enabled": False},
        }
    )
    with capture_events() as captured:
        governor = make_governor(policy, emit=captured.emit, rng=random.Random(3))
        for i in range(30):
            try:
                governor.call(failing(TimeoutError("t")), goal=f"g{i}", agent="a", dependency="m")
            except GaveUp:
                pass
        decisions = captured.of_kind(EventKind.DECISION)
    assert all(e.shadow and e.shadow_decision is not None for e in decisions)
    assert {e.shadow_decision for e in decisions} == {Decision.GIVE_UP}
    live = {e.decision for e in decisions}
    assert Decision.RETRY_BACKOFF in live and len(live) > 1
    for e in decisions:
        expected = 1 - 0.5 + 0.5 / 2 if e.decision is Decision.RETRY_BACKOFF else 0.5 / 2
        assert e.propensity == pytest.approx(expected)


def test_error_type_of_events_uses_the_taxonomy() -> None:
    with capture_events() as captured:
        governor = make_governor(emit=captured.emit)
        governor.call(failing(ConnectionResetError("reset")), goal="g", agent="a")
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)[0]
    assert failed.error_type is ErrorType.NETWORK and failed.retryable is True


def test_stack_digest_names_where_the_error_was_raised_as_stored_digests_do() -> None:
    import hashlib
    import traceback

    from retrylens.sdk.text.sanitizer import stack_digest

    def deep(n: int) -> None:
        if n:
            deep(n - 1)
        {}["missing"]

    try:
        deep(7)
    except KeyError as exc:
        error = exc
    frames = traceback.extract_tb(error.__traceback__)[-5:]  # the formula digests were stored with
    where = "|".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.name}:{f.lineno}" for f in frames)
    assert stack_digest(error) == hashlib.sha256(f"KeyError|{where}".encode()).hexdigest()[:16]
