"""The retry governor: decides every retry explicitly and records each decision as an event.

    governor = Governor(load_policy("policy.yaml"), project="shop", emit=emitter.emit)
    answer = governor.call(ask_model, goal=question, agent="support", dependency="gpt-4o")

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
``rng``), so tests and the simulated fleet never really sleep and replay exactly.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from retrylens.schemas import (
    AgentRef,
    Decision,
    EventKind,
    RetryEvent,
    SideEffect,
    SideEffectStatus,
    TaskOutcome,
)

from .breaker import CircuitBreaker
from .budget import PerDependency, RetryThrottle, TaskLedger
from .chain import ChainRegistry
from .context import ContextBuilder, Message, snapshot
from .errors import ChainCancelled, GaveUp, HandedOff, TaskStopped
from .events import EventFactory, hex_id
from .features import extract_input_features, input_fingerprint
from .handoff import HandoffChannel, HandoffError, HandoffPackage
from .history import FailureHistory
from .hot_reload import PolicySource
from .policy import RetryPolicy
from .rules import Rule, Verdict, apply_verdict, default_rules, record_failure
from .sanitizer import Failure, classify
from .shadow import explore, shadow_verdict
from .side_effects import KeyRecord, KeyStore, MemoryKeyStore, idempotency_key
from .state import Attempt, TaskState

log = logging.getLogger(__name__)
T = TypeVar("T")
_current_run: contextvars.ContextVar[TaskRun | None] = contextvars.ContextVar("retrylens_run", default=None)


def current_run() -> TaskRun | None:
    """The task run of the governed call in progress (for side-effect decorators)."""
    return _current_run.get()


class Governor:
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
        asleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: random.Random | None = None,
        key_store: KeyStore | None = None,
        handoff: HandoffChannel | None = None,
        preflight: Any = None,
        history: FailureHistory | None = None,
        rules: Rule | None = None,
        validate_events: bool = True,
    ) -> None:
        self.source = policy if isinstance(policy, PolicySource) else PolicySource(policy or RetryPolicy())
        self.project = project
        self._emit = emit or (lambda event: None)
        self.clock = clock
        self.sleep = sleep
        self.asleep = asleep
        self.rng = rng or random.Random()
        self.key_store: KeyStore = key_store or MemoryKeyStore()
        self.handoff_channel = handoff
        self.preflight = preflight
        self.history = history or FailureHistory()
        self.rules = rules or default_rules()
        self.chains = ChainRegistry()
        self.throttles: PerDependency[RetryThrottle] = PerDependency(lambda: RetryThrottle(self.policy.fleet_budget))
        self.breakers: PerDependency[CircuitBreaker] = PerDependency(
            lambda: CircuitBreaker(self.policy.breaker, self.clock)
        )
        self._ledgers: dict[str, TaskLedger] = {}
        wall = wall or (lambda: datetime.now(UTC))
        self.events = EventFactory(project=project, wall=wall, rng=self.rng, validate=validate_events)

    @classmethod
    def with_virtual_time(cls, policy: RetryPolicy | PolicySource | None = None, *, start: datetime,
                          **kwargs: Any) -> Governor:
        """A governor on a virtual clock: ``sleep`` advances time instead of waiting."""
        clock = VirtualClock()
        return cls(policy, clock=clock, wall=lambda: start + timedelta(seconds=clock()), sleep=clock.advance,
                   asleep=clock.aadvance, **kwargs)

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
            self._emit(event)
        except Exception:  # noqa: BLE001 - observability must never break the agent
            log.exception("emitting a retry event failed")

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
    ) -> TaskRun:
        """Begin a governed task (``parent`` makes it a sub-agent sharing the parent's budget)."""
        agent_ref = agent if isinstance(agent, AgentRef) else AgentRef(name=agent)
        policy = self.policy.for_role(agent_ref.role)
        fingerprint, feats = _features(goal, agent_ref.name, dependency, tuple(tools))
        if features is not None:
            feats = features
        task_id = task_id or f"task-{hex_id(self.rng, 64)}"
        if parent is not None:
            ledger, root = parent.state.ledger, parent.root
            trace_id, parent_task = parent.state.trace_id, parent.state.task_id
        else:
            ledger = self._ledgers.get(task_id) or TaskLedger(started_at=self.clock())
            root, trace_id, parent_task = task_id, hex_id(self.rng, 128), None
        state = TaskState(
            task_id=task_id, project=self.project, agent=agent_ref, goal=goal, fingerprint=fingerprint,
            features=feats, trace_id=trace_id, root_span_id=hex_id(self.rng, 64), parent_task_id=parent_task,
            success_check=success_check, policy=policy, ledger=ledger, env=self, rng=self.rng, phase=phase,
            dependency=dependency, context=ContextBuilder.for_input(goal, system=system, history=history),
        )
        run = TaskRun(self, state, root=root)
        if self.preflight is not None:
            self.preflight.adapt(run)
        self.chains.join(task_id, root)
        run._event(EventKind.TASK_STARTED, span_id=state.root_span_id, input_features=feats)
        return run

    def call(self, fn: Callable[..., T], /, *args: Any, goal: str | None = None, agent: str | AgentRef = "agent",
             phase: str = "execution", dependency: str = "", task_id: str | None = None, **kwargs: Any) -> T:
        """Run ``fn`` under the governor; ``fn`` gets ``attempt=`` if it has such a parameter."""
        run = self.start(goal if goal is not None else _describe_call(fn, args, kwargs), agent=agent,
                         phase=phase, dependency=dependency, task_id=task_id)
        wants_attempt = _accepts_attempt(fn)
        with run:
            while True:
                attempt = run.begin()
                token = _current_run.set(run)
                try:
                    result = fn(*args, **({**kwargs, "attempt": attempt} if wants_attempt else kwargs))
                except Exception as exc:  # noqa: BLE001 - every failure is classified
                    run.wait(run.fail(attempt, exc))
                    continue
                finally:
                    _current_run.reset(token)
                run.succeed(attempt, result)
                return result

    async def acall(self, fn: Callable[..., Awaitable[T]], /, *args: Any, goal: str | None = None,
                    agent: str | AgentRef = "agent", phase: str = "execution", dependency: str = "",
                    task_id: str | None = None, parent: TaskRun | None = None, **kwargs: Any) -> T:
        """The asyncio twin of :meth:`call`; ``cancel_chain`` cancels the awaiting task."""
        run = self.start(goal if goal is not None else _describe_call(fn, args, kwargs), agent=agent,
                         phase=phase, dependency=dependency, task_id=task_id, parent=parent)
        self.chains.attach_current_task(run.state.task_id)
        wants_attempt = _accepts_attempt(fn)
        with run:
            while True:
                attempt = run.begin()
                token = _current_run.set(run)
                try:
                    result = await fn(*args, **({**kwargs, "attempt": attempt} if wants_attempt else kwargs))
                except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001
                    if isinstance(exc, asyncio.CancelledError) and not self.chains.is_cancelled(run.state.task_id):
                        raise
                    await run.await_backoff(run.fail(attempt, exc))
                    continue
                finally:
                    _current_run.reset(token)
                run.succeed(attempt, result)
                return result

    def governed(self, *, agent: str | AgentRef = "agent", phase: str = "execution",
                 dependency: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of :meth:`call` / :meth:`acall` (picks by ``async def``)."""

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            import functools

            if inspect.iscoroutinefunction(fn):
                @functools.wraps(fn)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    return await self.acall(fn, *args, agent=agent, phase=phase, dependency=dependency, **kwargs)

                return async_wrapper

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return self.call(fn, *args, agent=agent, phase=phase, dependency=dependency, **kwargs)

            return wrapper

        return decorate

    def cancel_chain(self, task_id: str) -> list[str]:
        """Cancel ``task_id`` and every sub-agent of its chain (threads and asyncio)."""
        return self.chains.cancel(task_id)

    def side_effect(self, tool: str, *, step: str | None = None,
                    rollback: Callable[..., object] | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator for a side-effecting tool used inside a governed call (see side_effects)."""
        import functools

        def decorate(fn: Callable[..., T]) -> Callable[..., T]:
            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> T:
                run = current_run()
                if run is None:
                    raise RuntimeError(f"{tool}: side effects must run inside a governed call")
                return run.side_effect(tool, fn, *args, step=step or tool, rollback=rollback, **kwargs)

            return wrapper

        return decorate


class TaskRun:
    """One governed task: begin / fail / succeed attempts, then finish (or use ``with``)."""

    def __init__(self, governor: Governor, state: TaskState, *, root: str) -> None:
        self.g = governor
        self.state = state
        self.root = root
        self.outcome: TaskOutcome | None = None
        self.last_attempt: Attempt | None = None
        self.verdicts: list[Verdict] = []
        self._debts: list[tuple[str, str, Callable[[], object]]] = []
        self._logged_full = False
        self._observed: set[str] = set()

    def __repr__(self) -> str:
        return f"<TaskRun {self.state!r} outcome={self.outcome}>"

    # -- attempts ------------------------------------------------------------------------
    def begin(self, *, phase: str | None = None, dependency: str | None = None) -> Attempt:
        """Start the next attempt: pays failure debt, checks cancellation, builds the context."""
        s = self.state
        if self.g.chains.is_cancelled(s.task_id):
            verdict = Verdict(Decision.CANCEL_CHAIN, "the task chain was cancelled before the attempt")
            self._stop(verdict, None)
        self._pay_debts()
        if phase is not None:
            s.phase = phase
        if dependency is not None:
            s.dependency = s.substitutions.get(dependency, dependency)
        if s.dependency:
            s.dependency = self.route(s.dependency)
        self._observed = set()
        s.attempt += 1
        s.ledger.charge(attempts=1)
        messages = s.next_messages()
        s.record_given(messages)
        attempt = Attempt(
            number=s.attempt, phase=s.phase, dependency=s.dependency, correlation_id=hex_id(self.g.rng, 64),
            span_id=hex_id(self.g.rng, 64), started_at=self.g.clock(), messages=messages, scope=s.scope,
            relaxed=s.relaxed, patch=s.patch, degraded=s.degraded,
        )
        self.last_attempt = attempt
        self._event(EventKind.ATTEMPT_STARTED, attempt=attempt)
        return attempt

    def succeed(self, attempt: Attempt, output: Any = None, *, tokens_in: int = 0, tokens_out: int = 0,
                cost_usd: float = 0.0, latency_ms: int | None = None) -> None:
        s = self.state
        self._spend(tokens_in + tokens_out, cost_usd)
        if attempt.dependency and attempt.dependency not in self._observed:
            self.observe(attempt.dependency, True)
        s.consecutive_failures = 0
        s.last_validation = "ok"
        self._event(EventKind.ATTEMPT_SUCCEEDED, attempt=attempt, tokens_in=tokens_in, tokens_out=tokens_out,
                    cost_usd=cost_usd, latency_ms=self._latency(attempt, latency_ms),
                    context_snapshot=self._snapshot(attempt, on_failure=False) if attempt.number > 1 else None)
        self.outcome = TaskOutcome.SUCCEEDED

    def route(self, dependency: str) -> str:
        """The dependency to call now: its fallback if degraded to it or if its breaker is open."""
        s = self.state
        dependency = s.substitutions.get(dependency, dependency)
        fallback = s.policy.fallbacks.get(dependency)
        if fallback and not self.g.breakers[dependency].allow():
            s.substitutions[dependency] = fallback
            s.degraded = True
            return fallback
        return dependency

    def observe(self, dependency: str, success: bool) -> None:
        """Feed one call's outcome to the dependency's breaker and retry throttle."""
        self._observed.add(dependency)
        self.g.breakers[dependency].record(success)
        self.g.throttles[dependency].record(success)

    def fail(self, attempt: Attempt, error: BaseException, *, tokens_in: int = 0, tokens_out: int = 0,
             cost_usd: float = 0.0, latency_ms: int | None = None, phase: str | None = None,
             dependency: str | None = None) -> Verdict:
        """Record a failed attempt and decide. Returns a retrying verdict or raises TaskStopped.

        ``phase``/``dependency`` say where the attempt failed when it moved on from where it began.
        """
        self.record_failure(attempt, error, tokens_in=tokens_in, tokens_out=tokens_out,
                                      cost_usd=cost_usd, latency_ms=latency_ms, phase=phase, dependency=dependency)
        s = self.state
        verdict = self.g.rules(s) or Verdict(Decision.GIVE_UP, "no rule allows another attempt")
        shadow = self._shadow(verdict)
        propensity = None
        epsilon = s.policy.shadow.exploration
        if epsilon > 0:
            explored = explore(verdict, s, epsilon, self.g.rng)
            verdict, propensity = explored.verdict, explored.propensity
        if verdict.retrying:
            apply_verdict(s, verdict)
        self.record_decision(attempt, verdict, shadow=shadow, propensity=propensity)
        if not verdict.retrying:
            self._stop(verdict, error)
        return verdict

    def record_failure(self, attempt: Attempt, error: BaseException, *, tokens_in: int = 0, tokens_out: int = 0,
                       cost_usd: float = 0.0, latency_ms: int | None = None, phase: str | None = None,
                       dependency: str | None = None) -> Failure:
        """Classify and record a failure (event, breaker, budget) without deciding (adapters use this)."""
        s = self.state
        if phase is not None:
            s.phase = attempt.phase = phase
        if dependency is not None:
            s.dependency = attempt.dependency = s.substitutions.get(dependency, dependency)
        if isinstance(error, asyncio.CancelledError) or self.g.chains.is_cancelled(s.task_id):
            failure = Failure("cancelled", "cancelled by cancel_chain", retryable=False)
        else:
            failure = classify(error)
        s.last_failure = failure
        s.last_validation = failure.error_type.value
        self._spend(tokens_in + tokens_out, cost_usd)
        if attempt.dependency and failure.error_type.value in _DEPENDENCY_FAULTS:
            self.observe(attempt.dependency, False)
        record_failure(s, failure.safe_message())
        self._event(EventKind.ATTEMPT_FAILED, attempt=attempt, error_type=failure.error_type,
                    retryable=bool(failure.retryable) and failure.error_type in s.policy.retryable,
                    error_detail=failure.detail(), tokens_in=tokens_in, tokens_out=tokens_out, cost_usd=cost_usd,
                    latency_ms=self._latency(attempt, latency_ms),
                    context_snapshot=self._snapshot(attempt, on_failure=True))
        return failure

    def record_decision(self, attempt: Attempt, verdict: Verdict, *, shadow: Decision | None = None,
                        propensity: float | None = None) -> None:
        """Emit the decision event for ``verdict`` (decided here or by an adapted library)."""
        s = self.state
        s.decisions.append(verdict.decision)
        self.verdicts.append(verdict)
        self._event(EventKind.DECISION, attempt=attempt, decision=verdict.decision, decision_reason=verdict.reason,
                    backoff_ms=verdict.backoff_ms,
                    error_type=s.last_failure.error_type if s.last_failure else None,
                    shadow=shadow is not None, shadow_decision=shadow, propensity=propensity, degraded=s.degraded)

    def decide(self) -> Verdict:
        """What the live rules would decide now (read-only; adapters use it to veto retries)."""
        return self.g.rules(self.state) or Verdict(Decision.GIVE_UP, "no rule allows another attempt")

    def wait(self, verdict: Verdict) -> None:
        if verdict.backoff_ms:
            self.g.sleep(verdict.backoff_ms / 1000)

    async def await_backoff(self, verdict: Verdict) -> None:
        if verdict.backoff_ms:
            await self.g.asleep(verdict.backoff_ms / 1000)

    # -- task layer ----------------------------------------------------------------------
    def complete_step(self, name: str, output: Any = None, *, fact: str | None = None) -> None:
        """Record a verified sub-step; later attempts skip it and carry ``fact``."""
        self.state.completed_steps[name] = output
        if fact:
            self.state.context.add_fact(fact)

    def step_done(self, name: str) -> bool:
        return name in self.state.completed_steps

    def check_cancelled(self) -> None:
        """For cooperative sync code: raise :class:`ChainCancelled` if the chain was cancelled."""
        if self.g.chains.is_cancelled(self.state.task_id):
            self._stop(Verdict(Decision.CANCEL_CHAIN, "the task chain was cancelled"), None)

    def side_effect(self, tool: str, fn: Callable[..., T], /, *args: Any, step: str | None = None,
                    rollback: Callable[..., object] | None = None, key: str | None = None, **kwargs: Any) -> T:
        """Run a side-effecting call at most once per key (see :mod:`side_effects`)."""
        s = self.state
        key = key or idempotency_key(s.task_id, step or tool, {"args": args, "kwargs": kwargs})
        store = self.g.key_store
        record = store.get(key)
        if record is not None and record.status is SideEffectStatus.COMMITTED:
            self._side_effect_event(tool, key, SideEffectStatus.SKIPPED_DUPLICATE)
            return record.result  # type: ignore[no-any-return]
        store.put(KeyRecord(key, s.task_id, tool, SideEffectStatus.INTENDED))
        call_kwargs = {**kwargs, "idempotency_key": key} if _accepts(fn, "idempotency_key") else kwargs
        try:
            result = fn(*args, **call_kwargs)
        except BaseException:
            store.put(KeyRecord(key, s.task_id, tool, SideEffectStatus.FAILED))
            self._side_effect_event(tool, key, SideEffectStatus.FAILED, rollback=_name(rollback))
            if rollback is not None:
                self._debts.append((tool, key, lambda: rollback(*args, **kwargs)))
            raise
        store.put(KeyRecord(key, s.task_id, tool, SideEffectStatus.COMMITTED, result))
        self._side_effect_event(tool, key, SideEffectStatus.COMMITTED)
        return result

    def finish(self, outcome: TaskOutcome | None = None) -> None:
        """Emit ``task_finished`` once; failed/handed-off tasks feed the fingerprint history."""
        if getattr(self, "_finished", False):
            return
        self._finished = True
        s = self.state
        outcome = outcome or self.outcome or TaskOutcome.FAILED
        self.outcome = outcome
        self.g.history.record(s.fingerprint, failed=outcome in (TaskOutcome.FAILED, TaskOutcome.HANDED_OFF))
        self._event(EventKind.TASK_FINISHED, span_id=s.root_span_id, outcome=outcome,
                    tokens_in=0, tokens_out=0, cost_usd=round(s.cost_usd, 6), degraded=s.degraded,
                    decision_reason=f"{s.attempt} attempts, {s.tokens} tokens")
        self.g.chains.leave(s.task_id)

    def __enter__(self) -> TaskRun:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self.finish()
        elif isinstance(exc, TaskStopped):
            self.finish(self.outcome)
        else:
            self.finish(TaskOutcome.CANCELLED if isinstance(exc, asyncio.CancelledError) else TaskOutcome.FAILED)

    # -- internals -----------------------------------------------------------------------
    def _stop(self, verdict: Verdict, error: BaseException | None) -> None:
        s = self.state
        if verdict.decision is Decision.HANDOFF_HUMAN:
            self.outcome = TaskOutcome.HANDED_OFF
            self._handoff(verdict)
            raise HandedOff(s.task_id, verdict, error)
        if verdict.decision is Decision.CANCEL_CHAIN:
            self.outcome = TaskOutcome.CANCELLED
            self.g.cancel_chain(s.task_id)
            raise ChainCancelled(s.task_id, verdict, error)
        self.outcome = TaskOutcome.FAILED
        raise GaveUp(s.task_id, verdict, error)

    def _handoff(self, verdict: Verdict) -> None:
        s = self.state
        reason = verdict.reason
        package = HandoffPackage(
            project=s.project, agent=s.agent.name, task_id=s.task_id, reason=verdict.reason, inputs=s.goal,
            context=self.last_attempt.messages if self.last_attempt else [], outputs=dict(s.completed_steps),
            errors=[{"attempt": f.attempt, "phase": f.phase, "error_type": f.error_type.value, "summary": f.summary}
                    for f in s.failures],
            attempts=s.attempt, policy=f"{s.policy.id}@{s.policy.version}",
        )
        if self.g.handoff_channel is not None:
            try:
                self.g.handoff_channel.send(package)
            except HandoffError as exc:
                reason = f"{reason} (channel failed: {exc})"
        self._event(EventKind.HANDOFF, decision=Decision.HANDOFF_HUMAN, decision_reason=reason[:512])

    def _shadow(self, live: Verdict) -> Decision | None:
        candidate = self.state.policy.candidate() if self.state.policy.shadow.candidate else None
        if candidate is None:
            return None
        verdict = shadow_verdict(candidate, self.state, self.g.rules)
        return verdict.decision if verdict else Decision.GIVE_UP

    def _pay_debts(self) -> None:
        while self._debts:
            tool, key, undo = self._debts.pop(0)
            try:
                undo()
            except Exception:  # noqa: BLE001
                log.exception("rollback of %s (%s) failed", tool, key)
                self._side_effect_event(tool, key, SideEffectStatus.FAILED, rollback="failed")
                continue
            self.g.key_store.put(KeyRecord(key, self.state.task_id, tool, SideEffectStatus.ROLLED_BACK))
            self._side_effect_event(tool, key, SideEffectStatus.ROLLED_BACK, rollback="done")

    def _spend(self, tokens: int, cost: float) -> None:
        self.state.tokens += tokens
        self.state.cost_usd += cost
        self.state.ledger.charge(tokens=tokens, cost_usd=cost)

    def _latency(self, attempt: Attempt, latency_ms: int | None) -> int:
        if latency_ms is not None:
            return max(0, int(latency_ms))
        return max(0, int((self.g.clock() - attempt.started_at) * 1000))

    def _snapshot(self, attempt: Attempt, *, on_failure: bool) -> Any:
        """Log-noise rule: the task's first failure carries the full snapshot, later ones deltas."""
        given = self.state.given
        previous = given[-2] if len(given) >= 2 else None
        if on_failure and not self._logged_full:
            self._logged_full = True
            return snapshot(attempt.messages)
        if previous is None:
            return snapshot(attempt.messages, last=0)
        return snapshot(attempt.messages, previous=previous)

    def _side_effect_event(self, tool: str, key: str, status: SideEffectStatus, rollback: str | None = None) -> None:
        self._event(EventKind.SIDE_EFFECT, attempt=self.last_attempt,
                    side_effects=[SideEffect(tool=tool[:128], idempotency_key=key, status=status, rollback=rollback)])

    def _event(self, kind: EventKind, *, attempt: Attempt | None = None, span_id: str | None = None,
               **fields: Any) -> None:
        s = self.state
        if attempt is not None:
            fields.setdefault("phase", attempt.phase)
            fields.setdefault("dependency", attempt.dependency)
            correlation, span = attempt.correlation_id, attempt.span_id
        else:
            correlation, span = f"{s.task_id}:{s.attempt}"[:128], span_id or s.root_span_id
        self.g.emit(self.g.events.make(s, kind, correlation_id=correlation, span_id=span, **fields))


@functools.lru_cache(maxsize=1024)
def _features(goal: str, agent: str, model: str, tools: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """Fingerprint and features of a task input, memoised: agents retry the same inputs a lot."""
    return input_fingerprint(goal), extract_input_features(goal, agent=agent, model=model, tools=tools)


_DEPENDENCY_FAULTS = {"timeout", "rate_limit", "server_error", "network"}


def _name(fn: Callable[..., object] | None) -> str | None:
    return getattr(fn, "__name__", "rollback")[:128] if fn is not None else None


def _accepts(fn: Callable[..., object], name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


_ATTEMPT_CACHE: dict[Any, bool] = {}


def _accepts_attempt(fn: Callable[..., object]) -> bool:
    key = getattr(fn, "__code__", fn)
    try:
        return _ATTEMPT_CACHE[key]
    except (KeyError, TypeError):
        value = _accepts(fn, "attempt")
        try:
            _ATTEMPT_CACHE[key] = value
        except TypeError:
            pass
        return value


def _describe_call(fn: Callable[..., object], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    name = getattr(fn, "__qualname__", repr(fn))
    return f"{name}({', '.join([*map(repr, args), *(f'{k}={v!r}' for k, v in kwargs.items())])})"[:4000]


class VirtualClock:
    """A clock that only moves when told to: ``sleep`` becomes ``advance``."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += max(0.0, seconds)

    def set(self, t: float) -> None:
        self.t = max(self.t, t)

    async def aadvance(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)
