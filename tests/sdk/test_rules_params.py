"""Rules carry their own parameters: a policy compiles into a chain, and users bring their own.

A rule decides by what it was built with, never by the policy the task state happens to
carry; the governor follows policy changes by compiling the new policy's chain.
"""

from __future__ import annotations

import random

import pytest

from retrylens.errors import GaveUp
from retrylens.schemas import AgentRef, Decision, ErrorType, EventKind
from retrylens.sdk import Governor, PolicySource
from retrylens.sdk.core.backoff import wait_exponential, wait_from_policy, wait_retry_after
from retrylens.sdk.core.policy import RetryPolicy, TaskBudget, parse_policy
from retrylens.sdk.core.rules import (
    FirstOf,
    Verdict,
    compile_policy,
    compiled,
    default_rules,
    record_failure,
    retry_by_class,
    stop_at_class_cap,
    stop_on_budget,
    stop_unless_retryable,
)
from retrylens.sdk.core.shadow import shadow_verdict
from retrylens.sdk.core.state import TaskState
from retrylens.sdk.text.sanitizer import Failure
from retrylens.testing import capture_events


def state_with(policy: RetryPolicy, *failures: ErrorType) -> TaskState:
    """A task state under ``policy`` that has just failed with ``failures`` in order."""
    s = TaskState(
        task_id="t", project="p", agent=AgentRef(name="a"), goal="g", fingerprint="f",
        features={}, trace_id="0" * 32, root_span_id="0" * 16, policy=policy,
        rng=random.Random(0),
    )
    for error in failures:
        s.attempt += 1
        s.ledger.charge(attempts=1)
        s.last_failure = Failure(error)
        record_failure(s, error.value)
    return s


STRICT = parse_policy({"id": "strict", "caps": {"timeout": 0}, "budget": {"max_attempts": 1},
                       "retryable": ["logic"]})
LENIENT = parse_policy({"id": "lenient", "caps": {"timeout": 5}, "budget": {"max_attempts": 9}})


def test_a_rule_built_without_parameters_does_not_read_the_states_policy() -> None:
    s = state_with(STRICT, ErrorType.TIMEOUT)
    # built with defaults: timeout cap 3, five attempts, the default whitelist
    assert stop_at_class_cap()(s) is None
    assert stop_on_budget()(s) is None
    assert stop_unless_retryable()(s) is None


def test_a_chain_compiled_from_one_policy_decides_by_it_under_another() -> None:
    lenient_in_strict = state_with(STRICT, ErrorType.TIMEOUT)
    verdict = compile_policy(LENIENT)(lenient_in_strict)
    assert verdict is not None and verdict.decision is Decision.RETRY_BACKOFF
    strict_in_lenient = state_with(LENIENT, ErrorType.TIMEOUT)
    verdict = compiled(STRICT)(strict_in_lenient)
    assert verdict is not None and verdict.decision is Decision.GIVE_UP
    assert verdict.rule == "stop_unless_retryable"


def test_each_rule_of_a_compiled_chain_holds_the_policys_parameters() -> None:
    chain = compile_policy(STRICT)
    by_name = {rule.name: rule for rule in chain}
    assert by_name["stop_at_class_cap"].caps == {ErrorType.TIMEOUT: 0}
    assert by_name["stop_on_budget"].budget == TaskBudget(max_attempts=1)
    assert by_name["stop_unless_retryable"].retryable == {ErrorType.LOGIC}
    assert repr(by_name["retry_by_class"].wait) == repr(wait_from_policy(STRICT.backoff))
    assert repr(default_rules(STRICT)) == repr(chain)


def test_a_policy_compiles_once_and_a_changed_one_compiles_anew() -> None:
    policy = RetryPolicy()
    assert compiled(policy) is compiled(policy)
    changed = policy.with_overrides(caps={"timeout": 1})
    assert compiled(changed) is not compiled(policy)
    assert {r.name: r for r in compiled(changed)}["stop_at_class_cap"].caps == {ErrorType.TIMEOUT: 1}


def test_a_plain_function_is_a_rule_anywhere_in_a_chain() -> None:
    def never_on_fridays(state: TaskState) -> Verdict | None:
        return Verdict(Decision.GIVE_UP, "not on fridays", rule="never_on_fridays")

    chain = never_on_fridays | stop_on_budget(TaskBudget(max_attempts=9))
    assert isinstance(chain, FirstOf) and chain.rules[0] is never_on_fridays
    assert repr(chain).startswith("never_on_fridays | stop_on_budget(")
    calls = 0

    def slow() -> None:
        nonlocal calls
        calls += 1
        raise TimeoutError("slow")

    with capture_events() as captured:
        gov = Governor(emit=captured.emit, rules=chain)
        with pytest.raises(GaveUp):
            gov.call(slow, goal="g", agent="a")
        decisions = captured.of_kind(EventKind.DECISION)
    assert calls == 1
    assert [(d.decision, d.decision_reason) for d in decisions] == [(Decision.GIVE_UP, "not on fridays")]


def test_a_plain_function_is_a_wait_and_composes_with_the_library_waits() -> None:
    def flat(view: object) -> float:
        return 250.0

    wait = flat | wait_retry_after()
    assert repr(wait) == "(flat | wait_retry_after(max_ms=60000))"
    rules = stop_on_budget(TaskBudget(max_attempts=3)) | retry_by_class(wait=wait)
    answers = iter([TimeoutError("slow"), TimeoutError("slow"), "ok"])

    def work() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with capture_events() as captured:
        gov = Governor.with_virtual_time(emit=captured.emit, rules=rules, start=_start())
        assert gov.call(work, goal="g", agent="a") == "ok"
        decisions = captured.of_kind(EventKind.DECISION)
    assert [(d.decision, d.backoff_ms) for d in decisions] == [(Decision.RETRY_BACKOFF, 250)] * 2


def test_a_shadow_candidate_is_just_another_chain() -> None:
    s = state_with(RetryPolicy(), ErrorType.TIMEOUT)
    candidate = stop_at_class_cap({ErrorType.TIMEOUT: 0}) | retry_by_class(wait=wait_exponential(1))
    verdict = shadow_verdict(candidate, s)
    assert verdict is not None and verdict.decision is Decision.GIVE_UP
    # a candidate policy is its compiled chain, whatever the live chain is
    live_only = stop_on_budget(TaskBudget(max_attempts=9)) | retry_by_class()
    by_policy = shadow_verdict(STRICT, s, live_only)
    assert by_policy is not None and by_policy.rule == "stop_unless_retryable"
    assert s.policy == RetryPolicy()  # the live state is untouched


def test_the_governor_follows_a_reloaded_policy_by_compiling_its_chain() -> None:
    source = PolicySource(parse_policy({"id": "v1", "caps": {"timeout": 2}, "budget": {"max_attempts": 9}}))

    def slow() -> None:
        raise TimeoutError("slow")

    with capture_events() as captured:
        gov = Governor.with_virtual_time(source, emit=captured.emit, start=_start())
        with pytest.raises(GaveUp):
            gov.call(slow, goal="g", agent="a")
        source.set(parse_policy({"id": "v2", "caps": {"timeout": 0}, "budget": {"max_attempts": 9}}))
        with pytest.raises(GaveUp):
            gov.call(slow, goal="g", agent="a")
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
    by_policy = [e.policy_id for e in failed]
    assert by_policy.count("v1") == 3 and by_policy.count("v2") == 1


def test_role_overrides_compile_into_the_roles_own_chain() -> None:
    policy = parse_policy({"caps": {"timeout": 3}, "roles": {"fast": {"caps": {"timeout": 0}}}})

    def slow() -> None:
        raise TimeoutError("slow")

    with capture_events() as captured:
        gov = Governor.with_virtual_time(policy, emit=captured.emit, start=_start())
        for role in ("fast", "slow"):
            with pytest.raises(GaveUp):
                gov.call(slow, goal="g", agent=AgentRef(name=role, role=role))
        failed = captured.of_kind(EventKind.ATTEMPT_FAILED)
    assert [e.agent.name for e in failed].count("fast") == 1
    assert [e.agent.name for e in failed].count("slow") == 4


def _start():  # noqa: ANN202
    from datetime import UTC, datetime

    return datetime(2026, 11, 1, tzinfo=UTC)
