"""pydantic-ai agents on its own FunctionModel/TestModel (no network), run governed.

Assertions read the stored metrics (emitter → processor → ClickHouse) or the emitted events.
"""

from __future__ import annotations

import pytest
from adapter_store import recording
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import UsageLimits

from retrylens.errors import TaskStopped
from retrylens.schemas import RETRYING_DECISIONS, Decision, EventKind, TaskOutcome
from retrylens.sdk import PolicySource, parse_policy
from retrylens.sdk.integrations.pydantic_ai import run_governed_sync, usage_limits
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse


def _tool_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call ``lookup`` until it returns, then answer with what it returned."""
    last = messages[-1].parts[-1]
    if type(last).__name__ == "ToolReturnPart" and getattr(last, "outcome", "") == "success":
        return ModelResponse(parts=[TextPart(f"done: {last.content}")])
    return ModelResponse(parts=[ToolCallPart("lookup", {"order": "7"})])


def _agent(failures: int, **kwargs: object) -> tuple[Agent, list[str]]:
    calls: list[str] = []
    agent = Agent(FunctionModel(_tool_then_answer), name="support", **kwargs)  # type: ignore[arg-type]

    @agent.tool_plain
    def lookup(order: str) -> str:
        calls.append(order)
        if len(calls) <= failures:
            raise ModelRetry(f"order {order} is locked, try again")
        return f"order {order} shipped"

    return agent, calls


def test_a_clean_tool_turn_and_answer_are_two_first_attempts(store: EventStore) -> None:
    agent, calls = _agent(0)
    with recording("pa-clean") as rec:
        result = run_governed_sync(agent, "where is order 7?", rec.governor)
        metrics = rec.store(store)
    assert result.output == "done: order 7 shipped" and calls == ["7"]
    assert (metrics.tasks, metrics.calls, metrics.retries, metrics.failures) == (2, 2, 0, 0)


def test_model_retry_from_a_tool_is_a_failed_attempt_and_the_re_ask_its_retry(
    store: EventStore,
) -> None:
    agent, calls = _agent(1, retries=3)
    with recording("pa-retry") as rec:
        result = run_governed_sync(agent, "where is order 7?", rec.governor)
        metrics = rec.store(store)
        failed = rec.captured.of_kind(EventKind.ATTEMPT_FAILED)
        decisions = rec.captured.of_kind(EventKind.DECISION)
    assert result.output == "done: order 7 shipped" and calls == ["7", "7"]
    assert [(f.attempt, f.error_type.value) for f in failed] == [(1, "validation")]
    assert "locked" in (failed[0].error_detail.message if failed[0].error_detail else "")
    assert len(decisions) == 1 and decisions[0].decision in RETRYING_DECISIONS
    assert (metrics.tasks, metrics.calls, metrics.failures) == (2, 3, 1)
    assert (metrics.retries, metrics.retry_successes, metrics.tasks_recovered) == (1, 1, 1)


def test_the_governor_stops_model_retries_pydantic_ai_would_make() -> None:
    source = PolicySource()
    source.kill(agent="support")
    agent, calls = _agent(5, retries=5)
    with recording(policy=source) as rec:
        with pytest.raises(TaskStopped):
            run_governed_sync(agent, "where is order 7?", rec.governor)
        decisions = rec.captured.of_kind(EventKind.DECISION)
        outcomes = list(rec.captured.outcomes().values())
    assert calls == ["7"]
    assert "kill switch" in (decisions[0].decision_reason or "")
    assert outcomes == [TaskOutcome.FAILED]


def test_a_usage_limit_ends_the_operation_as_budget_exhausted() -> None:
    agent, calls = _agent(9, retries=9)
    with recording(policy=parse_policy({"budget": {"max_attempts": 9}})) as rec:
        with pytest.raises(UsageLimitExceeded):
            run_governed_sync(
                agent, "where is order 7?", rec.governor, usage_limits=UsageLimits(request_limit=2)
            )
        failed = rec.captured.of_kind(EventKind.ATTEMPT_FAILED)
        decisions = rec.captured.of_kind(EventKind.DECISION)
    assert [f.error_type.value for f in failed] == ["validation", "validation", "budget_exhausted"]
    assert decisions[-1].decision is Decision.GIVE_UP and "UsageLimit" in (
        decisions[-1].decision_reason or ""
    )
    assert len(calls) == 2


def test_usage_limits_carry_the_policy_token_budget_and_test_model_runs_clean() -> None:
    with recording(policy=parse_policy({"budget": {"max_tokens": 5000}})) as rec:
        limits = usage_limits(rec.governor, UsageLimits(request_limit=4))
        agent = Agent(TestModel(custom_output_text="fine"), name="echo")
        result = run_governed_sync(agent, "hi", rec.governor, usage_limits=limits)
        events = rec.events()
    assert (limits.total_tokens_limit, limits.request_limit) == (5000, 4)
    assert result.output == "fine"
    compact = [e for e in events if e.kind is EventKind.ATTEMPT_SUCCEEDED]
    assert len(events) == 1 and compact[0].tokens_in + compact[0].tokens_out > 0


def test_model_retry_from_an_output_validator_is_a_schema_mismatch_of_the_turn() -> None:
    answers = iter(["twelve", "12"])
    agent = Agent(
        FunctionModel(lambda m, i: ModelResponse(parts=[TextPart(next(answers))])), name="calc"
    )

    @agent.output_validator
    def digits_only(output: str) -> str:
        if not output.isdigit():
            raise ModelRetry("answer with digits only")
        return output

    with recording() as rec:
        result = run_governed_sync(agent, "what is 7+5?", rec.governor)
        failed = rec.captured.of_kind(EventKind.ATTEMPT_FAILED)
        outcomes = list(rec.captured.outcomes().values())
        attempts = [e.attempt for e in rec.captured.of_kind(EventKind.ATTEMPT_SUCCEEDED)]
    assert result.output == "12"
    assert [(f.attempt, f.error_type.value) for f in failed] == [(1, "schema_mismatch")]
    assert "digits only" in (failed[0].error_detail.message if failed[0].error_detail else "")
    assert outcomes == [TaskOutcome.SUCCEEDED] and attempts == [2]
