"""pydantic-ai: an agent run whose model turns are RetryLens operations, governed.

    result = run_governed_sync(agent, "refund order 7", governor, agent_name="support",
                               usage_limits=UsageLimits(request_limit=8))

Mapping (read from the run's own nodes, ``Agent.iter``; pydantic-ai keeps its loop):

- every model turn (a ``ModelRequestNode``) is one operation, a RetryLens task; a clean
  multi-turn run (tool call, then the answer) is several first attempts, no retries;
- ``ModelRetry`` — raised by a tool (the next request answers the call with
  ``ToolReturnPart(outcome='retried')``), by an output validator or by failed output
  validation (a ``RetryFeedbackPart``/``RetryPromptPart``) — fails the turn's attempt
  (``validation``: the tool rejected the model's call; ``schema_mismatch``: its output), and the governor decides: a retrying verdict lets
  pydantic-ai re-ask the model (attempt n+1, after the verdict's backoff; pydantic-ai's
  own retry feedback is the new context — a rebuild or patch the governor chose is
  recorded, not applied to pydantic-ai's message history); a stop (kill
  switch, budget, known-bad input, hand-off) ends the run with the governor's
  :class:`~retrylens.errors.TaskStopped`;
- ``UsageLimitExceeded`` fails the attempt as ``budget_exhausted`` with a give-up decision;
  :func:`usage_limits` adds the governor policy's token budget to a ``UsageLimits``;
  pydantic-ai's own "exceeded max retries" ends the operation with a give-up as well;
- token usage of each model response is the attempt's usage;
- the retries the model's client would make by itself (openai's ``max_retries=2`` on a 429,
  a 529, a timeout) are the governor's: each request is one attempt of the turn, and the
  policy decides whether the next is sent (attempt budget, fleet budget, breaker; the
  backoff honouring ``Retry-After``); when it stops, pydantic-ai gets the client's own
  error, as when the client's retries run out (:mod:`.providers.client_retries`).

pydantic-ai is imported only inside the functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrylens.schemas import Decision, TaskOutcome

from ..core import attempt_scope
from ..core.verdicts import Verdict
from ..text.sanitizer import Failure
from .providers.client_retries import ClientRetries

if TYPE_CHECKING:
    from ..core.governor import Governor, TaskRun
    from ..core.state import Attempt


class _Turn(ClientRetries):
    """A model turn's task run and attempt in progress (the client's own retries advance it)."""

    __slots__ = ("tokens_in", "tokens_out")

    def __init__(self, run: TaskRun, attempt: Attempt) -> None:
        super().__init__(run, attempt)
        self.tokens_in = 0
        self.tokens_out = 0


def usage_limits(governor: Governor, base: Any = None) -> Any:
    """``base`` (a pydantic-ai ``UsageLimits``) with the policy's token budget where it has none."""
    from pydantic_ai.usage import UsageLimits

    limits = base if base is not None else UsageLimits()
    budget = governor.policy.budget
    if budget.max_tokens is not None and limits.total_tokens_limit is None:
        limits = _replace(limits, total_tokens_limit=budget.max_tokens)
    return limits


async def run_governed(
    agent: Any,
    prompt: Any,
    governor: Governor,
    *,
    agent_name: str | None = None,
    goal: str | None = None,
    dependency: str = "",
    **run_kwargs: Any,
) -> Any:
    """``agent.run(prompt, **run_kwargs)`` with every model turn recorded and governed."""
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import UnexpectedModelBehavior, UsageLimitExceeded

    name = agent_name or getattr(agent, "name", None) or "pydantic-ai-agent"
    model = dependency or _model_name(agent, run_kwargs)
    turn: _Turn | None = None
    # this task records each model turn: observe() must not record the requests again (the
    # retries the model's client would make are the governor's, each an attempt of the turn)
    recorded = attempt_scope.recorded.set(True)
    try:
        async with agent.iter(prompt, **run_kwargs) as agent_run:
            async for node in agent_run:
                if Agent.is_model_request_node(node):
                    failure = _retry_failure(node.request.parts)
                    if turn is not None and failure is not None:
                        verdict = turn.run.fail(turn.attempt, failure, **_usage(turn))
                        await turn.run.await_backoff(verdict)
                        turn.restart(turn.run.begin())
                        turn.tokens_in, turn.tokens_out = 0, 0
                        attempt_scope.recorded.set(turn)  # the request is sent next
                        continue
                    if turn is not None:
                        _succeed(turn)
                    run = governor.start(
                        goal or _text(prompt), agent=name, dependency=model, compact=True
                    )
                    turn = _Turn(run, run.begin())
                    # the node's model request is sent as the run advances: the client's
                    # own retries of it are attempts of this turn
                    attempt_scope.recorded.set(turn)
                elif Agent.is_call_tools_node(node) and turn is not None:
                    attempt_scope.recorded.set(True)  # tools run next: not the model call
                    usage = getattr(node.model_response, "usage", None)
                    turn.tokens_in += int(getattr(usage, "input_tokens", 0) or 0)
                    turn.tokens_out += int(getattr(usage, "output_tokens", 0) or 0)
            if turn is not None:
                _succeed(turn)
                turn = None
            return agent_run.result
    except UsageLimitExceeded as exc:
        _give_up(turn, Failure("budget_exhausted", str(exc), code="UsageLimitExceeded"), exc)
        raise
    except UnexpectedModelBehavior as exc:
        _give_up(turn, Failure("tool_error", str(exc), code="UnexpectedModelBehavior"), exc)
        raise
    except BaseException as exc:
        if turn is not None and not turn.run.outcome:
            _give_up(turn, exc, exc)
        elif turn is not None:
            turn.run.finish(turn.run.outcome)
        raise
    finally:
        attempt_scope.recorded.reset(recorded)


def run_governed_sync(agent: Any, prompt: Any, governor: Governor, **kwargs: Any) -> Any:
    """:func:`run_governed` for synchronous code (runs its own event loop)."""
    import asyncio

    return asyncio.run(run_governed(agent, prompt, governor, **kwargs))


def _retry_failure(parts: Any) -> Failure | None:
    """The failure a request's retry parts report about the previous model response."""
    for part in parts or ():
        kind = type(part).__name__
        content = getattr(part, "content", "")
        text = content if isinstance(content, str) else _errors_text(content)
        if kind == "ToolReturnPart" and getattr(part, "outcome", None) == "retried":
            tool = getattr(part, "tool_name", "tool")
            return Failure("validation", f"ModelRetry from {tool}: {text}", code="ModelRetry")
        if kind in ("RetryFeedbackPart", "RetryPromptPart"):
            tool = getattr(part, "tool_name", None)
            if tool:
                return Failure("validation", f"ModelRetry from {tool}: {text}", code="ModelRetry")
            return Failure("schema_mismatch", f"output rejected: {text}", code="ModelRetry")
    return None


def _errors_text(content: Any) -> str:
    try:
        return "; ".join(str(e.get("msg", e)) for e in content)
    except (TypeError, AttributeError):
        return str(content)


def _usage(turn: _Turn) -> dict[str, int]:
    return {"tokens_in": turn.tokens_in, "tokens_out": turn.tokens_out}


def _succeed(turn: _Turn) -> None:
    turn.run.succeed(turn.attempt, **_usage(turn))
    turn.run.finish(TaskOutcome.SUCCEEDED)


def _give_up(turn: _Turn | None, failure: BaseException, error: BaseException) -> None:
    if turn is None:
        return
    if turn.run.outcome is None:
        turn.run.record_failure(turn.attempt, failure, **_usage(turn))
        reason = f"pydantic-ai ended the run: {type(error).__name__}: {error}"[:512]
        turn.run.record_decision(turn.attempt, Verdict(Decision.GIVE_UP, reason))
    turn.run.finish(TaskOutcome.FAILED if turn.run.outcome is None else turn.run.outcome)


def _model_name(agent: Any, run_kwargs: dict[str, Any]) -> str:
    model = run_kwargs.get("model") or getattr(agent, "model", None)
    return str(getattr(model, "model_name", None) or model or "model")[:128]


def _text(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else str(prompt)


def _replace(limits: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(limits, **changes)
