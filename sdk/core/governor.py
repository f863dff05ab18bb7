"""The retry governor: decides every retry explicitly and records each decision as an event.

    governor = Governor(load_policy("policy.yaml"), project="shop", emit=emitter.emit)
    answer = governor.call(ask_model, goal=question, agent="support", dependency="gpt-4o")

A call whose first attempt succeeds takes a fast path (:mod:`~retrylens.sdk.core.first_try`):
no task state is built and ONE compact ``attempt_succeeded`` event records the whole task.
Any failure switches to the full path and the full event sequence.

For full control (the simulated fleet, custom loops) drive a :class:`TaskRun` yourself::

    with governor.start(goal, agent="support") as run:
        while True:
            attempt = run.begin(phase="execution", dependency="gpt-4o")
            try:
                result = work(attempt.messages, scope=attempt.scope)
            except Exception as exc:
                run.wait(run.fail(attempt, exc))   # raises TaskStopped when it stops
                continue
            run.succeed(attempt, result)
            break

Time, sleep and randomness are injected (``clock``, ``wall``, ``sleep``, ``asleep``,
``rng``), so tests and the simulated fleet never really sleep and replay exactly. Without
an ``rng``, ids come from ``os.urandom`` (:mod:`~retrylens.sdk.core.ids`), unique across forks.
"""

from __future__ import annotations

import functools
import logging
import random
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from retrylens.schemas.limits import MAX_REASON_CHARS
from retrylens.schemas.taxonomy import EventKind

from .chain import ChainRegistry
from .events import EventFactory, utc_now_ms
from .first_try import FirstTry
from .history import FailureHistory
from .ids import IdSource, SeededIds, SystemIds
from .policy_source import PolicySource
from .tools import GovernorTools
from .tools import current_run as current_run  # re-exported: the public name lives here

# What a governor uses only once made (its rules, processors, key store, breakers), on a
# failure (task state, context hygiene) or at a hand-off loads then, not with the import:
# ``from retrylens.sdk import Governor`` stays cheap (bench/sdk_import.py,
# tests/sdk/test_sdk_import_cost.py).
if TYPE_CHECKING:
    from retrylens.schemas import AgentRef, RetryEvent

    from ..text.context import ContextBuilder, Message
    from ..text.features import task_features
    from ..text.processors import Processor
    from ..transport.handoff import HandoffChannel
    from .breaker import CircuitBreaker
    from .budget import PerDependency, RetryThrottle, TaskLedger
    from .policy import RetryPolicy
    from .rule_chain import Rule
    from .run import TaskRun
    from .side_effects import KeyStore
    from .state import TaskState

log = logging.getLogger(__name__)
T = TypeVar("T")


def _otel_configured() -> bool:
    """Whether the application set a real global OpenTelemetry tracer provider.

    Never imports OpenTelemetry: an application that configured it has imported it already.
    """
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    return type(provider).__name__ not in {"ProxyTracerProvider", "NoOpTracerProvider"}


async def _asyncio_sleep(seconds: float) -> None:
    """``asyncio.sleep``, imported on first use: agents that never await load no asyncio."""
    import asyncio

    await asyncio.sleep(seconds)


class Governor(GovernorTools):
    """One per agent process; thread-safe. See the module docstring for both APIs."""

    def __init__(
        self,
        policy: RetryPolicy | PolicySource | None = None,
        *,
        project: str = "default",
        emit: Callable[[RetryEvent], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] | None = None,
        sleep: Callable[[float], object] = time.sleep,
        asleep: Callable[[float], Awaitable[object]] | None = None,
        rng: random.Random | None = None,
        key_store: KeyStore | None = None,
        handoff: HandoffChannel | None = None,
        preflight: Any = None,
        history: FailureHistory | None = None,
        rules: Rule | None = None,
        validate_events: bool = True,
        processors: list[Processor] | None = None,
        otel: bool | None = None,
        hook_timeout_s: float = 30.0,
        bound_sync_hooks: bool = False,
    ) -> None:
        """``otel``: record tasks and attempts as OpenTelemetry spans (:mod:`~retrylens.sdk.integrations.otel`); ``None``
        does so when the application has set a global OpenTelemetry SDK tracer provider.
        ``hook_timeout_s``: how long an async verify/rollback or a hand-off channel may take
        before the governor records it as failed. ``bound_sync_hooks``: bound a sync verify/rollback
        the same way, by running it in a worker thread (off by default: inline, in the caller's
        thread, it may use thread-bound resources such as a SQLite connection; on, it must not,
        and a hook that hangs past the timeout is abandoned, still running, in its thread)."""
        from ..text import features as _features  # noqa: F401 - loaded now, not on the first call
        from ..text.processors import default_processors
        from .breaker import CircuitBreaker
        from .budget import PerDependency, RetryThrottle
        from .policy_chain import default_rules
        from .side_effects import MemoryKeyStore

        if not isinstance(bound_sync_hooks, bool):
            raise TypeError(f"bound_sync_hooks must be a bool, got {bound_sync_hooks!r}")
        if not isinstance(policy, PolicySource):
            if policy is None:
                from .policy import RetryPolicy  # pydantic loads with the first policy

                policy = RetryPolicy()
            policy = PolicySource(policy)
        self.source = policy
        self.project = project
        from ..integrations.providers import (
            provider_hook,  # provider clients' own retries become governed attempts
        )

        provider_hook.install()
        from . import unawaited  # a coroutine governed code drops unawaited is no success

        unawaited.install()
        self._emit = emit or (lambda event: None)
        if otel if otel is not None else _otel_configured():
            from ..integrations.otel import traced

            self._emit = traced(self._emit)
        self.clock = clock
        self.sleep = sleep
        self.asleep = asleep or _asyncio_sleep
        self.rng = rng or random.Random()
        self.ids: IdSource = SeededIds(rng) if rng is not None else SystemIds()
        self.key_store: KeyStore = key_store or MemoryKeyStore()
        self.handoff_channel = handoff
        self.hook_timeout_s = hook_timeout_s
        self.bound_sync_hooks = bound_sync_hooks
        self.preflight = preflight
        self.history = history or FailureHistory()
        self.rules = rules or default_rules()
        self.chains = ChainRegistry()
        self.throttles: PerDependency[RetryThrottle] = PerDependency(
            lambda: RetryThrottle(self.policy.fleet_budget)
        )
        self.breakers: PerDependency[CircuitBreaker] = PerDependency(
            lambda: CircuitBreaker(self.policy.breaker, self.clock)
        )
        # redact → truncate (→ your sampling hook): applied to every event before it leaves
        self.processors: list[Processor] = (
            default_processors() if processors is None else list(processors)
        )
        wall = wall or utc_now_ms
        self.events = EventFactory(
            project=project, wall=wall, rng=self.rng, validate=validate_events, ids=self.ids
        )

    @classmethod
    def with_virtual_time(
        cls, policy: RetryPolicy | PolicySource | None = None, *, start: datetime, **kwargs: Any
    ) -> Governor:
        """A governor on a virtual clock: ``sleep`` advances time instead of waiting."""
        from .clock import VirtualClock

        clock = VirtualClock()
        return cls(
            policy,
            clock=clock,
            wall=lambda: start + timedelta(seconds=clock()),
            sleep=clock.advance,
            asleep=clock.aadvance,
            **kwargs,
        )

    # -- environment read by rules -------------------------------------------------------
    @property
    def policy(self) -> RetryPolicy:
        return self.source.current

    def now(self) -> float:
        return self.clock()

    def breaker_open(self, dependency: str) -> bool:
        return self.breakers[dependency].is_open()

    def retry_allowed(self, dependency: str) -> bool:
        return self.throttles[dependency].allows_retry()

    def fingerprint_failures(self, fingerprint: str) -> int:
        return self.history.failures(fingerprint)

    def can_handoff(self) -> bool:
        return self.handoff_channel is not None

    def emit(self, event: RetryEvent) -> None:
        try:
            for processor in self.processors:  # ``process``, inline: seven events a retry
                event = processor(event)  # type: ignore[assignment]
                if event is None:
                    return
            self._emit(event)
        except Exception:  # noqa: BLE001 - observability must never break the agent
            log.exception("emitting a retry event failed")

    def observe_success(self, dependency: str) -> None:
        """Feed a successful call of ``dependency`` to its breaker and retry throttle."""
        self.breakers[dependency].record(True)
        self.throttles[dependency].record(True)

    # -- tasks ---------------------------------------------------------------------------
    def start(
        self,
        goal: str,
        *,
        agent: str | AgentRef,
        task_id: str | None = None,
        phase: str = "execution",
        dependency: str = "",
        parent: TaskRun | None = None,
        system: str = "",
        history: list[Message] | tuple[Message, ...] = (),
        tools: tuple[str, ...] | list[str] = (),
        features: dict[str, Any] | None = None,
        success_check: Callable[[Any], bool] | None = None,
        compact: bool = False,
    ) -> TaskRun:
        """Begin a governed task (``parent`` makes it a sub-agent sharing the parent's budget).

        ``compact=True`` records a clean first-try success as one compact event instead
        of four (see :mod:`~retrylens.sdk.core.run`); it delays task_started until the first
        attempt ends, so leave it off where a long attempt must be visible while it runs.
        """
        return self._open(
            goal,
            agent=agent,
            task_id=task_id,
            phase=phase,
            dependency=dependency,
            parent=parent,
            system=system,
            history=history,
            tools=tools,
            features=features,
            success_check=success_check,
            compact=compact,
        )

    def _open(
        self,
        goal: str,
        *,
        agent: str | AgentRef,
        task_id: str | None = None,
        phase: str = "execution",
        dependency: str = "",
        parent: TaskRun | None = None,
        system: str = "",
        history: list[Message] | tuple[Message, ...] = (),
        tools: tuple[str, ...] | list[str] = (),
        features: dict[str, Any] | None = None,
        success_check: Callable[[Any], bool] | None = None,
        compact: bool = False,
        ts: datetime | None = None,
        source_policy: RetryPolicy | None = None,
    ) -> TaskRun:
        """:meth:`start`, plus ``compact`` (hold events back for the compact form), ``ts``, and
        ``source_policy``: the policy a first try already ran under (a reload since then is
        adopted for the decision, while the first attempt's events keep their own)."""
        if _TASK_RUN is None:  # the loop's machinery and task state load with the first task run
            _load_drivers()
        agent_ref = _agent_ref(agent) if isinstance(agent, str) else agent
        source_policy = source_policy or self.policy
        policy = source_policy.for_role(agent_ref.role)
        fingerprint, feats = task_features(goal, agent_ref.name, dependency, tuple(tools))
        if features is not None:
            feats = features
        task_id = task_id or f"task-{self.ids.hex(16)}"
        if parent is not None:
            ledger, root = parent.state.ledger, parent.root
            trace_id, parent_task = parent.state.trace_id, parent.state.task_id
        else:
            ledger = TaskLedger(started_at=self.clock())  # shared with sub-agents via parent
            root, trace_id, parent_task = task_id, self.ids.hex(32), None
        state = TaskState(
            task_id=task_id,
            project=self.project,
            agent=agent_ref,
            goal=goal,
            fingerprint=fingerprint,
            features=feats,
            trace_id=trace_id,
            root_span_id=self.ids.hex(16),
            parent_task_id=parent_task,
            success_check=success_check,
            policy=policy,
            ledger=ledger,
            env=self,
            rng=self.rng,
            phase=phase,
            dependency=dependency,
            context=ContextBuilder.for_input(goal, system=system, history=history),
        )
        run = _TASK_RUN(self, state, root=root, compact=compact, source_policy=source_policy)
        if self.preflight is not None:
            self.preflight.adapt(run)
            if state.preflight_note:
                run._release()  # the note goes on task_started, which compaction would drop
        self.chains.join(task_id, root)
        run._event(
            EventKind.TASK_STARTED,
            span_id=state.root_span_id,
            input_features=feats,
            decision_reason=state.preflight_note[:MAX_REASON_CHARS],
            **({"ts": ts} if ts is not None else {}),
        )
        return run

    def _first_try(
        self,
        goal: str,
        agent: str | AgentRef,
        phase: str,
        dependency: str,
        task_id: str | None,
        wants_attempt: bool,
    ) -> FirstTry | None:
        """A fast-path first attempt, or ``None`` when this call needs its TaskRun from the start.

        It does when the function takes ``attempt=`` (it reads the built context), when a
        pre-flight check adapts the task, when the dependency has a fallback (its breaker
        routes the call), or when the given task id was already cancelled.
        """
        if (
            wants_attempt
            or self.preflight is not None
            or (dependency and dependency in self.policy.fallbacks)
            or (dependency and self.breakers[dependency].is_open())
        ):
            return None
        if task_id is not None:
            self.chains.join(task_id, task_id)
            if self.chains.is_cancelled(task_id):
                return None
        return FirstTry(self, goal, agent, phase, dependency, task_id)

    def call(
        self,
        fn: Callable[..., T],
        /,
        *args: Any,
        goal: str | None = None,
        agent: str | AgentRef = "agent",
        phase: str = "execution",
        dependency: str = "",
        task_id: str | None = None,
        **kwargs: Any,
    ) -> T:
        """Run ``fn`` under the governor; ``fn`` gets ``attempt=`` if it has such a parameter.

        A task whose first attempt succeeds is recorded as one compact event (see
        :mod:`~retrylens.sdk.core.first_try`); any failure records the full event sequence.
        The attempt loop is :mod:`~retrylens.sdk.core.loop`, performed by :mod:`.drivers`.
        """
        goal = goal if goal is not None else _describe_call(fn, args, kwargs)
        wants_attempt = _accepts_attempt(fn)
        return (_DRIVERS or _load_drivers()).call(
            self, fn, args, kwargs, goal, agent, phase, dependency, task_id, wants_attempt
        )

    async def acall(
        self,
        fn: Callable[..., Awaitable[T]],
        /,
        *args: Any,
        goal: str | None = None,
        agent: str | AgentRef = "agent",
        phase: str = "execution",
        dependency: str = "",
        task_id: str | None = None,
        parent: TaskRun | None = None,
        **kwargs: Any,
    ) -> T:
        """:meth:`call` for async code, the same loop driven by the asyncio driver;
        ``cancel_chain`` cancels the awaiting task."""
        goal = goal if goal is not None else _describe_call(fn, args, kwargs)
        wants_attempt = _accepts_attempt(fn)
        return await (_DRIVERS or _load_drivers()).acall(
            self, fn, args, kwargs, goal, agent, phase, dependency, task_id, wants_attempt, parent
        )

    def cancel_chain(self, task_id: str) -> list[str]:
        """Cancel ``task_id`` and every sub-agent of its chain (threads and asyncio)."""
        return self.chains.cancel(task_id)


_ATTEMPT_CACHE: dict[Any, bool] = {}

#: The drivers module and TaskRun, loaded with the first governed call (importing the governor
#: does not load the attempt loop). Kept here once loaded: an ``import`` statement inside ``call``
#: would run the import machinery on every call, about a tenth of a clean first try.
_DRIVERS: Any = None
_TASK_RUN: Any = None


def _load_drivers() -> Any:
    """Bind the attempt loop's machinery, and the task state ``_open`` builds, as this module's
    globals, once: the import does not load them, and a warm call runs no import machinery."""
    global _DRIVERS, _TASK_RUN, ContextBuilder, TaskLedger, TaskState, task_features
    from ..text.context import ContextBuilder
    from ..text.features import task_features
    from . import drivers
    from .budget import TaskLedger
    from .run import TaskRun
    from .state import TaskState

    _DRIVERS, _TASK_RUN = drivers, TaskRun
    return drivers


@functools.lru_cache(maxsize=1024)
def _agent_ref(name: str) -> AgentRef:
    """The (frozen, validated) reference of the agent called ``name``, built once per name."""
    from retrylens.schemas.event import AgentRef

    return AgentRef(name=name)


def _accepts_attempt(fn: Callable[..., object]) -> bool:
    key = getattr(fn, "__code__", fn)
    try:
        return _ATTEMPT_CACHE[key]
    except (KeyError, TypeError):
        from .effects import accepts

        value = accepts(fn, "attempt")
        try:
            _ATTEMPT_CACHE[key] = value
        except TypeError:
            pass
        return value


def _describe_call(fn: Callable[..., object], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    name = getattr(fn, "__qualname__", repr(fn))
    return f"{name}({', '.join([*map(repr, args), *(f'{k}={v!r}' for k, v in kwargs.items())])})"[
        :4000
    ]


#: names this module imported at its top before session 17, still importable from here
#: (``from retrylens.sdk.core.governor import VirtualClock``): name -> module relative to this one
_LAZY_NAMES: dict[str, str] = {
    "TaskRun": ".run",
    "ContextBuilder": "..text.context",
    "Message": "..text.context",
    "task_features": "..text.features",
    "Processor": "..text.processors",
    "default_processors": "..text.processors",
    "HandoffChannel": "..transport.handoff",
    "CircuitBreaker": ".breaker",
    "PerDependency": ".budget",
    "RetryThrottle": ".budget",
    "TaskLedger": ".budget",
    "VirtualClock": ".clock",
    "default_rules": ".policy_chain",
    "Rule": ".rule_chain",
    "KeyStore": ".side_effects",
    "MemoryKeyStore": ".side_effects",
    "TaskState": ".state",
}


def __getattr__(name: str) -> Any:
    """``TaskRun`` and the names in :data:`_LAZY_NAMES` are still importable from here; they
    load on first use (PEP 562), so importing the governor loads neither the attempt loop's
    machinery nor the text hygiene, rules and task state a governor needs only once made."""
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __package__), name)
