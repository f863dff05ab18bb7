"""OpenAI Agents SDK: the runner's model retries (``ModelRetrySettings``) decided by the governor.

    model = governed_model(OpenAIResponsesModel(...), governor, agent="support")
    agent = Agent(name="support", model=model,
                  model_settings=ModelSettings(retry=retry_settings(model)))

Mapping (openai-agents 0.24, ``agents.retry``):

- every ``get_response``/``stream_response`` call of the wrapped model is one attempt; a call
  the runner makes after the retry policy said ``retry`` continues the same operation
  (attempt n+1), any other call starts a new operation (a RetryLens task), so a clean
  multi-turn run has no retries;
- a failed call is recorded (classified by the sanitizer) and the runner asks the policy
  :func:`retry_settings` installs: it returns the governor's verdict as a ``RetryDecision``
  (``delay`` = the verdict's backoff, ``reason`` = its reason), writes it as a decision
  event and applies it to the task as ``governor.call`` does (so the next wait grows as the
  policy's backoff says);
- ``replay_safety``: when the provider marks the failed request ``"unsafe"`` (it may already
  have done the work) or the request is stateful (``previous_response_id``/``conversation_id``)
  and not marked ``"safe"``, the runner vetoes a retry unless the application approves the
  replay; the policy records that as a give-up (``approve_unsafe_replay=True`` passes the
  approval on instead, and the governor decides);
- the runner's own limit lies one retry past the governor's task budget, so that the
  governor, not the runner, makes (and records) the last decision.

The SDK is imported only inside the functions.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from retrylens.schemas import Decision, TaskOutcome

from ..core import attempt_scope
from ..core.verdicts import Verdict, apply_verdict

if TYPE_CHECKING:
    from ..core.governor import Governor, TaskRun
    from ..core.state import Attempt

_STOPPED = {
    Decision.HANDOFF_HUMAN: TaskOutcome.HANDED_OFF,
    Decision.CANCEL_CHAIN: TaskOutcome.CANCELLED,
}


@dataclass
class _Operation:
    run: TaskRun
    attempt: Attempt
    retry_approved: bool = False


#: the operation the runner's policy just approved a retry of (in the runner's context)
_RETRYING: contextvars.ContextVar[_Operation | None] = contextvars.ContextVar(
    "retrylens_openai_agents_retrying", default=None
)


class _Governed:
    """The wrapper's logic; :func:`governed_model` adds the SDK's ``Model`` base class."""

    def __init__(
        self, model: Any, governor: Governor, *, agent: str, goal: str | None, dependency: str
    ) -> None:
        self.inner = model
        self.g = governor
        self.agent = agent
        self.goal = goal
        self.dependency = dependency or str(getattr(model, "model", None) or type(model).__name__)
        self._failed: dict[int, _Operation] = {}  # id(error) -> operation awaiting a verdict

    # -- Model -----------------------------------------------------------------------------
    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> Any:
        op = self._begin(system_instructions, input)
        token = attempt_scope.current.set(op.run)  # the client's requests: governed attempts
        try:
            response = await self.inner.get_response(system_instructions, input, *args, **kwargs)
        except Exception as exc:
            self._fail(op, exc)
            raise
        finally:
            attempt_scope.current.reset(token)
        self._succeed(op, getattr(response, "usage", None))
        return response

    async def stream_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        op = self._begin(system_instructions, input)
        usage = None
        events = self.inner.stream_response(system_instructions, input, *args, **kwargs)
        try:
            while True:
                # the client's requests are governed attempts, as in get_response; the scope
                # is set around each step only, never across a yield (the consumer's code
                # between events is not this attempt, and may run in another context)
                token = attempt_scope.current.set(op.run)
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    break
                finally:
                    attempt_scope.current.reset(token)
                response = getattr(event, "response", None)
                usage = getattr(response, "usage", None) or usage
                yield event
        except Exception as exc:
            self._fail(op, exc)
            raise
        self._succeed(op, usage)

    def get_retry_advice(self, request: Any) -> Any:
        advise = getattr(self.inner, "get_retry_advice", None)
        return advise(request) if advise is not None else None

    async def close(self) -> None:
        self.give_up_pending("the model was closed")
        await self.inner.close()

    # -- the runner's retry policy ---------------------------------------------------------
    def decide(self, context: Any, *, approve_unsafe_replay: bool = False) -> Any:
        """A ``RetryPolicy`` for ``ModelRetrySettings(policy=...)``: the governor's verdict."""
        from agents.retry import RetryDecision

        op = self._failed.pop(id(context.error), None)
        if op is None:
            return RetryDecision(retry=False, reason="retrylens: not a governed model call")
        replay = context.replay_safety
        blocked = not approve_unsafe_replay and (
            replay == "unsafe" or (context.stateful_request and replay != "safe")
        )
        if blocked:
            why = (
                "the provider marked it replay-unsafe"
                if replay == "unsafe"
                else ("it continues server-side state and is not marked replay-safe")
            )
            verdict = Verdict(Decision.GIVE_UP, f"openai-agents: no replay, {why}")
        else:
            verdict = op.run.decide()
        if verdict.retrying:  # as governor.call: counted (the next wait grows), then recorded
            apply_verdict(op.run.state, verdict)
        op.run.record_decision(op.attempt, verdict)
        if not verdict.retrying:
            op.run.finish(_STOPPED.get(verdict.decision, TaskOutcome.FAILED))
            return RetryDecision(retry=False, reason=verdict.reason)
        op.retry_approved = True
        _RETRYING.set(op)
        return RetryDecision(
            retry=True,
            delay=verdict.backoff_ms / 1000,
            reason=verdict.reason,
            approve_unsafe_replay=approve_unsafe_replay,
        )

    def give_up_pending(self, why: str) -> None:
        """Finish operations whose failure never reached the policy (the runner vetoed first)."""
        for op in list(self._failed.values()):
            op.run.record_decision(op.attempt, Verdict(Decision.GIVE_UP, f"openai-agents: {why}"))
            op.run.finish(TaskOutcome.FAILED)
        self._failed.clear()

    # -- internals -------------------------------------------------------------------------
    def _begin(self, system_instructions: Any, input: Any) -> _Operation:
        op = _RETRYING.get()
        if op is not None and op.retry_approved:
            op.retry_approved = False
            _RETRYING.set(None)
            op.attempt = op.run.begin()
            return op
        goal = self.goal or _goal(system_instructions, input)
        run = self.g.start(goal, agent=self.agent, dependency=self.dependency, compact=True)
        return _Operation(run, run.begin())

    def _succeed(self, op: _Operation, usage: Any) -> None:
        op.run.succeed(
            op.attempt,
            tokens_in=int(getattr(usage, "input_tokens", 0) or 0),
            tokens_out=int(getattr(usage, "output_tokens", 0) or 0),
        )
        op.run.finish(TaskOutcome.SUCCEEDED)

    def _fail(self, op: _Operation, error: Exception) -> None:
        op.run.record_failure(op.attempt, error)
        self._failed[id(error)] = op


_CLASS: type | None = None


def governed_model(
    model: Any,
    governor: Governor,
    *,
    agent: str = "openai-agent",
    goal: str | None = None,
    dependency: str = "",
) -> Any:
    """``model`` (an ``agents.Model``) with its calls recorded as governed attempts."""
    global _CLASS
    if _CLASS is None:
        from agents.models.interface import Model

        _CLASS = type("GovernedModel", (_Governed, Model), {})
    return _CLASS(model, governor, agent=agent, goal=goal, dependency=dependency)


def retry_settings(model: Any, *, approve_unsafe_replay: bool = False) -> Any:
    """``ModelRetrySettings`` whose policy is the governor of ``model`` (a governed model)."""
    from agents.retry import ModelRetrySettings

    governed: _Governed = model
    attempts = governed.g.policy.budget.most_attempts

    def policy(context: Any) -> Any:
        return governed.decide(context, approve_unsafe_replay=approve_unsafe_replay)

    return ModelRetrySettings(max_retries=attempts, policy=policy)


def _goal(system_instructions: Any, input: Any) -> str:
    if isinstance(input, str):
        return input
    for item in reversed(input or []):
        content = item.get("content") if isinstance(item, dict) else getattr(item, "content", None)
        if isinstance(content, str) and content:
            return content
    return str(system_instructions or "openai agent turn")
