"""LangChain without rewrites: a callback handler that emits events, and a runnable wrapper.

- ``RetryLensCallbackHandler`` — pass in ``config={"callbacks": [handler]}``. Every chat
  model, LLM or tool run is one *operation*: its own RetryLens task, whose first attempt is
  that run. Only a re-invocation after an error is a retry: a run with the same name under
  the same (logical) parent as a run that failed, as ``Runnable.with_retry()`` or a retry loop
  around ``invoke`` produce. A chain re-invoked after an error keeps its logical identity,
  so a model inside ``(prompt | model | parser).with_retry()`` is retried too. An output
  parser that rejects a model's output fails that model's attempt (``schema_mismatch``).
  Retries and give-ups are written as decision events (the decision is LangChain's, the
  handler records it; the measured gap is its backoff). Inside a model run, the retries
  its openai or anthropic client would make by itself are the governor's, each an attempt
  (:mod:`.providers.client_retries`); when the governor stops the task there, a re-invocation inside
  the chain (``with_retry``) sends nothing and raises the client's error again. Callbacks
  may come from several threads (``batch``, async runs in executors): all state is behind
  one lock.
- :func:`governed_runnable` — wraps any runnable so that the governor decides its retries
  (``OutputParserException`` → schema mismatch → a patched prompt, etc.).

Why the bookkeeping: metrics count attempt ≥ 2 as a retry, so numbering every model call of
a chain as the next attempt of one task (what this handler did first) turned three clean
calls into two "retries". LangChain itself is imported only when the handler is first used.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from retrylens.schemas import Decision, TaskOutcome

from ..core import attempt_scope
from ..core.verdicts import Verdict
from .langgraph import _is_pause
from .providers.client_retries import ClientRetries

if TYPE_CHECKING:
    from ..core.governor import Governor, TaskRun
    from ..core.state import Attempt

#: a gap shorter than this between a failure and its re-invocation is no backoff
_BACKOFF_FLOOR_MS = 5


@dataclass
class _Operation:
    """One model/tool operation: a task whose attempts are its (re-)invocations."""

    run: TaskRun
    key: tuple[UUID | None, str]
    ancestry: tuple[UUID, ...] = ()
    attempt: Attempt | None = None
    failed_at: float | None = None
    #: usage of a finished model run whose output a parser may still reject
    held: dict[str, int] = field(default_factory=dict)
    #: the client's error that ended the task when the governor stopped it inside the call
    stopped: BaseException | None = None
    #: where a LangGraph ``interrupt()`` in this run would resume it (see :func:`_pause_key`)
    pause_key: tuple[str, str, str] | None = None


class _Observer:
    """The handler's logic; ``RetryLensCallbackHandler`` adds LangChain's base class."""

    raise_error = False
    # in an async run LangChain would call a sync handler in an executor, with a copy of the
    # context: inline, the ``recorded`` mark reaches the model call (the work here is short)
    run_inline = True

    def __init__(
        self, governor: Governor, *, agent: str = "langchain-agent", goal: str | None = None
    ) -> None:
        self.g = governor
        self.agent = agent
        self.goal = goal
        self._lock = threading.RLock()
        self._logical: dict[UUID, UUID] = {}  # run id -> logical id (kept by a re-invocation)
        self._parent: dict[UUID, UUID | None] = {}
        self._key: dict[UUID, tuple[UUID | None, str]] = {}  # run id -> (logical parent, name)
        self._ancestry: dict[UUID, tuple[UUID, ...]] = {}  # run id -> logical ids above it
        self._errored: dict[tuple[UUID | None, str], list[tuple[UUID, tuple[UUID, ...]]]] = {}
        self._live: dict[UUID, _Operation] = {}  # running model/tool run id -> operation
        self._failed: dict[tuple[UUID | None, str], list[_Operation]] = {}
        #: operations the governor stopped inside a chain: a re-invocation is not sent
        self._stopped: dict[tuple[UUID | None, str], _Operation] = {}
        self._held: dict[UUID, list[_Operation]] = {}  # run id -> finished model runs below it
        self._parsers: set[UUID] = set()  # running output parsers
        #: runs a LangGraph ``interrupt()`` paused, by where the resumed graph runs them again
        self._paused: dict[tuple[str, str, str], _Operation] = {}

    # -- chains --------------------------------------------------------------------------
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            name = _name(serialized, kwargs, "chain")
            key = self._enter(run_id, parent_run_id, _rooted(name, parent_run_id, inputs))
            errored = self._errored.get(key)
            self._logical[run_id] = errored.pop(0)[0] if errored else run_id
            if kwargs.get("run_type") == "parser":
                self._parsers.add(run_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._pass_up(run_id)
            self._give_up_below(self._logical.get(run_id, run_id), "the chain went on without it")
            self._forget(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            parent = self._parent.get(run_id)
            if run_id in self._parsers and parent is not None:
                self._fail_latest_held(parent, error)
            self._pass_up(run_id)
            key = self._key.get(run_id)
            if key is not None and not _is_pause(error):
                entry = (self._logical.get(run_id, run_id), self._ancestry.get(run_id, ()))
                self._errored.setdefault(key, []).append(entry)
            self._forget(run_id)

    # -- models and tools ----------------------------------------------------------------
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        text = " ".join(str(getattr(m, "content", m)) for batch in messages for m in batch)
        self._start(run_id, parent_run_id, text, _name(serialized, kwargs, "chat_model"))
        self._record_client_retries(run_id)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, parent_run_id, " ".join(prompts), _name(serialized, kwargs, "llm"))
        self._record_client_retries(run_id)

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        name = _name(serialized, kwargs, "tool")
        self._start(run_id, parent_run_id, str(input_str), name, _pause_key(kwargs, name))

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        tokens_in, tokens_out = _usage(response)
        with self._lock:
            op = self._client_attempt(run_id)
            if op is not None and op.attempt is not None:
                latency = int((self.g.clock() - op.attempt.started_at) * 1000)
                op.held = {"tokens_in": tokens_in, "tokens_out": tokens_out, "latency_ms": latency}
                self._held.setdefault(run_id, []).append(op)
                self._pass_up(run_id)
            self._forget(run_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            op = self._live.pop(run_id, None)
            if op is not None and op.attempt is not None:
                self._succeed(op)
            self._forget(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._fail(self._client_attempt(run_id), error)
            self._forget(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """LangGraph's ``interrupt()`` in a tool is a pause: the graph waits for a person and
        runs the tool again on resume, which continues this task (no failure recorded)."""
        with self._lock:
            if _is_pause(error):
                op = self._live.pop(run_id, None)
                if op is not None and op.pause_key is not None:
                    self._paused[op.pause_key] = op
                    while len(self._paused) > _PAUSED_KEPT:
                        self._paused.pop(next(iter(self._paused)))
            else:
                self._fail(self._client_attempt(run_id), error)
            self._forget(run_id)

    def close(self) -> None:
        """Finish what is still open: held outputs succeed, failed runs nobody re-invoked give up."""
        with self._lock:
            for run_id in list(self._held):
                for op in self._held.pop(run_id):
                    self._succeed(op)
            for key in list(self._failed):
                for op in self._failed.pop(key):
                    self._give_up(op, "the failed run was not re-invoked before close()")
            self._errored.clear()
            self._stopped.clear()

    # -- internals -----------------------------------------------------------------------
    def _enter(
        self, run_id: UUID, parent_run_id: UUID | None, name: str
    ) -> tuple[UUID | None, str]:
        """Register a run; its key is (logical parent, name)."""
        logical_parent = None
        ancestry: tuple[UUID, ...] = ()
        if parent_run_id is not None:
            logical_parent = self._logical.get(parent_run_id, parent_run_id)
            ancestry = (*self._ancestry.get(parent_run_id, ()), logical_parent)
        key = (logical_parent, name)
        self._parent[run_id] = parent_run_id
        self._key[run_id] = key
        self._ancestry[run_id] = ancestry
        return key

    def _start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        goal: str,
        name: str,
        pause_key: tuple[str, str, str] | None = None,
    ) -> None:
        with self._lock:
            key = self._enter(run_id, parent_run_id, _rooted(name, parent_run_id, goal))
            self._logical[run_id] = run_id
            resumed = self._paused.pop(pause_key, None) if pause_key is not None else None
            if resumed is not None:  # the graph resumed after interrupt(): the same attempt
                resumed.ancestry = self._ancestry[run_id]
                self._live[run_id] = resumed
                return
            stopped = self._stopped.get(key)
            if stopped is not None:  # its request is refused (the recorder raises its error)
                stopped.ancestry = self._ancestry[run_id]
                self._live[run_id] = stopped
                return
            waiting = self._failed.get(key)
            if waiting:
                op = waiting.pop(0)
                assert op.attempt is not None
                gap_ms = max(0, int((self.g.clock() - (op.failed_at or 0.0)) * 1000))
                waited = gap_ms >= _BACKOFF_FLOOR_MS
                op.run.record_decision(
                    op.attempt,
                    Verdict(
                        Decision.RETRY_BACKOFF if waited else Decision.RETRY_SAME,
                        f"langchain re-invoked {name} {gap_ms} ms after it failed",
                        backoff_ms=gap_ms if waited else 0,
                    ),
                )
            else:
                run = self.g.start(
                    self.goal or goal, agent=self.agent, dependency=name, compact=True
                )
                op = _Operation(run, key)
            op.ancestry = self._ancestry[run_id]
            op.attempt = op.run.begin(dependency=name)
            op.failed_at = None
            op.pause_key = pause_key
            self._live[run_id] = op

    def _record_client_retries(self, run_id: UUID) -> None:
        """This model run is our attempt: observe() must skip it, and the retries its client
        would make are the governor's, each an attempt (the recorder runs the client's call)."""
        with self._lock:
            op = self._live.get(run_id)
        recorder = ClientRetries(op.run, op.attempt) if op and op.attempt else True
        if op is not None and op.stopped is not None and recorder is not True:
            recorder.stopped = op.stopped
        attempt_scope.recorded.set(recorder)

    def _client_attempt(self, run_id: UUID) -> _Operation | None:
        """The ended run's operation, its attempt the last one its client's retries began."""
        recorder = attempt_scope.recorded.get()
        attempt_scope.recorded.set(False)
        op = self._live.pop(run_id, None)
        if op is not None and isinstance(recorder, ClientRetries) and recorder.run is op.run:
            op.attempt = recorder.attempt
            op.stopped = recorder.stopped
        return op

    def _succeed(self, op: _Operation) -> None:
        assert op.attempt is not None
        op.run.succeed(op.attempt, **op.held)
        op.run.finish(TaskOutcome.SUCCEEDED)

    def _fail(
        self, op: _Operation | None, error: BaseException, latency_ms: int | None = None
    ) -> None:
        if op is None or op.attempt is None:
            return
        if op.stopped is not None:  # the governor stopped it inside the call: recorded, finished
            if op.key[0] is not None:  # inside a chain, whose retry would call it again
                self._stopped[op.key] = op
            return
        op.run.record_failure(op.attempt, error, latency_ms=latency_ms)
        op.failed_at = self.g.clock()
        self._failed.setdefault(op.key, []).append(op)

    def _fail_latest_held(self, parent: UUID, error: BaseException) -> None:
        """A parser under ``parent`` rejected an output: the latest model run's there."""
        held = self._held.get(parent)
        if held:
            op = held.pop()
            self._fail(op, error, latency_ms=op.held.get("latency_ms"))

    def _pass_up(self, run_id: UUID) -> None:
        """A run ended: the model outputs it holds move to its parent (a root accepts them)."""
        held = self._held.pop(run_id, [])
        parent = self._parent.get(run_id)
        if parent is not None and parent in self._parent:
            self._held.setdefault(parent, []).extend(held)
            return
        for op in held:
            self._succeed(op)

    def _give_up_below(self, logical: UUID, why: str) -> None:
        """A chain succeeded: failed runs inside it that were not re-invoked are given up."""
        for key in list(self._failed):
            keep = [op for op in self._failed[key] if logical not in op.ancestry]
            for op in self._failed[key]:
                if logical in op.ancestry:
                    self._give_up(op, why)
            if keep:
                self._failed[key] = keep
            else:
                del self._failed[key]
        for key in [k for k, op in self._stopped.items() if logical in op.ancestry]:
            del self._stopped[key]
        for key in list(self._errored):
            self._errored[key] = [e for e in self._errored[key] if logical not in e[1]]
            if not self._errored[key]:
                del self._errored[key]

    def _give_up(self, op: _Operation, why: str) -> None:
        assert op.attempt is not None
        op.run.record_decision(op.attempt, Verdict(Decision.GIVE_UP, f"langchain: {why}"))
        op.run.finish(TaskOutcome.FAILED)

    def _forget(self, run_id: UUID) -> None:
        self._parsers.discard(run_id)
        for table in (self._parent, self._key, self._ancestry, self._logical):
            table.pop(run_id, None)


def _handler_class() -> type[_Observer]:
    from langchain_core.callbacks import BaseCallbackHandler

    global _HANDLER
    if _HANDLER is None:
        _HANDLER = type("RetryLensCallbackHandler", (_Observer, BaseCallbackHandler), {})
    return _HANDLER


_HANDLER: type[_Observer] | None = None


def __getattr__(name: str) -> Any:
    if name == "RetryLensCallbackHandler":
        return _handler_class()
    raise AttributeError(name)


#: paused tool runs remembered (the oldest are forgotten first: a graph never resumed)
_PAUSED_KEPT = 1024


def _pause_key(callback_kwargs: dict[str, Any], name: str) -> tuple[str, str, str] | None:
    """Where a LangGraph run would run this tool again after ``interrupt()``: its thread and
    checkpoint namespace (from the run's metadata, the same on resume) and the tool's name.
    ``None`` outside a checkpointed graph, where an interrupt cannot be resumed."""
    metadata = callback_kwargs.get("metadata") or {}
    thread = metadata.get("thread_id")
    namespace = metadata.get("langgraph_checkpoint_ns", metadata.get("checkpoint_ns"))
    if thread is None or namespace is None:
        return None
    return str(thread), str(namespace), name


def _rooted(name: str, parent_run_id: UUID | None, inputs: Any) -> str:
    """A top-level run's key names its input too: a caller's retry loop repeats the input,
    while unrelated top-level calls of one model differ in it."""
    if parent_run_id is not None:
        return name
    digest = hashlib.blake2b(repr(inputs).encode(), digest_size=8).hexdigest()
    return f"{name}#{digest}"


def _usage(response: Any) -> tuple[int, int]:
    """Token counts from ``llm_output`` or the messages' ``usage_metadata``."""
    usage = (getattr(response, "llm_output", None) or {}).get("token_usage") or {}
    tokens_in, tokens_out = (
        int(usage.get("prompt_tokens", 0)),
        int(usage.get("completion_tokens", 0)),
    )
    if tokens_in or tokens_out:
        return tokens_in, tokens_out
    for batch in getattr(response, "generations", None) or []:
        for generation in batch:
            meta = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
            tokens_in += int(meta.get("input_tokens", 0))
            tokens_out += int(meta.get("output_tokens", 0))
    return tokens_in, tokens_out


def _name(serialized: dict[str, Any] | None, kwargs: dict[str, Any], default: str) -> str:
    if kwargs.get("name"):
        return str(kwargs["name"])[:128]
    if serialized:
        ident = serialized.get("id") or []
        return str(serialized.get("name") or (ident[-1] if ident else default))[:128]
    return default


def governed_runnable(
    runnable: Any,
    governor: Governor,
    *,
    agent: str = "langchain-agent",
    dependency: str = "",
    phase: str = "execution",
) -> Any:
    """``runnable`` with the governor deciding its retries; the attempt's context is its input."""
    from langchain_core.runnables import RunnableLambda

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
    from langchain_core.messages import HumanMessage, SystemMessage

    if not isinstance(value, str):
        return value
    out: list[Any] = []
    for message in attempt.messages:
        cls = HumanMessage if message.get("role") == "user" else SystemMessage
        out.append(cls(content=str(message.get("content", ""))))
    return out
