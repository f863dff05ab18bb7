"""The decision rules' guarantees, read on the decisions a governor records.

Issue 25 item 2: the survivors of mutating the rules of ``sdk/core/rules.py`` (classification
to action, limits per class). Each test runs a task through a real governor on a virtual
clock; the task fails with classified failures in turn (``Failure``, as an agent may
raise it), and the test reads the recorded decisions, their reasons and waits.
"""

from __future__ import annotations

import itertools
import random
import warnings
from datetime import UTC, datetime
from typing import Any

import pytest

from retrylens.errors import ChainCancelled, TaskStopped
from retrylens.schemas import AgentRef, Decision, ErrorType, EventKind
from retrylens.sdk import CallbackChannel, Governor
from retrylens.sdk.core.policy import TaskBudget, parse_policy
from retrylens.sdk.core.rules import (
    Verdict,
    apply_verdict,
    hand_off_unclassified,
    record_failure,
    retry_by_class,
    stop_on_budget,
    stop_on_known_bad_input,
    stop_when_cancelled,
)
from retrylens.sdk.core.state import TaskState
from retrylens.sdk.text.sanitizer import Failure
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


# -- the kill switch (stop_when_killed, and the gate before an attempt) ----------------------
def test_a_project_or_agent_kill_switch_stops_at_the_first_failure() -> None:
    assert decisions(fail(ErrorType.TIMEOUT), policy={"kill_switch": {"project": True}}) == [
        (TO_PERSON, "kill switch: automatic retries are off for project")
    ]
    killed = {"kill_switch": {"agents": ["support"]}}
    assert decisions(fail(ErrorType.TIMEOUT), policy=killed, agent="support") == [
        (TO_PERSON, "kill switch: automatic retries are off for agent support")
    ]
    assert kinds(decisions(fail(ErrorType.TIMEOUT), policy=killed, agent="billing")) == [RETRY]


def test_a_kill_switch_flipped_during_a_backoff_stops_the_next_attempt_as_the_policy_says() -> None:
    """Flipped after the decision to retry, the switch is seen by the gate before the next
    attempt, which decides outside any rule: its stop goes to a person as the task's policy
    says (``rules.handoff_when_stopped``)."""
    assert _killed_during_backoff(handoff=True) == TO_PERSON
    assert _killed_during_backoff(handoff=False) == GIVE_UP


def _killed_during_backoff(*, handoff: bool) -> Decision:
    with capture_events() as captured:
        g = Governor.with_virtual_time(
            parse_policy({"rules": {"handoff_when_stopped": handoff}}),
            start=START,
            emit=lambda event: _kill_on_retry(g, event) and captured.emit(event),
            handoff=CallbackChannel(lambda package: None),
        )
        failures = [Failure(ErrorType.TIMEOUT, "slow")]

        def work() -> str:
            if failures:
                raise failures.pop()
            return "ok"

        with pytest.raises(TaskStopped):
            g.call(work, goal="kill me")
        made = captured.of_kind(EventKind.DECISION)
    assert [e.decision for e in made][0] is RETRY
    assert made[-1].decision_reason == "kill switch: automatic retries are off for project"
    return made[-1].decision


def _kill_on_retry(g: Governor, event: Any) -> bool:
    if event.kind is EventKind.DECISION and event.decision is RETRY:
        g.source.kill()  # the operator flips it while the task waits
    return True


def test_a_degradation_past_the_allowed_count_ends_a_loop_instead_of_relaxing_again() -> None:
    """A context overflow under its cap shrinks the input each time (that is not capped by
    ``max_degradations``); a loop after that stops rather than degrading once more."""
    policy = {"caps": {"context_overflow": 5}, "rules": {"max_degradations": 0}}
    made = decisions(*[fail(ErrorType.CONTEXT_OVERFLOW)] * 2, policy=policy)
    assert made == [
        (SCOPE, "context overflow: shrinking the batch"),
        (TO_PERSON, "phase execution keeps failing even in simplified mode (loop)"),
    ]


def test_a_loop_stops_once_the_degradations_are_used_up() -> None:
    policy = {"caps": {"context_overflow": 5}, "rules": {"max_degradations": 1}}
    made = decisions(*[fail(ErrorType.CONTEXT_OVERFLOW)] * 2, policy=policy)
    assert made == [
        (SCOPE, "context overflow: shrinking the batch"),
        (TO_PERSON, "phase execution keeps failing even in simplified mode (loop)"),
    ]


def test_a_context_overflow_past_its_cap_stops_once_the_degradations_are_used_up() -> None:
    policy = {"caps": {"context_overflow": 1}, "rules": {"max_degradations": 0}}
    made = decisions(*[fail(ErrorType.CONTEXT_OVERFLOW)] * 2, policy=policy)
    assert made == [
        (SCOPE, "context overflow: shrinking the batch"),
        (TO_PERSON, "context_overflow retry cap reached (1/1 retries)"),
    ]


def test_a_relaxed_task_degrades_its_scope_instead_of_relaxing_twice() -> None:
    policy = {"caps": {"validation": 5}, "degrade_after": 2, "rules": {"same_phase_limit": 9}}
    made = decisions(*[fail(ErrorType.VALIDATION)] * 3, policy=policy)
    assert made == [
        (REBUILD, "validation: retry from a clean context with a one-line failure summary"),
        (PRECISION, "2 failures in a row (validation): degrading before the cap"),
        (SCOPE, "3 failures in a row (validation): degrading before the cap"),
    ]


# -- cancellation (stop_when_cancelled) ------------------------------------------------------
def test_a_failure_of_a_cancelled_chain_cancels_the_task() -> None:
    with capture_events() as captured:
        g = Governor.with_virtual_time(
            start=START, emit=captured.emit, handoff=CallbackChannel(lambda package: None)
        )

        def work() -> str:
            g.cancel_chain("order-7")
            raise TimeoutError("the model timed out while the user cancelled")

        with pytest.raises(ChainCancelled):
            g.call(work, goal="answer", task_id="order-7")
        made = [(e.decision, e.decision_reason) for e in captured.of_kind(EventKind.DECISION)]
    assert made == [(Decision.CANCEL_CHAIN, "the task chain was cancelled")]


# -- rules evaluated without an environment (shadow candidates, offline replay) ---------------
def _bare_state() -> TaskState:
    """A task state without an environment, as shadow candidates and the replay see it."""
    return TaskState(
        task_id="t", project="p", agent=AgentRef(name="a"), goal="g", fingerprint="f",
        features={}, trace_id="0" * 32, root_span_id="0" * 16, policy=parse_policy({}),
        rng=random.Random(0),
    )  # fmt: skip


def test_without_an_environment_no_input_counts_as_known_bad() -> None:
    state = _bare_state()
    state.attempt = 1
    state.last_failure = fail(ErrorType.LOGIC)
    record_failure(state, "logic")
    assert stop_on_known_bad_input(limit=1)(state) is None
    assert stop_on_known_bad_input(limit=0)(state) is not None  # the rule does answer
    # a deadline needs the clock, which only an environment has: without one it is not read
    assert stop_on_budget(TaskBudget(deadline_s=1.0))(state) is None


def test_degradation_stops_at_the_allowed_count() -> None:
    policy = {
        "caps": {"validation": 5},
        "degrade_after": 2,
        "rules": {"same_phase_limit": 9, "max_degradations": 1},
    }
    made = decisions(*[fail(ErrorType.VALIDATION)] * 3, policy=policy)
    assert kinds(made) == [REBUILD, PRECISION, REBUILD]


def test_unclassified_failures_are_retried_up_to_their_cap() -> None:
    unknown = [fail(ErrorType.UNKNOWN, code="E7")] * 3
    made = decisions(*unknown, policy={"caps": {"unknown": 2}})
    assert kinds(made) == [REBUILD, PRECISION, TO_PERSON]  # the second is a loop: relaxed
    assert made[-1][1].startswith("unclassified failure (E7)")


def test_a_phase_capped_at_zero_stops_at_its_first_failure() -> None:
    made = decisions(
        fail(ErrorType.VALIDATION), policy={"phase_caps": {"planning": 0}}, phase="planning"
    )
    assert made == [(TO_PERSON, "phase planning failed 1 times (cap 0)")]


def test_an_input_that_keeps_failing_is_stopped_at_once_from_the_limit_on() -> None:
    """Three tasks on one input fail for a lasting reason; the fourth and fifth stop at
    their first failure, naming how often the input failed before."""
    with capture_events() as captured:
        g = Governor.with_virtual_time(
            start=START, emit=captured.emit, handoff=CallbackChannel(lambda package: None)
        )

        def work() -> str:
            raise Failure(ErrorType.LOGIC, "the plan contradicts itself")

        for _ in range(5):
            with pytest.raises(TaskStopped):
                g.call(work, goal="plan the migration")
        stops = [
            e.decision_reason
            for e in captured.of_kind(EventKind.DECISION)
            if e.decision is TO_PERSON
        ]
    assert stops == ["logic retry cap reached (1/1 retries)"] * 3 + [
        "this input failed 3 times before (≥ 3): a retry will not fix it",
        "this input failed 4 times before (≥ 3): a retry will not fix it",
    ]


# -- what the next attempt is given (apply_verdict) ------------------------------------------
def given(*failures: BaseException, policy: dict[str, Any] | None = None, **call: Any) -> list[Any]:
    """What each attempt of a task failing with ``failures`` in turn was given."""
    pending, attempts = list(failures), []

    def work(attempt: Any) -> str:
        attempts.append(attempt)
        if pending:
            raise pending.pop(0)
        return "ok"

    g = Governor.with_virtual_time(
        parse_policy(policy or {}), start=START, rng=random.Random(7),
        handoff=CallbackChannel(lambda package: None),
    )  # fmt: skip
    try:
        g.call(work, goal="total the invoice", **call)
    except TaskStopped:
        pass
    return attempts


def contents(attempt: Any) -> list[str]:
    return [str(m.get("content", "")) for m in attempt.messages]


def test_a_schema_mismatch_patches_the_next_prompt_with_the_missing_field() -> None:
    first, second, third = given(
        fail(ErrorType.SCHEMA_MISMATCH, missing_field="total"), fail(ErrorType.SCHEMA_MISMATCH)
    )
    assert first.patch is None
    assert second.patch == "Your answer must be valid JSON and include the field 'total'."
    assert second.patch in contents(second)
    assert (second.relaxed, second.degraded, third.relaxed, third.degraded) == (
        False, False, True, True,
    )  # fmt: skip
    (_, generic) = given(fail(ErrorType.SCHEMA_MISMATCH))
    assert generic.patch == "Your answer must be valid JSON matching the requested schema."


def test_a_rebuilt_context_carries_a_one_line_summary_of_the_failure() -> None:
    first, second = given(fail(ErrorType.LOGIC, message="the sum of the lines is not the total"))
    assert not any("the sum of the lines" in c for c in contents(first))
    assert any("the sum of the lines is not the total" in c for c in contents(second))


def test_a_context_overflow_shrinks_the_next_attempts_scope_fivefold() -> None:
    scopes = [a.scope for a in given(*[fail(ErrorType.CONTEXT_OVERFLOW)] * 1)]
    assert scopes == [1.0, pytest.approx(0.2)]
    attempts = given(fail(ErrorType.CONTEXT_OVERFLOW), fail(ErrorType.CONTEXT_OVERFLOW))
    assert [(a.scope, a.relaxed, a.degraded) for a in attempts] == [
        (1.0, False, False), (pytest.approx(0.2), False, True), (pytest.approx(0.2), True, True),
    ]  # fmt: skip


def test_a_dependency_degraded_to_its_fallback_stays_there() -> None:
    attempts = given(
        *[fail(ErrorType.TIMEOUT)] * 3, policy={"fallbacks": {"primary": "backup"}},
        dependency="primary",
    )  # fmt: skip
    assert [(a.dependency, a.degraded) for a in attempts] == [
        ("primary", False), ("primary", False), ("backup", True), ("backup", True),
    ]  # fmt: skip


def test_each_retry_counts_towards_the_backoff_exponent() -> None:
    policy = {"backoff": {"base_ms": 1000, "cap_ms": 60000, "jitter": 0.0}}
    made = decisions(*[fail(ErrorType.TIMEOUT)] * 3, policy=policy)
    assert [r for _, r in made] == [
        "timeout is transient: retry after 1000 ms",
        "timeout is transient: retry after 2000 ms",
        "timeout is transient: retry after 4000 ms",
    ]


def test_failures_in_different_phases_are_not_a_loop() -> None:
    """Two steps in two phases fail once each: no loop (each phase failed once)."""
    with capture_events() as captured:
        g = Governor.with_virtual_time(
            parse_policy({"degrade_after": 9}), start=START, emit=captured.emit
        )
        search = [Failure(ErrorType.VALIDATION, "bad query")]
        write = [Failure(ErrorType.VALIDATION, "bad draft")]

        def tool(failures: list[Failure]) -> str:
            if failures:
                raise failures.pop()
            return "ok"

        def work() -> str:
            g.step("search", tool, search, phase="search")
            return g.step("write", tool, write, phase="write")

        assert g.call(work, goal="search and write") == "ok"
        made = captured.decisions()
    assert made == [REBUILD, REBUILD]


def test_an_earlier_transient_failure_does_not_hide_a_loop() -> None:
    policy = {"degrade_after": 9, "caps": {"validation": 5, "timeout": 3}}
    made = decisions(
        fail(ErrorType.TIMEOUT), fail(ErrorType.VALIDATION), fail(ErrorType.VALIDATION),
        policy=policy,
    )  # fmt: skip
    assert made[1:] == [
        (REBUILD, "validation: retry from a clean context with a one-line failure summary"),
        (PRECISION, "phase execution failed 2 times in a row: switching to simplified mode"),
    ]


def test_no_degradation_past_the_allowed_count_even_after_an_overflow_shrank_the_input() -> None:
    policy = {
        "caps": {"context_overflow": 5},
        "rules": {"max_degradations": 0, "same_phase_limit": 9},
    }
    made = decisions(*[fail(ErrorType.CONTEXT_OVERFLOW)] * 2, policy=policy)
    assert made == [(SCOPE, "context overflow: shrinking the batch")] * 2


def test_only_a_rate_limit_honours_retry_after_in_its_reason() -> None:
    (timeout,) = decisions(fail(ErrorType.TIMEOUT, retry_after_ms=1500))
    assert timeout[1].startswith("timeout is transient: retry after ")
    (limited,) = decisions(fail(ErrorType.RATE_LIMIT))
    assert limited[1].startswith("rate_limit is transient: retry after ")


# -- ambiguous side effects (stop_on_ambiguous_side_effect) ----------------------------------
def test_an_ambiguous_side_effect_stops_with_the_reason_its_contract_gives() -> None:
    def ambiguous(**contract: Any) -> str:
        with capture_events() as captured:
            g = Governor.with_virtual_time(
                start=START, emit=captured.emit, handoff=CallbackChannel(lambda package: None)
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the missing contract warns once
                pay = g.side_effect("payments.charge", **contract)(_times_out)
            with pytest.raises(TaskStopped):
                g.call(lambda: pay("A-17"), goal="charge A-17")
            (decision,) = captured.of_kind(EventKind.DECISION)
        return decision.decision_reason

    assert ambiguous(unsafe=True) == (
        "ambiguous outcome of side effect payments.charge: it may have happened and is "
        "declared unsafe to repeat, so a person checks it"
    )
    blind = ambiguous()
    assert blind.startswith("ambiguous outcome of side effect payments.charge: ")
    assert "verify=" in blind and "declared unsafe" not in blind


def _times_out(order: str) -> None:
    raise TimeoutError("the payment provider timed out")


def test_the_extra_try_is_marked_used_by_the_class_that_took_it() -> None:
    """A schema mismatch first, then timeouts and validations alternating past their caps
    of 1: the second timeout takes the extra try, so the second validation stops."""
    caps = {
        "caps": {"timeout": 1, "validation": 1, "schema_mismatch": 1},
        "budget": {"retries": 9},
    }
    made = decisions(
        fail(ErrorType.SCHEMA_MISMATCH), fail(ErrorType.TIMEOUT), fail(ErrorType.VALIDATION),
        fail(ErrorType.TIMEOUT), fail(ErrorType.VALIDATION), policy=caps,
    )  # fmt: skip
    assert kinds(made) == [PATCH, RETRY, REBUILD, RETRY, TO_PERSON]
    assert made[-1][1] == "validation retry cap reached (1/1 retries)"


def test_a_rebuilt_context_summarises_the_latest_failure() -> None:
    _, _, third = given(
        fail(ErrorType.LOGIC, message="the plan skips step two"),
        fail(ErrorType.VALIDATION, message="the total is negative"),
        policy={"degrade_after": 9, "rules": {"same_phase_limit": 9}},
    )
    assert any("the total is negative" in c for c in contents(third))
    assert not any("the plan skips step two" in c for c in contents(third))


def test_a_chain_answers_for_the_classes_of_its_rules() -> None:
    scoped = stop_when_cancelled() | hand_off_unclassified()
    assert scoped.answers_for() == {ErrorType.CANCELLED, ErrorType.UNKNOWN}
    assert (stop_when_cancelled() | retry_by_class()).answers_for() is None


def test_a_fallback_counts_as_one_degradation() -> None:
    """After falling back (one degradation of two), a loop may still relax the task once."""
    made = decisions(
        fail(ErrorType.TIMEOUT), fail(ErrorType.TIMEOUT), fail(ErrorType.VALIDATION),
        fail(ErrorType.VALIDATION), policy={"fallbacks": {"primary": "backup"}},
        dependency="primary",
    )  # fmt: skip
    assert kinds(made) == [RETRY, Decision.DEGRADE_DEPENDENCY, REBUILD, PRECISION]
    made = decisions(
        fail(ErrorType.TIMEOUT), fail(ErrorType.TIMEOUT), fail(ErrorType.VALIDATION),
        fail(ErrorType.VALIDATION),
        policy={"fallbacks": {"primary": "backup"}, "rules": {"max_degradations": 1}},
        dependency="primary",
    )  # fmt: skip
    assert kinds(made) == [RETRY, Decision.DEGRADE_DEPENDENCY, REBUILD, TO_PERSON]


def test_a_replay_with_the_live_caps_marks_the_extra_try_of_an_uncapped_class_used() -> None:
    """The offline replay moves a logged state with the live governor's caps: a change to a
    class those caps do not name (cap 0) past which the task was retried used the extra try."""
    state = _bare_state()
    for attempt, error in enumerate((ErrorType.TIMEOUT, ErrorType.VALIDATION), start=1):
        state.attempt = attempt
        state.last_failure = fail(error)
        record_failure(state, error.value)
    apply_verdict(state, Verdict(REBUILD, "logged"), caps={ErrorType.TIMEOUT: 3})
    assert state.extra_try_used
    assert state.retries == 1


def test_a_change_of_class_within_the_cap_leaves_the_extra_try_for_later() -> None:
    made = decisions(
        fail(ErrorType.TIMEOUT), fail(ErrorType.VALIDATION), fail(ErrorType.TIMEOUT),
        policy={"caps": {"timeout": 1, "validation": 2}},
    )  # fmt: skip
    assert kinds(made) == [RETRY, REBUILD, RETRY]  # the second timeout takes the extra try
