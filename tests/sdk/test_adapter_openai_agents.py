"""The OpenAI Agents SDK runner with a fake ``Model`` (no network), its retries governed.

Assertions read the stored metrics (emitter → processor → ClickHouse) or the emitted events.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from adapter_store import recording
from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.retry import ModelRetryAdvice
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from retrylens.schemas import RETRYING_DECISIONS, Decision, EventKind, TaskOutcome
from retrylens.sdk import PolicySource, parse_policy
from retrylens.sdk.integrations.openai_agents import governed_model, retry_settings
from retrylens.store import EventStore

pytestmark = pytest.mark.clickhouse


@pytest.fixture(autouse=True)
def _no_trace_export() -> Any:
    set_tracing_disabled(True)  # the SDK would try to upload traces to OpenAI
    yield
    set_tracing_disabled(False)


class FakeModel(Model):
    """Answers every call; the call numbers in ``fail`` raise ``error`` instead."""

    def __init__(
        self, fail: set[int], error: Exception, *, unsafe: bool = False, tool_first: bool = False
    ) -> None:
        self.fail, self.error, self.unsafe, self.calls = fail, error, unsafe, 0
        self.tool_first = tool_first

    async def get_response(self, system: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        usage = Usage(requests=1, input_tokens=12, output_tokens=5, total_tokens=17)
        if self.calls in self.fail:
            raise type(self.error)(*self.error.args)
        if self.tool_first and not any(
            isinstance(i, dict) and i.get("type") == "function_call_output" for i in input
        ):
            call = ResponseFunctionToolCall(
                type="function_call", call_id="call_1", name="lookup", arguments='{"order": "7"}'
            )
            return ModelResponse(output=[call], usage=usage, response_id=None)
        text = ResponseOutputText(type="output_text", text=f"answer {self.calls}", annotations=[])
        message = ResponseOutputMessage(
            id=f"msg_{self.calls}",
            type="message",
            role="assistant",
            status="completed",
            content=[text],
        )
        return ModelResponse(output=[message], usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def get_retry_advice(self, request: Any) -> ModelRetryAdvice | None:
        return ModelRetryAdvice(replay_safety="unsafe") if self.unsafe else None


def _run(model: Any, prompt: str = "where is order 7?") -> Any:
    agent = Agent(
        name="support", model=model, model_settings=ModelSettings(retry=retry_settings(model))
    )
    return asyncio.run(Runner.run(agent, prompt))


def test_two_clean_runs_are_two_first_attempts_and_a_failed_call_once_is_one_retry(
    store: EventStore,
) -> None:
    fake = FakeModel({2}, ConnectionResetError("connection reset by peer"))
    with recording("oa-retry") as rec:
        model = governed_model(fake, rec.governor, agent="support")
        assert _run(model).final_output == "answer 1"
        assert _run(model, "and order 8?").final_output == "answer 3"
        metrics = rec.store(store)
        decisions = rec.captured.of_kind(EventKind.DECISION)
        succeeded = rec.captured.of_kind(EventKind.ATTEMPT_SUCCEEDED)
    assert (metrics.tasks, metrics.calls, metrics.failures) == (2, 3, 1)
    assert (metrics.retries, metrics.retry_successes, metrics.tasks_recovered) == (1, 1, 1)
    assert len(decisions) == 1 and decisions[0].decision in RETRYING_DECISIONS
    assert {(e.tokens_in, e.tokens_out) for e in succeeded} == {(12, 5)}


def test_the_governor_stops_what_the_runner_would_retry() -> None:
    source = PolicySource()
    source.kill(agent="support")
    fake = FakeModel({1, 2, 3}, ConnectionResetError("connection reset by peer"))
    with recording(policy=source) as rec:
        with pytest.raises(ConnectionResetError):
            _run(governed_model(fake, rec.governor, agent="support"))
        decisions = rec.captured.of_kind(EventKind.DECISION)
        outcomes = list(rec.captured.outcomes().values())
    assert fake.calls == 1 and outcomes == [TaskOutcome.FAILED]
    assert "kill switch" in (decisions[0].decision_reason or "")


def test_a_replay_unsafe_failure_is_a_recorded_give_up_unless_approved() -> None:
    fake = FakeModel({1}, ConnectionResetError("reset after the request was sent"), unsafe=True)
    with recording() as rec:
        model = governed_model(fake, rec.governor, agent="support")
        with pytest.raises(ConnectionResetError):
            _run(model)
        approved = Agent(
            name="support",
            model=model,
            model_settings=ModelSettings(retry=retry_settings(model, approve_unsafe_replay=True)),
        )
        fake.fail, fake.calls = {1}, 0
        assert asyncio.run(Runner.run(approved, "again")).final_output == "answer 2"
        decisions = rec.captured.of_kind(EventKind.DECISION)
    assert decisions[0].decision is Decision.GIVE_UP
    assert "replay-unsafe" in (decisions[0].decision_reason or "")
    assert decisions[1].decision in RETRYING_DECISIONS and len(decisions) == 2


def test_the_governor_budget_ends_the_retries_with_its_own_decision() -> None:
    fake = FakeModel(set(range(1, 20)), ConnectionResetError("connection reset by peer"))
    with recording() as rec:
        with pytest.raises(ConnectionResetError):
            _run(governed_model(fake, rec.governor, agent="support"))
        decisions = rec.captured.decisions()
        outcomes = list(rec.captured.outcomes().values())
    assert decisions[-1] not in RETRYING_DECISIONS and all(
        d in RETRYING_DECISIONS for d in decisions[:-1]
    )
    assert fake.calls == len(decisions) and outcomes == [TaskOutcome.FAILED]


def test_a_retried_call_then_a_tool_turn_keeps_the_turns_apart(store: EventStore) -> None:
    @function_tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"order {order} shipped"

    fake = FakeModel({1}, ConnectionResetError("connection reset by peer"), tool_first=True)
    with recording("oa-tools") as rec:
        model = governed_model(fake, rec.governor, agent="support")
        agent = Agent(
            name="support",
            model=model,
            tools=[lookup],
            model_settings=ModelSettings(retry=retry_settings(model)),
        )
        result = asyncio.run(Runner.run(agent, "where is order 7?"))
        metrics = rec.store(store)
    assert result.final_output == "answer 3" and fake.calls == 3
    # turn 1: failed, retried (the tool call); turn 2: the answer, a first attempt
    assert (metrics.tasks, metrics.calls, metrics.failures) == (2, 3, 1)
    assert (metrics.retries, metrics.retry_successes) == (1, 1)


def test_the_runner_waits_grow_as_the_policy_says_like_governor_call() -> None:
    """Same policy, same failures: the runner's delays are governor.call's (50, 100, 200, 400)."""
    policy = parse_policy(
        {"backoff": {"jitter": 0.0, "base_ms": 50, "cap_ms": 1_000}, "caps": {"network": 4}}
    )
    fake = FakeModel({1, 2, 3, 4}, ConnectionResetError("connection reset by peer"))
    with recording(policy=policy) as rec:
        assert _run(governed_model(fake, rec.governor, agent="support")).final_output == "answer 5"
        runner_waits = [e.backoff_ms for e in rec.captured.of_kind(EventKind.DECISION)]
    calls = iter([ConnectionResetError("connection reset by peer")] * 4)

    def flaky() -> str:
        error = next(calls, None)
        if error is not None:
            raise error
        return "done"

    with recording(policy=policy, sleep=lambda _s: None) as rec:
        assert rec.governor.call(flaky, goal="where is order 7?") == "done"
        call_waits = [e.backoff_ms for e in rec.captured.of_kind(EventKind.DECISION)]
    assert call_waits == [50, 100, 200, 400]
    assert runner_waits == call_waits
