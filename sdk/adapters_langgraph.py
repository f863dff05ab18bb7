"""LangGraph: a node whose retries the governor decides, within a LangGraph ``RetryPolicy``.

    from langgraph.types import RetryPolicy
    graph.add_node("fetch", governed_node(fetch, governor, agent="researcher",
                                          retry_policy=RetryPolicy(max_attempts=4)))

instead of ``graph.add_node("fetch", fetch, retry_policy=RetryPolicy(max_attempts=4))``.

Why a node and not only a policy object: LangGraph's own retry loop (``run_with_retry``)
shows a policy nothing but the exception — not when an attempt starts, succeeds or what its
context is — and sleeps with ``time.sleep`` on its own schedule. The governed node runs the
attempts itself: every invocation of the node is one RetryLens task, each try an attempt;
``retry_on`` and ``max_attempts`` of the given policy (LangGraph's ``RetryPolicy`` shape,
or a sequence of them: the first whose ``retry_on`` matches applies) bound the retries;
inside those bounds the governor decides (kill switch, budgets, breaker, known-bad input,
context rebuild, prompt patch, hand-off) and its policy's backoff is the wait. A node that
takes an ``attempt`` parameter receives the governor's :class:`~retrylens.sdk.state.Attempt`
(its rebuilt ``messages``). When the retries end, the node raises the last error, as
LangGraph would. LangGraph is never imported here: the policy is read by attribute.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from retrylens.errors import TaskStopped
from retrylens.schemas import Decision, TaskOutcome

from . import attempt_scope
from .rules import Verdict

if TYPE_CHECKING:
    from .governor import Governor, TaskRun
    from .state import Attempt


def governed_node(
    fn: Callable[..., Any],
    governor: Governor,
    *,
    retry_policy: Any = None,
    agent: str = "langgraph-agent",
    dependency: str = "",
    goal: str | None = None,
    name: str | None = None,
) -> Callable[..., Any]:
    """``fn`` as a LangGraph node (sync or async) whose retries the governor decides."""
    node = name or getattr(fn, "__name__", "node")
    policies = _policies(retry_policy)
    wants_attempt = "attempt" in inspect.signature(fn).parameters

    def start() -> TaskRun:
        return governor.start(goal or f"langgraph node {node}", agent=agent, dependency=dependency)

    def call(attempt: Attempt, state: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return fn(state, *args, **({**kwargs, "attempt": attempt} if wants_attempt else kwargs))

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def anode(state: Any, *args: Any, **kwargs: Any) -> Any:
            with start() as run:
                while True:
                    attempt = run.begin(phase=node)
                    token = attempt_scope.current.set(run)  # provider requests: governed attempts
                    try:
                        result = await call(attempt, state, args, kwargs)
                    except Exception as exc:  # noqa: BLE001 - decided below, re-raised
                        await run.await_backoff(_after_failure(run, attempt, exc, policies))
                        continue
                    finally:
                        attempt_scope.current.reset(token)
                    run.succeed(attempt, result)
                    return result

        _drop_attempt(anode, wants_attempt)
        return anode

    @functools.wraps(fn)
    def snode(state: Any, *args: Any, **kwargs: Any) -> Any:
        with start() as run:
            while True:
                attempt = run.begin(phase=node)
                token = attempt_scope.current.set(run)  # provider requests: governed attempts
                try:
                    result = call(attempt, state, args, kwargs)
                except Exception as exc:  # noqa: BLE001 - decided below, re-raised
                    run.wait(_after_failure(run, attempt, exc, policies))
                    continue
                finally:
                    attempt_scope.current.reset(token)
                run.succeed(attempt, result)
                return result

    _drop_attempt(snode, wants_attempt)
    return snode


def _after_failure(
    run: TaskRun, attempt: Attempt, error: Exception, policies: list[Any]
) -> Verdict:
    """The verdict to retry with; raises ``error`` when the retries end here."""
    limit = _limit(policies, error, attempt.number)
    if limit is not None:
        run.record_failure(attempt, error)
        run.record_decision(attempt, Verdict(Decision.GIVE_UP, limit))
        run.finish(TaskOutcome.FAILED)
        raise error
    try:
        return run.fail(attempt, error)
    except TaskStopped:
        run.finish(run.outcome)
        raise error from None


def _limit(policies: list[Any], error: Exception, number: int) -> str | None:
    """Why the LangGraph policy allows no retry of ``error``, or ``None`` if it allows one."""
    if not policies:
        return None
    for policy in policies:
        if _retries_on(policy, error):
            most = int(getattr(policy, "max_attempts", 3))
            return f"langgraph max_attempts={most} reached" if number >= most else None
    return f"langgraph retry_on does not retry {type(error).__name__}"


def _retries_on(policy: Any, error: Exception) -> bool:
    """LangGraph's own ``_should_retry_on`` semantics; its default retries most errors."""
    retry_on = getattr(policy, "retry_on", None)
    if retry_on is None:
        return True
    if isinstance(retry_on, type):
        return isinstance(error, retry_on)
    if isinstance(retry_on, Sequence):
        return isinstance(error, tuple(retry_on))
    return bool(retry_on(error))


def _policies(retry_policy: Any) -> list[Any]:
    if retry_policy is None:
        return []
    if isinstance(retry_policy, Sequence) and not hasattr(retry_policy, "max_attempts"):
        return list(retry_policy)
    return [retry_policy]


def _drop_attempt(node: Callable[..., Any], wants_attempt: bool) -> None:
    """LangGraph reads the node's signature: hide ``attempt``, which the node supplies."""
    if not wants_attempt:
        return
    signature = inspect.signature(node)
    node.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name != "attempt"]
    )
