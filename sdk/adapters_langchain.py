"""LangChain without rewrites: a callback handler that emits events, and a runnable wrapper.

- :class:`RetryLensCallbackHandler` — pass in ``config={"callbacks": [handler]}``; each
  chat-model or tool call becomes an attempt (started / succeeded / failed) of a task
  keyed by the outermost LangChain run.
- :func:`governed_runnable` — wraps any runnable so that the governor decides its retries
  (``OutputParserException`` → schema mismatch → a patched prompt, etc.). The wrapped
  runnable receives the governor's context for the attempt when its input is a prompt
  string or a list of messages.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableLambda

from retrylens.schemas import TaskOutcome

from .governor import Governor, TaskRun
from .state import Attempt


class RetryLensCallbackHandler(BaseCallbackHandler):
    """Observe LangChain model and tool calls as RetryLens attempts."""

    raise_error = False

    def __init__(
        self, governor: Governor, *, agent: str = "langchain-agent", goal: str | None = None
    ) -> None:
        self.g = governor
        self.agent = agent
        self.goal = goal
        self._tasks: dict[UUID, TaskRun] = {}
        self._attempts: dict[UUID, tuple[TaskRun, Attempt]] = {}
        self._root: dict[UUID, UUID] = {}

    def _task(
        self, run_id: UUID, parent_run_id: UUID | None, goal: str, dependency: str
    ) -> TaskRun:
        root = self._root.get(parent_run_id, parent_run_id) if parent_run_id else run_id
        self._root[run_id] = root
        if root not in self._tasks:
            self._tasks[root] = self.g.start(
                self.goal or goal, agent=self.agent, dependency=dependency
            )
        return self._tasks[root]

    def _begin(
        self, run_id: UUID, parent_run_id: UUID | None, goal: str, dependency: str, phase: str
    ) -> None:
        run = self._task(run_id, parent_run_id, goal, dependency)
        self._attempts[run_id] = (run, run.begin(phase=phase, dependency=dependency))

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        text = " ".join(str(getattr(m, "content", m)) for batch in messages for m in batch)
        self._begin(
            run_id, parent_run_id, text, _name(serialized, kwargs, "chat_model"), "execution"
        )

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._begin(
            run_id, parent_run_id, " ".join(prompts), _name(serialized, kwargs, "llm"), "execution"
        )

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._begin(
            run_id, parent_run_id, input_str, _name(serialized, kwargs, "tool"), "execution"
        )

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        usage = (getattr(response, "llm_output", None) or {}).get("token_usage", {}) or {}
        self._succeed(
            run_id,
            tokens_in=int(usage.get("prompt_tokens", 0)),
            tokens_out=int(usage.get("completion_tokens", 0)),
        )

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._succeed(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._fail(run_id, error)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._fail(run_id, error)

    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        if parent_run_id is None and run_id in self._tasks:
            self._tasks.pop(run_id).finish(TaskOutcome.SUCCEEDED)

    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if parent_run_id is None and run_id in self._tasks:
            self._tasks.pop(run_id).finish(TaskOutcome.FAILED)

    def close(self) -> None:
        """Finish tasks whose root was a bare model call (no chain around it)."""
        for run in self._tasks.values():
            run.finish()
        self._tasks.clear()

    def _succeed(self, run_id: UUID, **usage: int) -> None:
        item = self._attempts.pop(run_id, None)
        if item is not None:
            item[0].succeed(item[1], **usage)

    def _fail(self, run_id: UUID, error: BaseException) -> None:
        item = self._attempts.pop(run_id, None)
        if item is not None:
            item[0].record_failure(item[1], error)


def _name(serialized: dict[str, Any] | None, kwargs: dict[str, Any], default: str) -> str:
    if kwargs.get("name"):
        return str(kwargs["name"])[:128]
    if serialized:
        ident = serialized.get("id") or []
        return str(serialized.get("name") or (ident[-1] if ident else default))[:128]
    return default


def governed_runnable(
    runnable: Runnable[Any, Any],
    governor: Governor,
    *,
    agent: str = "langchain-agent",
    dependency: str = "",
    phase: str = "execution",
) -> Runnable[Any, Any]:
    """``runnable`` with the governor deciding its retries; the attempt's context is its input."""

    def invoke(value: Any) -> Any:
        goal = value if isinstance(value, str) else str(value)

        def attempt_once(attempt: Attempt) -> Any:
            return runnable.invoke(_to_input(value, attempt))

        return governor.call(
            attempt_once, goal=goal, agent=agent, dependency=dependency, phase=phase
        )

    return RunnableLambda(invoke, name=f"governed_{getattr(runnable, 'name', None) or 'runnable'}")


def _to_input(value: Any, attempt: Attempt) -> Any:
    """A string input becomes the attempt's messages (so patches and rebuilds reach the model)."""
    if not isinstance(value, str):
        return value
    out: list[Any] = []
    for message in attempt.messages:
        cls = HumanMessage if message.get("role") == "user" else SystemMessage
        out.append(cls(content=str(message.get("content", ""))))
    return out
