"""The decision rules' guarantees, read on the decisions a governor records.

Issue 25 item 2: the survivors of mutating the rules of ``sdk/rules.py`` (classification
to action, limits per class). Each test runs a task through a real governor on a virtual
clock; the task fails with classified failures in turn (``Failure``, as an agent may
raise it), and the test reads the recorded decisions, their reasons and waits.
"""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from retrylens.errors import TaskStopped
from retrylens.schemas import Decision, ErrorType, EventKind
from retrylens.sdk import CallbackChannel, Governor
from retrylens.sdk.policy import parse_policy
from retrylens.sdk.sanitizer import Failure
from retrylens.testing import capture_events

START = datetime(2026, 12, 2, tzinfo=UTC)
_TASKS = itertools.count()

RETRY, REBUILD, PATCH = Decision.RETRY_BACKOFF, Decision.REBUILD_CONTEXT, Decision.PATCH_PROMPT
SCOPE, PRECISION = Decision.DEGRADE_SCOPE, Decision.DEGRADE_PRECISION
TO_PERSON, GIVE_UP = Decision.HANDOFF_HUMAN, Decision.GIVE_UP


def fail(error_type: ErrorType, **fields: Any) -> Failure:
    return Failure(error_type, fields.pop("message", "it failed"), **fields)


def decisions(
    *failures: BaseException,
    policy: dict[str, Any] | None = None,
    channel: bool = True,
    **call: Any,
) -> list[tuple[Decision, str]]:
    """The decisions (and reasons) of one task failing with ``failures`` in turn, then succeeding."""
    pending = list(failures)

    def work() -> str:
        if pending:
            raise pending.pop(0)
        return "ok"

    with capture_events() as captured:
        g = Governor.with_virtual_time(
            parse_policy(policy or {}),
            start=START,
            rng=random.Random(7),
            emit=captured.emit,
            handoff=CallbackChannel(lambda package: None) if channel else None,
        )
        call.setdefault("goal", f"task {next(_TASKS)}")
        try:
            g.call(work, **call)
        except TaskStopped:
            pass
        return [(e.decision, e.decision_reason) for e in captured.of_kind(EventKind.DECISION)]


def kinds(made: list[tuple[Decision, str]]) -> list[Decision]:
    return [d for d, _ in made]


# -- caps per failure class (stop_at_class_cap) ---------------------------------------------
def test_a_class_is_retried_up_to_its_cap_and_the_reason_counts_the_retries() -> None:
    made = decisions(*[fail(ErrorType.TIMEOUT)] * 4)  # the default cap of timeouts is 3
    assert kinds(made) == [RETRY, RETRY, RETRY, TO_PERSON]
    assert made[-1][1] == "timeout retry cap reached (3/3 retries)"


def test_a_class_without_a_cap_is_not_retried_at_all() -> None:
    made = decisions(fail(ErrorType.TOOL_ERROR))  # tool errors have no default cap: 0
    assert made == [(TO_PERSON, "tool_error: the policy allows no retries of this class (cap 0)")]
    capped = decisions(fail(ErrorType.TOOL_ERROR), policy={"caps": {"tool_error": 1}})
    assert kinds(capped) == [REBUILD]


def test_a_change_of_class_earns_one_extra_try_once() -> None:
    caps = {"caps": {"timeout": 1, "validation": 1}}
    made = decisions(
        fail(ErrorType.TIMEOUT), fail(ErrorType.VALIDATION), fail(ErrorType.TIMEOUT),
        fail(ErrorType.TIMEOUT), policy=caps,
    )  # fmt: skip
    # the second timeout is past its cap of 1, but follows a validation failure: one more try
    assert kinds(made) == [RETRY, REBUILD, RETRY, TO_PERSON]
    assert made[-1][1] == "timeout retry cap reached (2/1 retries)"
    # switched off, the same second timeout stops the task
    strict = {**caps, "rules": {"extra_try_on_type_change": False}}
    made = decisions(
        fail(ErrorType.TIMEOUT), fail(ErrorType.VALIDATION), fail(ErrorType.TIMEOUT),
        policy=strict,
    )  # fmt: skip
    assert made[-1] == (TO_PERSON, "timeout retry cap reached (1/1 retries)")


def test_the_extra_try_is_granted_once_per_task() -> None:
    caps = {"caps": {"timeout": 1, "validation": 1}}
    made = decisions(
        fail(ErrorType.TIMEOUT), fail(ErrorType.VALIDATION), fail(ErrorType.TIMEOUT),
        fail(ErrorType.VALIDATION), policy=caps,
    )  # fmt: skip
    # the second validation is past its cap after a change of class, but the extra try is used
    assert kinds(made) == [RETRY, REBUILD, RETRY, TO_PERSON]
    assert made[-1][1] == "validation retry cap reached (1/1 retries)"


def test_a_change_to_a_class_with_no_retries_earns_no_extra_try() -> None:
    made = decisions(fail(ErrorType.TIMEOUT), fail(ErrorType.TOOL_ERROR))
    assert made[-1] == (
        TO_PERSON,
        "tool_error: the policy allows no retries of this class (cap 0)",
    )


def test_a_context_overflow_past_its_cap_shrinks_the_input_until_the_degradations_run_out() -> None:
    made = decisions(*[fail(ErrorType.CONTEXT_OVERFLOW)] * 3)
    assert kinds(made) == [SCOPE, PRECISION, TO_PERSON]
    assert made[-1][1] == "context_overflow: the policy allows no retries of this class (cap 0)"
    one = decisions(
        *[fail(ErrorType.CONTEXT_OVERFLOW)] * 2, policy={"rules": {"max_degradations": 1}}
    )
    assert kinds(one) == [SCOPE, TO_PERSON]


def test_a_step_that_uses_its_cap_up_is_named_in_at_most_64_characters() -> None:
    name = "s" * 64 + "TAIL"
    calls = 0

    def tool() -> None:
        nonlocal calls
        calls += 1
        raise Failure(ErrorType.TOOL_ERROR, "the tool broke")

    with capture_events() as captured:
        g = Governor.with_virtual_time(start=START, emit=captured.emit)
        with pytest.raises(TaskStopped):
            g.call(lambda: g.step(name, tool), goal="use the tool")
        (decision,) = captured.of_kind(EventKind.DECISION)
    assert decision.decision_reason.startswith(f"step cap of step {'s' * 64!r}: tool_error")
    assert calls == 1


# -- unclassified failures (hand_off_unclassified) ----------------------------------------
def test_an_unclassified_failure_goes_to_a_person_at_once_naming_its_code() -> None:
    made = decisions(fail(ErrorType.UNKNOWN))
    assert made[0][0] is TO_PERSON
    assert made[0][1].startswith("unclassified failure (exception): no retry rule applies")
    made = decisions(fail(ErrorType.UNKNOWN, code="E42"), fail(ErrorType.UNKNOWN, code="E42"),
                     policy={"caps": {"unknown": 1}})  # fmt: skip
    assert kinds(made) == [REBUILD, TO_PERSON]
    assert made[1][1].startswith("unclassified failure (E42)")


# -- the whitelist (stop_unless_retryable) -------------------------------------------------
def test_only_whitelisted_retryable_failures_are_retried() -> None:
    assert decisions(fail(ErrorType.VALIDATION), policy={"retryable": ["timeout"]}) == [
        (TO_PERSON, "validation is not in the retryable whitelist")
    ]
    assert decisions(fail(ErrorType.TIMEOUT, retryable=False)) == [
        (TO_PERSON, "timeout is not in the retryable whitelist")
    ]
    assert kinds(decisions(fail(ErrorType.TIMEOUT), policy={"retryable": ["timeout"]})) == [RETRY]


# -- phase caps and loops (stop_at_phase_cap, break_loops) ---------------------------------
def test_a_capped_phase_stops_at_its_cap_and_other_phases_are_not_capped() -> None:
    mixed = [fail(ErrorType.VALIDATION), fail(ErrorType.SCHEMA_MISMATCH)]
    assert decisions(*mixed, phase="planning") == [
        (REBUILD, "validation: retry from a clean context with a one-line failure summary"),
        (TO_PERSON, "phase planning failed 2 times (cap 2)"),
    ]
    assert decisions(*mixed, phase="planning", policy={"phase_caps": {"planning": 3}})[-1][0] in (
        PATCH,
        PRECISION,
    )
    assert TO_PERSON not in kinds(decisions(*mixed, phase="execution", policy={"phase_caps": {}}))


def test_the_same_phase_failing_in_a_row_degrades_then_stops_as_a_loop() -> None:
    alternating = [fail(ErrorType.VALIDATION), fail(ErrorType.SCHEMA_MISMATCH)] * 3
    made = decisions(
        *alternating,
        policy={"caps": {"validation": 5, "schema_mismatch": 5}, "degrade_after": 9},
    )
    assert made == [
        (REBUILD, "validation: retry from a clean context with a one-line failure summary"),
        (PRECISION, "phase execution failed 2 times in a row: switching to simplified mode"),
        (TO_PERSON, "phase execution keeps failing even in simplified mode (loop)"),
    ]
    three = decisions(
        *alternating,
        policy={
            "caps": {"validation": 5, "schema_mismatch": 5},
            "degrade_after": 9,
            "rules": {"same_phase_limit": 3},
        },
    )
    assert kinds(three)[:3] == [REBUILD, PATCH, PRECISION]


def test_transient_failures_in_a_row_are_not_a_loop() -> None:
    made = decisions(*[fail(ErrorType.TIMEOUT)] * 3)
    assert kinds(made) == [RETRY, RETRY, RETRY]


# -- degradation (degrade_after_failures) and the per-class retry (retry_by_class) ----------
def test_repeated_failures_of_a_dependency_fall_back_after_the_set_count() -> None:
    timeouts = [fail(ErrorType.TIMEOUT)] * 3
    made = decisions(*timeouts, policy={"fallbacks": {"primary": "backup"}}, dependency="primary")
    assert kinds(made) == [RETRY, Decision.DEGRADE_DEPENDENCY, RETRY]
    assert made[1][1] == "2 failures in a row on primary: using backup"
    later = decisions(
        *timeouts, policy={"fallbacks": {"primary": "backup"}, "degrade_after": 3},
        dependency="primary",
    )  # fmt: skip
    assert kinds(later) == [RETRY, RETRY, Decision.DEGRADE_DEPENDENCY]


def test_each_class_gets_its_own_retry() -> None:
    assert decisions(fail(ErrorType.RATE_LIMIT, retry_after_ms=2500)) == [
        (RETRY, "rate limited: honouring Retry-After (2500 ms), waiting 2500 ms")
    ]
    assert decisions(fail(ErrorType.SCHEMA_MISMATCH, missing_field="total")) == [
        (PATCH, "output did not match the schema: prompt now names field 'total'")
    ]
    assert decisions(fail(ErrorType.SCHEMA_MISMATCH)) == [
        (PATCH, "output did not match the schema: prompt now names the expected schema")
    ]
    assert decisions(fail(ErrorType.CONTEXT_OVERFLOW)) == [
        (SCOPE, "context overflow: shrinking the batch")
    ]
    assert decisions(fail(ErrorType.LOGIC)) == [
        (REBUILD, "logic: retry from a clean context with a one-line failure summary")
    ]
    (made,) = decisions(fail(ErrorType.SERVER_ERROR))
    assert made[0] is RETRY and made[1].startswith("server_error is transient: retry after ")


# -- who a stop goes to (stop_verdict) -----------------------------------------------------
def test_a_stop_goes_to_a_person_only_with_a_channel_and_when_the_policy_says_so() -> None:
    unknown = fail(ErrorType.UNKNOWN)
    assert kinds(decisions(unknown)) == [TO_PERSON]
    assert kinds(decisions(fail(ErrorType.UNKNOWN), channel=False)) == [GIVE_UP]
    off = {"rules": {"handoff_when_stopped": False}}
    assert kinds(decisions(fail(ErrorType.UNKNOWN), policy=off)) == [GIVE_UP]
