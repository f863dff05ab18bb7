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
takes an ``attempt`` parameter receives the governor's :class:`~retrylens.sdk.core.state.Attempt`
(its rebuilt ``messages``). When the retries end, the node raises the last error, as
LangGraph would. ``interrupt()`` (human in the loop) is a pause, not a failure: the task
stays open and the resumed node continues it (see :class:`_Task`). LangGraph is never
imported here: the policy is read by attribute, its modules looked up once loaded.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from retrylens.errors import TaskStopped
from retrylens.schemas import Decision, TaskOutcome

from ..core import attempt_scope
from ..core.verdicts import Verdict

if TYPE_CHECKING:
    from ..core.governor import Governor, TaskRun
    from ..core.state import Attempt


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

    paused: OrderedDict[tuple[str, str, str], tuple[TaskRun, Attempt]] = OrderedDict()

    def resume_or_start() -> tuple[_Task, Attempt | None]:
        """The task this invocation continues (a node resumed after ``interrupt()``), or a new one."""
        key = _pause_key(node)
        if key is not None and key in paused:
            run, attempt = paused.pop(key)
            return _Task(run, key, paused), attempt
        return _Task(start(), key, paused), None

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def anode(state: Any, *args: Any, **kwargs: Any) -> Any:
            task, attempt = resume_or_start()
            with task as run:
                while True:
                    attempt = attempt or run.begin(phase=node)
                    token = attempt_scope.current.set(run)  # provider requests: governed attempts
                    try:
                        result = await call(attempt, state, args, kwargs)
                    except Exception as exc:  # noqa: BLE001 - decided below, re-raised
                        if _is_pause(exc):
                            task.pause(attempt)
                            raise
                        await run.await_backoff(_after_failure(run, attempt, exc, policies))
                        attempt = None
                        continue
                    finally:
                        attempt_scope.current.reset(token)
                    run.succeed(attempt, result)
                    return result

        _drop_attempt(anode, wants_attempt)
        return anode

    @functools.wraps(fn)
    def snode(state: Any, *args: Any, **kwargs: Any) -> Any:
        task, attempt = resume_or_start()
        with task as run:
            while True:
                attempt = attempt or run.begin(phase=node)
                token = attempt_scope.current.set(run)  # provider requests: governed attempts
                try:
                    result = call(attempt, state, args, kwargs)
                except Exception as exc:  # noqa: BLE001 - decided below, re-raised
                    if _is_pause(exc):
                        task.pause(attempt)
                        raise
                    run.wait(_after_failure(run, attempt, exc, policies))
                    attempt = None
                    continue
                finally:
                    attempt_scope.current.reset(token)
                run.succeed(attempt, result)
                return result

    _drop_attempt(snode, wants_attempt)
    return snode


class _Task:
    """A node's task: finished when the node returns or fails, kept open when it pauses.

    LangGraph's ``interrupt()`` raises ``GraphInterrupt`` (a ``GraphBubbleUp``, which
    LangGraph never retries): the graph checkpoints and waits for a person. That is no
    failure — no attempt is recorded as failed, nothing is handed off — and when the graph
    resumes, the node runs again from its start: the same task goes on, in the same attempt.
    """

    _KEEP = 1024  # paused tasks remembered per node (the oldest are forgotten first)

    def __init__(
        self,
        run: TaskRun,
        key: tuple[str, str, str] | None,
        paused: OrderedDict[tuple[str, str, str], tuple[TaskRun, Attempt]],
    ) -> None:
        self.run, self.key, self.paused, self.pausing = run, key, paused, False

    def pause(self, attempt: Attempt) -> None:
        self.pausing = True
        if self.key is not None:
            self.paused[self.key] = (self.run, attempt)
            while len(self.paused) > self._KEEP:
                self.paused.popitem(last=False)

    def __enter__(self) -> TaskRun:
        return self.run

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if not self.pausing:
            self.run.__exit__(exc_type, exc, tb)


def _is_pause(error: BaseException) -> bool:
    """Whether ``error`` is LangGraph's control flow (``interrupt()``, a parent command)."""
    errors = sys.modules.get("langgraph.errors")
    bubble = getattr(errors, "GraphBubbleUp", None)
    return bubble is not None and isinstance(error, bubble)


def _pause_key(node: str) -> tuple[str, str, str] | None:
    """Where this node invocation runs (thread and checkpoint namespace): a resumed node has
    the same, which is how it finds its paused task. ``None`` outside a checkpointed graph."""
    config_module = sys.modules.get("langgraph.config")
    if config_module is None:
        return None
    try:
        configurable = config_module.get_config().get("configurable", {})
    except Exception:  # noqa: BLE001 - not inside a graph run
        return None
    thread = configurable.get("thread_id")
    if thread is None:
        return None
    return str(thread), str(configurable.get("checkpoint_ns", "")), node


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
