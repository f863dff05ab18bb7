"""One governed task: begin / fail / succeed attempts, decide, then finish.

A :class:`TaskRun` is what :meth:`Governor.start` returns and what ``Governor.call``
drives once a task needs more than a clean first attempt. It owns the task's
:class:`~retrylens.sdk.state.TaskState`, asks the governor's rules for a verdict after
each failure, guards side effects with idempotency keys, and records every step as an
event through the governor.

A run opened in *compact* mode (``Governor.call`` / ``acall`` do) holds back
task_started, attempt_started and a first-try success; if the task then finishes as
succeeded they become ONE compact ``attempt_succeeded`` event (see
:mod:`retrylens.schemas.event`), otherwise they are emitted, in order, before the next one.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Callable, Generator, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from retrylens.errors import ChainCancelled, GaveUp, HandedOff, HandoffError, TaskStopped
from retrylens.schemas.limits import MAX_REASON_CHARS
from retrylens.schemas.taxonomy import (
    Decision,
    ErrorType,
    EventKind,
    SideEffectStatus,
    TaskOutcome,
)

from .chain import is_async_cancellation
from .context import digest, digests_and_pollution
from .handoff import HandoffPackage
from .rules import Verdict, apply_verdict, record_failure, stop_verdict
from .sanitizer import Failure, classify
from .shadow import explore, shadow_verdict
from .side_effects import KeyRecord, MemoryKeyStore, idempotency_key
from .state import Attempt, TaskState
from .usage import usage_of

if TYPE_CHECKING:
    import random
    from collections.abc import Awaitable

    from retrylens.schemas import RetryEvent

    from .breaker import CircuitBreaker
    from .budget import PerDependency, RetryThrottle
    from .chain import ChainRegistry
    from .events import EventFactory
    from .handoff import HandoffChannel
    from .history import FailureHistory
    from .ids import IdSource
    from .policy_source import PolicySource
    from .rules import Rule
    from .side_effects import KeyStore

log = logging.getLogger(__name__)
T = TypeVar("T")
_COMPACT_SEQUENCE = (EventKind.TASK_STARTED, EventKind.ATTEMPT_STARTED, EventKind.ATTEMPT_SUCCEEDED)


class Host(Protocol):
    """What a :class:`TaskRun` uses of the governor that runs it (``Governor`` is one).

    A protocol, so this module never imports the governor: the governor builds runs,
    runs only read and report through this surface.
    """

    source: PolicySource
    rules: Rule
    chains: ChainRegistry
    breakers: PerDependency[CircuitBreaker]
    throttles: PerDependency[RetryThrottle]
    events: EventFactory
    ids: IdSource
    key_store: KeyStore
    history: FailureHistory
    handoff_channel: HandoffChannel | None
    rng: random.Random
    clock: Callable[[], float]
    sleep: Callable[[float], object]
    asleep: Callable[[float], Awaitable[object]]

    def emit(self, event: RetryEvent) -> None: ...
    def cancel_chain(self, task_id: str) -> list[str]: ...


class TaskRun:
    """One governed task: begin / fail / succeed attempts, then finish (or use ``with``)."""

    def __init__(
        self, governor: Host, state: TaskState, *, root: str, compact: bool = False
    ) -> None:
        self.g = governor
        self.state = state
        self.root = root
        # compact: task_started, attempt_started and a first-try success are held back, and
        # become ONE compact event if the task then finishes as succeeded (see finish()).
        self._held: list[RetryEvent] | None = [] if compact else None
        self.outcome: TaskOutcome | None = None
        self.last_attempt: Attempt | None = None
        self.verdicts: list[Verdict] = []
        self._debts: list[tuple[str, str, Callable[[], object]]] = []
        self._source_policy = governor.source.current
        # committed effects with a rollback, undone if their attempt fails as a whole
        self._undoable: list[tuple[str, str, Callable[[], object], str]] = []
        self._logged_full = False
        self._observed: set[str] = set()

    def __repr__(self) -> str:
        return f"<TaskRun {self.state!r} outcome={self.outcome}>"

    # -- attempts ------------------------------------------------------------------------
    def begin(self, *, phase: str | None = None, dependency: str | None = None) -> Attempt:
        """Start the next attempt: pays failure debt, checks cancellation, builds the context."""
        return self._begin(phase=phase, dependency=dependency)

    def _begin(
        self,
        *,
        phase: str | None = None,
        dependency: str | None = None,
        started_at: float | None = None,
        ts: datetime | None = None,
        check_cancelled: bool = True,
    ) -> Attempt:
        """:meth:`begin`; a fast-path first attempt passes when it really started."""
        s = self.state
        if check_cancelled and self.g.chains.is_cancelled(s.task_id):
            verdict = Verdict(
                Decision.CANCEL_CHAIN, "the task chain was cancelled before the attempt"
            )
            self._stop(verdict, None)
        self.refresh_policy()
        if check_cancelled:
            self._gate(dependency)
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
        digests, pollution = digests_and_pollution(messages)
        if pollution >= s.policy.rules.pollution_rebuild_threshold and s.context.rebuild():
            messages = s.next_messages()  # a polluted context (errors, copies) is rebuilt clean
            digests = [digest(m) for m in messages]
        s.given.append(digests)
        attempt = Attempt(
            number=s.attempt,
            phase=s.phase,
            dependency=s.dependency,
            correlation_id=self.g.ids.hex(16),
            span_id=self.g.ids.hex(16),
            started_at=self.g.clock() if started_at is None else started_at,
            messages=messages,
            scope=s.scope,
            relaxed=s.relaxed,
            patch=s.patch,
            degraded=s.degraded,
        )
        self.last_attempt = attempt
        self._event(
            EventKind.ATTEMPT_STARTED, attempt=attempt, **({"ts": ts} if ts is not None else {})
        )
        return attempt

    def refresh_policy(self) -> None:
        """Adopt a reloaded policy (or a flipped kill switch) between attempts of this task."""
        current = self.g.source.current
        if current is not self._source_policy:
            self._source_policy = current
            self.state.policy = current.for_role(self.state.agent.role)

    def _gate(self, dependency: str | None) -> None:
        """Stop before an attempt runs: pre-flight review, open breaker, kill switch."""
        s = self.state
        verdict: Verdict | None = None
        if s.attempt == 0:
            dep = s.substitutions.get(dependency or s.dependency, dependency or s.dependency)
            if s.review_first:
                verdict = Verdict(
                    Decision.HANDOFF_HUMAN,
                    f"pre-flight asked for human review before the task runs ({s.preflight_note})",
                    rule="preflight",
                )
            elif dep and not s.policy.fallbacks.get(dep) and not self.g.breakers[dep].allow():
                verdict = stop_verdict(
                    s, f"circuit breaker for {dep} is open and has no fallback: failing fast "
                    "before the first attempt", "protect_dependency",
                )
        elif s.policy.is_killed(s.agent.name):
            scope = "project" if s.policy.kill_switch.project else f"agent {s.agent.name}"
            verdict = stop_verdict(
                s, f"kill switch: automatic retries are off for {scope}", "stop_when_killed"
            )
        if verdict is not None:
            self.record_decision(self.last_attempt, verdict)
            self._stop(verdict, None)

    def attempts(self) -> Iterator[AttemptScope]:
        """The task's attempts as a loop (tenacity's ``AttemptManager``)::

            with governor.start(goal, agent="support") as run:
                for attempt in run.attempts():
                    with attempt:
                        attempt.result = work(attempt.messages)

        A failure inside ``with attempt`` is recorded and decided (the loop waits the
        backoff and goes on, or :class:`TaskStopped` ends it); a clean exit succeeds.
        """
        while True:
            scope = AttemptScope(self, self.begin())
            yield scope
            if scope.done:
                return

    def succeed(
        self,
        attempt: Attempt,
        output: Any = None,
        *,
        tokens_in: int = 0,
        tokens_out: int = 0,
        cost_usd: float = 0.0,
        latency_ms: int | None = None,
    ) -> None:
        """Record a success; raises a validation :class:`Failure` if ``success_check`` rejects it."""
        s = self.state
        if s.success_check is not None and not s.success_check(output):
            raise Failure(
                ErrorType.VALIDATION, "the task's success check rejected the output", output=output
            )
        usage = attempt.usage or usage_of(output)
        if usage is not None and not (tokens_in or tokens_out or cost_usd):
            tokens_in, tokens_out, cost_usd = usage.tokens_in, usage.tokens_out, usage.cost_usd
            latency_ms = latency_ms if latency_ms is not None else usage.latency_ms
        self._spend(tokens_in + tokens_out, cost_usd)
        self._undoable = []
        if attempt.dependency and attempt.dependency not in self._observed:
            self.observe(attempt.dependency, True)
        s.consecutive_failures = 0
        s.last_validation = "ok"
        self._event(
            EventKind.ATTEMPT_SUCCEEDED,
            attempt=attempt,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=cost_usd,
            latency_ms=self._latency(attempt, latency_ms),
            context_snapshot=self._snapshot(attempt, on_failure=False)
            if attempt.number > 1
            else None,
        )
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

    def fail(
        self,
        attempt: Attempt,
        error: BaseException,
        *,
        tokens_in: int = 0,
        tokens_out: int = 0,
        cost_usd: float = 0.0,
        latency_ms: int | None = None,
        phase: str | None = None,
        dependency: str | None = None,
    ) -> Verdict:
        """Record a failed attempt and decide. Returns a retrying verdict or raises TaskStopped.

        ``phase``/``dependency`` say where the attempt failed when it moved on from where it began.
        """
        self.record_failure(
            attempt,
            error,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=cost_usd,
            latency_ms=latency_ms,
            phase=phase,
            dependency=dependency,
        )
        s = self.state
        self.refresh_policy()
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

    def record_failure(
        self,
        attempt: Attempt,
        error: BaseException,
        *,
        tokens_in: int = 0,
        tokens_out: int = 0,
        cost_usd: float = 0.0,
        latency_ms: int | None = None,
        phase: str | None = None,
        dependency: str | None = None,
    ) -> Failure:
        """Classify and record a failure (event, breaker, budget) without deciding (adapters use this)."""
        s = self.state
        if phase is not None:
            s.phase = attempt.phase = phase
        if dependency is not None:
            s.dependency = attempt.dependency = s.substitutions.get(dependency, dependency)
        if is_async_cancellation(error) or self.g.chains.is_cancelled(s.task_id):
            failure = Failure("cancelled", "cancelled by cancel_chain", retryable=False)
        else:
            failure = classify(error)
        s.last_failure = failure
        s.last_validation = failure.error_type.value
        if not s.current_step and self._undoable:
            # the seed's rollback protocol: the attempt failed after these effects returned,
            # so they are undone before the next attempt (which then performs them again);
            # an effect whose step was completed stays: the task resumes after that step
            self._debts.extend(
                (tool, key, undo)
                for tool, key, undo, step in self._undoable
                if step not in s.completed_steps
            )
            self._undoable = []
        if attempt.usage is not None and not (tokens_in or tokens_out or cost_usd):
            u = attempt.usage
            tokens_in, tokens_out, cost_usd = u.tokens_in, u.tokens_out, u.cost_usd
            latency_ms = latency_ms if latency_ms is not None else u.latency_ms
        self._spend(tokens_in + tokens_out, cost_usd)
        if attempt.dependency and failure.error_type.value in _DEPENDENCY_FAULTS:
            self.observe(attempt.dependency, False)
        record_failure(s, failure.safe_message())
        self._event(
            EventKind.ATTEMPT_FAILED,
            attempt=attempt,
            error_type=failure.error_type,
            retryable=bool(failure.retryable) and failure.error_type in s.policy.retryable,
            error_detail=self.g.events.error_detail(failure),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=cost_usd,
            latency_ms=self._latency(attempt, latency_ms),
            context_snapshot=self._snapshot(attempt, on_failure=True),
        )
        return failure

    def record_decision(
        self,
        attempt: Attempt | None,
        verdict: Verdict,
        *,
        shadow: Decision | None = None,
        propensity: float | None = None,
    ) -> None:
        """Emit the decision event for ``verdict`` (decided here or by an adapted library)."""
        s = self.state
        s.decisions.append(verdict.decision)
        self.verdicts.append(verdict)
        self._event(
            EventKind.DECISION,
            attempt=attempt,
            decision=verdict.decision,
            decision_reason=verdict.reason,
            backoff_ms=verdict.backoff_ms,
            error_type=s.last_failure.error_type if s.last_failure else None,
            shadow=shadow is not None,
            shadow_decision=shadow,
            propensity=propensity,
            degraded=s.degraded,
        )

    def decide(self) -> Verdict:
        """What the live rules would decide now (read-only; adapters use it to veto retries)."""
        return self.g.rules(self.state) or Verdict(
            Decision.GIVE_UP, "no rule allows another attempt"
        )

    def decides(self, error: BaseException) -> bool:
        """Whether ``error`` ending an attempt is recorded and decided (else it propagates).

        Every exception is, except :class:`TaskStopped` (the task already stopped); of the
        other base exceptions only the asyncio cancellation that ``cancel_chain`` caused.
        """
        if isinstance(error, TaskStopped):
            return False
        if isinstance(error, Exception):
            return True
        return is_async_cancellation(error) and self.g.chains.is_cancelled(self.state.task_id)

    def wait(self, verdict: Verdict) -> None:
        if verdict.backoff_ms:
            self.g.sleep(verdict.backoff_ms / 1000)

    async def await_backoff(self, verdict: Verdict) -> None:
        if verdict.backoff_ms:
            await self.g.asleep(verdict.backoff_ms / 1000)

    # -- task layer ----------------------------------------------------------------------
    def complete_step(self, name: str, output: Any = None, *, fact: str | None = None) -> None:
        """Record a verified sub-step; later attempts skip it and carry ``fact``.

        A step completed for the first time earns the task its per-step retries.
        """
        if name not in self.state.completed_steps:
            self.state.ledger.complete_step()
        self.state.completed_steps[name] = output
        if fact:
            self.state.context.add_fact(fact)

    def step_done(self, name: str) -> bool:
        return name in self.state.completed_steps

    def check_cancelled(self) -> None:
        """For cooperative sync code: raise :class:`ChainCancelled` if the chain was cancelled."""
        if self.g.chains.is_cancelled(self.state.task_id):
            self._stop(Verdict(Decision.CANCEL_CHAIN, "the task chain was cancelled"), None)

    def side_effect(
        self,
        tool: str,
        fn: Callable[..., T],
        /,
        *args: Any,
        step: str | None = None,
        rollback: Callable[..., object] | None = None,
        key: str | None = None,
        verify: Callable[..., object] | None = None,
        unsafe: bool = False,
        **kwargs: Any,
    ) -> T:
        """Run a side-effecting call at most once per key (see :mod:`side_effects`).

        The contract of an ambiguous failure (a timeout: the effect may have happened):
        a tool taking ``idempotency_key`` is repeated with the same key; with ``verify``
        the governor asks ``verify(*args, **kwargs)`` whether it happened instead of
        repeating it; ``unsafe=True`` stops the task for a person.
        """
        effect = self._effect(tool, fn, args, kwargs, step, rollback, key, verify, unsafe)
        store = self.g.key_store
        request = next(effect)
        while True:
            op, arg = request
            try:
                if op is _GET:
                    value = store.get(arg)
                elif op is _PUT:
                    value = store.put(arg)
                else:
                    value = arg()
            except BaseException as exc:  # noqa: BLE001 - handed to the protocol, which decides
                step_next = effect.throw
                value = exc
            else:
                step_next = effect.send
            try:
                request = step_next(value)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            finally:
                value = None  # a tool's exception holds this frame: no cycle for the GC

    def _effect(
        self,
        tool: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        step: str | None,
        rollback: Callable[..., object] | None,
        key: str | None,
        verify: Callable[..., object] | None,
        unsafe: bool,
    ) -> Generator[tuple[object, Any], Any, Any]:
        """The side-effect protocol, once for sync and async tools (a sans-I/O generator).

        It yields what to do — ``(_GET, key)`` / ``(_PUT, record)`` on the key store,
        ``(_CALL, thunk)`` to run the tool — and gets the outcome (or the tool's exception
        thrown in); :meth:`side_effect` performs them directly, :meth:`aside_effect`
        awaits the tool and moves store I/O off the event loop. Returns the result.
        """
        s = self.state
        if self.last_attempt is not None:
            self.last_attempt.tool_call(tool, {"args": args, "kwargs": kwargs})
        key = key or idempotency_key(s.task_id, step or tool, {"args": args, "kwargs": kwargs})
        record = yield _GET, key
        done = self._before_effect(tool, key, record, verify, args, kwargs)
        if done is not None:
            if done[1] is not None:
                yield _PUT, done[1]
            self._side_effect_event(tool, key, done[2])
            return done[0]
        yield _PUT, KeyRecord(key, s.task_id, tool, SideEffectStatus.INTENDED)
        call_kwargs = (
            {**kwargs, "idempotency_key": key} if accepts(fn, "idempotency_key") else kwargs
        )
        try:
            result = yield _CALL, lambda: fn(*args, **call_kwargs)
        except BaseException as exc:
            recovered = self._after_effect_failed(tool, key, exc, rollback, verify, unsafe, args, kwargs)
            yield _PUT, recovered[0]
            if recovered[1] is not _RAISE:
                self._side_effect_event(tool, key, SideEffectStatus.COMMITTED)
                return recovered[1]
            raise
        yield _PUT, KeyRecord(key, s.task_id, tool, SideEffectStatus.COMMITTED, result)
        self._side_effect_event(tool, key, SideEffectStatus.COMMITTED)
        self._note_undo(tool, key, step or tool, rollback, args, kwargs)
        return result

    def _note_undo(
        self,
        tool: str,
        key: str,
        step: str,
        rollback: Callable[..., object] | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        if rollback is not None and not self.state.current_step:
            self._undoable.append((tool, key, lambda: rollback(*args, **kwargs), step))

    async def aside_effect(
        self,
        tool: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        step: str | None = None,
        rollback: Callable[..., object] | None = None,
        key: str | None = None,
        verify: Callable[..., object] | None = None,
        unsafe: bool = False,
        **kwargs: Any,
    ) -> Any:
        """:meth:`side_effect` for an ``async def`` tool: awaits it before anything is committed.

        Each attempt calls ``fn`` again (a coroutine can be awaited once); key-store I/O
        runs in a worker thread so a SQLite or ClickHouse store never blocks the loop.
        """
        import asyncio

        effect = self._effect(tool, fn, args, kwargs, step, rollback, key, verify, unsafe)
        store = self.g.key_store
        io = _inline if type(store) is MemoryKeyStore else asyncio.to_thread
        request = next(effect)
        while True:
            op, arg = request
            try:
                if op is _GET:
                    value = await io(store.get, arg)
                elif op is _PUT:
                    value = await io(store.put, arg)
                else:
                    value = await arg()
            except BaseException as exc:  # noqa: BLE001 - handed to the protocol, which decides
                step_next = effect.throw
                value = exc
            else:
                step_next = effect.send
            try:
                request = step_next(value)
            except StopIteration as stop:
                return stop.value
            finally:
                value = None  # no frame ↔ traceback cycle

    def _before_effect(
        self,
        tool: str,
        key: str,
        record: KeyRecord | None,
        verify: Callable[..., object] | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[Any, KeyRecord | None, SideEffectStatus] | None:
        """``(result, record to store, status)`` when the effect must not run again
        (committed, or verified done); ``None`` when it runs."""
        if record is None:
            return None
        if record.status is SideEffectStatus.COMMITTED:
            return record.result, None, SideEffectStatus.SKIPPED_DUPLICATE
        if verify is not None and record.status in (SideEffectStatus.FAILED, SideEffectStatus.INTENDED):
            happened = verify(*args, **kwargs)
            if happened:
                result = None if happened is True else happened
                done = KeyRecord(key, self.state.task_id, tool, SideEffectStatus.COMMITTED, result)
                return result, done, SideEffectStatus.COMMITTED
        return None

    def _after_effect_failed(
        self,
        tool: str,
        key: str,
        exc: BaseException,
        rollback: Callable[..., object] | None,
        verify: Callable[..., object] | None,
        unsafe: bool,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[KeyRecord, Any]:
        """The record to store after ``fn`` raised, and its result if it happened after all."""
        s = self.state
        ambiguous = isinstance(exc, Exception) and classify(exc).error_type is ErrorType.TIMEOUT
        if ambiguous and verify is not None:
            happened = verify(*args, **kwargs)
            if happened:
                result = None if happened is True else happened
                return KeyRecord(key, s.task_id, tool, SideEffectStatus.COMMITTED, result), result
        elif ambiguous and unsafe:
            s.ambiguous = tool[:128]
        self._side_effect_event(tool, key, SideEffectStatus.FAILED, rollback=_name(rollback))
        if rollback is not None:
            self._debts.append((tool, key, lambda: rollback(*args, **kwargs)))
        return KeyRecord(key, s.task_id, tool, SideEffectStatus.FAILED), _RAISE

    def step(
        self,
        name: str,
        fn: Callable[..., T],
        /,
        *args: Any,
        phase: str | None = None,
        dependency: str | None = None,
        side_effect: bool = False,
        verify: Callable[..., object] | None = None,
        unsafe: bool = False,
        **kwargs: Any,
    ) -> T:
        """Run one step of the task, retried *in place* under the task's budget and rules.

        A failed step does not re-run the task: the rules decide (class caps count per
        step; the attempt budget, deadline and money are the task's), the governor waits,
        and only this step runs again as the next attempt. A completed step is recorded,
        so a task that is re-run anyway (its own code failed) resumes after its last
        completed step: ``step`` returns the stored output instead of calling ``fn``.
        ``side_effect=True`` (implied by ``verify``/``unsafe``) guards the call with an
        idempotency key and the given contract (see :meth:`side_effect`).
        """
        s = self.state
        if name in s.completed_steps:
            return s.completed_steps[name]  # type: ignore[no-any-return]
        attempt = self.last_attempt or self.begin(phase=phase, dependency=dependency)
        guarded = side_effect or verify is not None or unsafe
        outer_step, outer_phase, outer_dep = s.current_step, s.phase, s.dependency
        s.current_step = name
        try:
            while True:
                where = {"phase": phase or attempt.phase, "dependency": dependency or attempt.dependency}
                try:
                    if guarded:
                        result = self.side_effect(
                            name, fn, *args, step=name, verify=verify, unsafe=unsafe, **kwargs
                        )
                    else:
                        result = fn(*args, **kwargs)
                except Exception as exc:  # noqa: BLE001 - every failure is classified
                    if not self.decides(exc):
                        raise
                    self.wait(self.fail(attempt, exc, **where))  # raises TaskStopped on stop
                    attempt = self._begin(**where)
                    continue
                if where["dependency"]:
                    self.observe(where["dependency"], True)
                self.complete_step(name, result)
                return result
        finally:
            s.current_step = outer_step
            if self.outcome is None:
                s.phase, s.dependency = outer_phase, outer_dep

    def finish(self, outcome: TaskOutcome | None = None) -> None:
        """Emit ``task_finished`` once; failed/handed-off tasks feed the fingerprint history."""
        if getattr(self, "_finished", False):
            return
        self._finished = True
        s = self.state
        outcome = outcome or self.outcome or TaskOutcome.FAILED
        self.outcome = outcome
        self.g.history.record(
            s.fingerprint, failed=outcome in (TaskOutcome.FAILED, TaskOutcome.HANDED_OFF)
        )
        held = self._held
        if (
            held is not None
            and len(held) == len(_COMPACT_SEQUENCE)
            and outcome is TaskOutcome.SUCCEEDED
        ):
            self._held = None
            self.g.emit(self.g.events.compact(held[2], held[0].input_features))
        else:
            self._event(
                EventKind.TASK_FINISHED,
                span_id=s.root_span_id,
                outcome=outcome,
                tokens_in=0,
                tokens_out=0,
                cost_usd=round(s.cost_usd, 6),
                degraded=s.degraded,
                decision_reason=f"{s.attempt} attempts, {s.tokens} tokens",
            )
        self.g.chains.leave(s.task_id)

    def __enter__(self) -> TaskRun:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if exc is None:
            self.finish()
        elif isinstance(exc, TaskStopped):
            self.finish(self.outcome)
        else:
            self.finish(
                TaskOutcome.CANCELLED
                if is_async_cancellation(exc)
                else TaskOutcome.FAILED
            )

    # -- internals -----------------------------------------------------------------------
    def _stop(self, verdict: Verdict, error: BaseException | None) -> None:
        s = self.state
        if verdict.decision is Decision.HANDOFF_HUMAN:
            self.outcome = TaskOutcome.HANDED_OFF
            self._handoff(verdict, error)
            raise HandedOff(s.task_id, verdict, error)
        if verdict.decision is Decision.CANCEL_CHAIN:
            self.outcome = TaskOutcome.CANCELLED
            self.g.cancel_chain(s.task_id)
            raise ChainCancelled(s.task_id, verdict, error)
        self.outcome = TaskOutcome.FAILED
        raise GaveUp(s.task_id, verdict, error)

    def _handoff(self, verdict: Verdict, error: BaseException | None = None) -> None:
        s = self.state
        reason = verdict.reason
        last = s.last_failure
        output = last.output if last is not None and last.output is not None else None
        package = HandoffPackage(
            project=s.project,
            agent=s.agent.name,
            task_id=s.task_id,
            reason=verdict.reason,
            inputs=s.goal,
            context=self.last_attempt.messages if self.last_attempt else [],
            outputs=dict(s.completed_steps),
            errors=[
                {
                    "attempt": f.attempt,
                    "phase": f.phase,
                    "error_type": f.error_type.value,
                    "summary": f.summary,
                }
                for f in s.failures
            ],
            attempts=s.attempt,
            policy=f"{s.policy.id}@{s.policy.version}",
            failed_output="" if output is None else str(output),
            error=(
                {
                    "error_type": last.error_type.value,
                    "message": last.message,
                    "code": last.code,
                    "status": last.status,
                    "stack_digest": last.stack_digest,
                }
                if last is not None
                else {}
            ),
        )
        if package.errors and last is not None:
            package.errors[-1]["message"] = last.message
        channel = self.g.handoff_channel
        if channel is not None:
            if getattr(channel, "blocking", True) and _on_event_loop():
                _send_in_thread(channel, package)  # never block the loop on a webhook
            else:
                try:
                    channel.send(package)
                except HandoffError as exc:
                    reason = f"{reason} (channel failed: {exc})"
        data = package.to_dict()
        self._event(
            EventKind.HANDOFF,
            decision=Decision.HANDOFF_HUMAN,
            decision_reason=reason[:MAX_REASON_CHARS],
            error_detail=last.detail() if last is not None else None,
            context_snapshot=_package_snapshot(data),
        )

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
            self.g.key_store.put(
                KeyRecord(key, self.state.task_id, tool, SideEffectStatus.ROLLED_BACK)
            )
            self._side_effect_event(tool, key, SideEffectStatus.ROLLED_BACK, rollback="done")

    def _spend(self, tokens: int, cost: float) -> None:
        if not (tokens or cost):
            return  # nothing reported: no lock taken on the shared ledger
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
        snap = self.g.events.context_snapshot
        if on_failure and not self._logged_full:
            self._logged_full = True
            return snap(attempt.messages, tool_calls=attempt.tool_calls)
        if previous is None:
            return snap(attempt.messages, last=0, tool_calls=attempt.tool_calls)
        return snap(attempt.messages, previous=previous, tool_calls=attempt.tool_calls)

    def _side_effect_event(
        self, tool: str, key: str, status: SideEffectStatus, rollback: str | None = None
    ) -> None:
        self._event(
            EventKind.SIDE_EFFECT,
            attempt=self.last_attempt,
            side_effects=[
                _side_effect(tool=tool[:128], idempotency_key=key, status=status, rollback=rollback)
            ],
        )

    def _event(
        self,
        kind: EventKind,
        *,
        attempt: Attempt | None = None,
        span_id: str | None = None,
        **fields: Any,
    ) -> None:
        s = self.state
        if attempt is not None:
            if "phase" not in fields:
                fields["phase"] = attempt.phase
            if "dependency" not in fields:
                fields["dependency"] = attempt.dependency
            correlation, span = attempt.correlation_id, attempt.span_id
        else:
            correlation, span = f"{s.task_id}:{s.attempt}"[:128], span_id or s.root_span_id
        event = self.g.events.build(s, kind, correlation, span, fields)
        held = self._held
        if held is not None:
            if len(held) < len(_COMPACT_SEQUENCE) and kind is _COMPACT_SEQUENCE[len(held)]:
                held.append(event)
                return
            self._release()
        self.g.emit(event)

    def _release(self) -> None:
        """Emit the held events: the task will not end as a clean first-try success."""
        held, self._held = self._held, None
        for event in held or ():
            self.g.emit(event)


class AttemptScope:
    """One attempt of :meth:`TaskRun.attempts`: a context manager that records its ending."""

    __slots__ = ("run", "attempt", "result", "done")

    def __init__(self, run: TaskRun, attempt: Attempt) -> None:
        self.run, self.attempt, self.result, self.done = run, attempt, None, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.attempt, name)  # messages, number, scope, report(), ...

    def __enter__(self) -> AttemptScope:
        return self

    def end(self, exc: BaseException | None) -> Verdict | None:
        """Record how the attempt ended: the verdict to wait out before the next attempt, or
        ``None`` when the loop ends (a success, or ``exc`` is not the governor's to decide).

        The one decision point of every loop — ``call``, ``acall``, their first try, your
        own ``for attempt in run.attempts()``; the sync and async forms differ only in how
        they wait. Raises :class:`TaskStopped` when the rules stop the task.
        """
        run = self.run
        attempt = run.last_attempt or self.attempt  # steps may have moved on in place
        if exc is None:
            run.succeed(attempt, self.result)
            self.done = True
            return None
        if not run.decides(exc):
            return None
        return run.fail(attempt, exc)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        verdict = self.end(exc)
        if verdict is None:
            return False
        self.run.wait(verdict)
        return True

    async def __aenter__(self) -> AttemptScope:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> bool:
        """The asyncio form: the same decision, the backoff awaited."""
        verdict = self.end(exc)
        if verdict is None:
            return False
        await self.run.await_backoff(verdict)
        return True


_RAISE = object()  # "re-raise the tool's exception"
_GET, _PUT, _CALL = object(), object(), object()  # what the side-effect protocol asks for


async def _inline(fn: Callable[..., T], /, *args: Any) -> T:
    return fn(*args)


_DEPENDENCY_FAULTS = {"timeout", "rate_limit", "server_error", "network"}


def _name(fn: Callable[..., object] | None) -> str | None:
    return getattr(fn, "__name__", "rollback")[:128] if fn is not None else None


def accepts(fn: Callable[..., object], name: str) -> bool:
    """Whether ``fn`` takes a parameter called ``name``."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _on_event_loop() -> bool:
    asyncio: Any = sys.modules.get("asyncio")
    if asyncio is None:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _send_in_thread(channel: Any, package: HandoffPackage) -> None:
    import threading

    def send() -> None:
        try:
            channel.send(package)
        except Exception:  # noqa: BLE001 - the event already records the hand-off
            log.exception("hand-off channel failed for %s", package.task_id)

    threading.Thread(target=send, name="retrylens-handoff", daemon=True).start()


def _package_snapshot(data: dict[str, Any]) -> Any:
    """The redacted hand-off package as a bounded snapshot, so the store keeps it."""
    import json

    from retrylens.schemas.event import ContextMessage, ContextSnapshot
    from retrylens.schemas.limits import MAX_MESSAGE_CHARS

    def cut(text: str) -> str:
        return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"

    parts = [
        ("handoff:input", data["inputs"]),
        ("handoff:output", data["failed_output"] or json.dumps(data["outputs"], default=str)),
        ("handoff:errors", json.dumps(data["errors"][-5:], default=str)),
        ("handoff:error", json.dumps(data["error"], default=str)),
        ("handoff:context", json.dumps(data["context"][-3:], default=str)),
    ]
    return ContextSnapshot(
        message_count=len(data["context"]),
        last_messages=[ContextMessage(role=role, content=cut(text)) for role, text in parts],
    )


def _side_effect(**fields: Any) -> Any:
    from retrylens.schemas.event import SideEffect

    return SideEffect(**fields)
