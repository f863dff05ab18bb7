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
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from retrylens.errors import ChainCancelled, GaveUp, HandedOff, HandoffError, TaskStopped
from retrylens.schemas.taxonomy import Decision, EventKind, SideEffectStatus, TaskOutcome

from .chain import is_async_cancellation
from .context import snapshot
from .handoff import HandoffPackage
from .rules import Verdict, apply_verdict, record_failure
from .sanitizer import Failure, classify
from .shadow import explore, shadow_verdict
from .side_effects import KeyRecord, idempotency_key
from .state import Attempt, TaskState

if TYPE_CHECKING:
    from retrylens.schemas import RetryEvent

    from .governor import Governor

log = logging.getLogger(__name__)
T = TypeVar("T")
_COMPACT_SEQUENCE = (EventKind.TASK_STARTED, EventKind.ATTEMPT_STARTED, EventKind.ATTEMPT_SUCCEEDED)


class TaskRun:
    """One governed task: begin / fail / succeed attempts, then finish (or use ``with``)."""

    def __init__(
        self, governor: Governor, state: TaskState, *, root: str, compact: bool = False
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
        s = self.state
        self._spend(tokens_in + tokens_out, cost_usd)
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
        self._spend(tokens_in + tokens_out, cost_usd)
        if attempt.dependency and failure.error_type.value in _DEPENDENCY_FAULTS:
            self.observe(attempt.dependency, False)
        record_failure(s, failure.safe_message())
        self._event(
            EventKind.ATTEMPT_FAILED,
            attempt=attempt,
            error_type=failure.error_type,
            retryable=bool(failure.retryable) and failure.error_type in s.policy.retryable,
            error_detail=failure.detail(),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=cost_usd,
            latency_ms=self._latency(attempt, latency_ms),
            context_snapshot=self._snapshot(attempt, on_failure=True),
        )
        return failure

    def record_decision(
        self,
        attempt: Attempt,
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

    def side_effect(
        self,
        tool: str,
        fn: Callable[..., T],
        /,
        *args: Any,
        step: str | None = None,
        rollback: Callable[..., object] | None = None,
        key: str | None = None,
        **kwargs: Any,
    ) -> T:
        """Run a side-effecting call at most once per key (see :mod:`side_effects`)."""
        s = self.state
        key = key or idempotency_key(s.task_id, step or tool, {"args": args, "kwargs": kwargs})
        store = self.g.key_store
        record = store.get(key)
        if record is not None and record.status is SideEffectStatus.COMMITTED:
            self._side_effect_event(tool, key, SideEffectStatus.SKIPPED_DUPLICATE)
            return record.result  # type: ignore[no-any-return]
        store.put(KeyRecord(key, s.task_id, tool, SideEffectStatus.INTENDED))
        call_kwargs = (
            {**kwargs, "idempotency_key": key} if accepts(fn, "idempotency_key") else kwargs
        )
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
        )
        if self.g.handoff_channel is not None:
            try:
                self.g.handoff_channel.send(package)
            except HandoffError as exc:
                reason = f"{reason} (channel failed: {exc})"
        self._event(
            EventKind.HANDOFF, decision=Decision.HANDOFF_HUMAN, decision_reason=reason[:512]
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
            fields.setdefault("phase", attempt.phase)
            fields.setdefault("dependency", attempt.dependency)
            correlation, span = attempt.correlation_id, attempt.span_id
        else:
            correlation, span = f"{s.task_id}:{s.attempt}"[:128], span_id or s.root_span_id
        event = self.g.events.make(s, kind, correlation_id=correlation, span_id=span, **fields)
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


_DEPENDENCY_FAULTS = {"timeout", "rate_limit", "server_error", "network"}


def _name(fn: Callable[..., object] | None) -> str | None:
    return getattr(fn, "__name__", "rollback")[:128] if fn is not None else None


def accepts(fn: Callable[..., object], name: str) -> bool:
    """Whether ``fn`` takes a parameter called ``name``."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _side_effect(**fields: Any) -> Any:
    from retrylens.schemas.event import SideEffect

    return SideEffect(**fields)
