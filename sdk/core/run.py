"""One governed task: what it records and decides at each turn of the attempt loop.

A :class:`TaskRun` is what :meth:`Governor.start` returns and what ``Governor.call`` /
``acall`` drive (see :mod:`~retrylens.sdk.core.loop` for the loop, :mod:`~retrylens.sdk.core.drivers`
for who performs it). It owns the task's :class:`~retrylens.sdk.core.state.TaskState`, asks the
governor's rules for a verdict after each failure and records every turn as an event
(:mod:`~retrylens.sdk.core.run_events`).

Its turns that may need I/O — :meth:`beginning` (pays rollbacks, may hand off) and
:meth:`failing` (may hand off) — are generators of the loop; :meth:`begin` and
:meth:`fail` drive them in place for code that runs its own loop (the adapters, your
``for attempt in run.attempts()``). Steps and side effects live in :mod:`.steps`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from retrylens.errors import AsyncToolInPlainCall, CoroutineNeverAwaited, TaskStopped
from retrylens.schemas.taxonomy import Decision, EventKind, TaskOutcome

from ..text.context import digest, digests_and_pollution
from .attempts import AttemptScope
from .chain import is_async_cancellation
from .drivers import drive
from .effects import pay_debts
from .loop import Hook, Loop
from .recording import RunRecords
from .run_events import COMPACT_SEQUENCE, RunEvents
from .shadow import explore, explore_stop, shadow_verdict
from .state import Attempt, TaskState
from .steps import RunSteps
from .stopping import stop
from .verdicts import Verdict, apply_verdict, stop_verdict

if TYPE_CHECKING:
    import random
    from collections.abc import Awaitable

    from retrylens.schemas import RetryEvent

    from ..transport.handoff import HandoffChannel
    from .breaker import CircuitBreaker
    from .budget import PerDependency, RetryThrottle
    from .chain import ChainRegistry
    from .events import EventFactory
    from .history import FailureHistory
    from .ids import IdSource
    from .policy_source import PolicySource
    from .rule_chain import Rule
    from .side_effects import KeyStore

_DEPENDENCY_FAULTS = {"timeout", "rate_limit", "server_error", "network"}
_NO_RULE = "no rule allows another attempt"


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
    hook_timeout_s: float
    rng: random.Random
    clock: Callable[[], float]
    sleep: Callable[[float], object]
    asleep: Callable[[float], Awaitable[object]]

    def emit(self, event: RetryEvent) -> None: ...
    def cancel_chain(self, task_id: str) -> list[str]: ...


class TaskRun(RunRecords, RunEvents, RunSteps):
    """One governed task: begin / fail / succeed attempts, then finish (or use ``with``)."""

    def __init__(
        self,
        governor: Host,
        state: TaskState,
        *,
        root: str,
        compact: bool = False,
        source_policy: Any = None,
    ) -> None:
        self.g = governor
        self.state = state
        self.root = root
        self._held: list[RetryEvent] | None = [] if compact else None
        self.outcome: TaskOutcome | None = None
        self.last_attempt: Attempt | None = None
        self.verdicts: list[Verdict] = []
        self._debts: list[tuple[str, str, Hook]] = []  # rollbacks owed before the next attempt
        self._undoable: list[tuple[str, str, Hook, str]] = []  # undone if the attempt fails
        self._source_policy = source_policy or governor.source.current
        self._logged_full = False
        self._observed: set[str] = set()
        self._unrecovered: dict[str, bool] = {}  # a failure fed to a breaker, not yet retried
        self._finished = False
        self._calls: dict[str, int] = {}  # calls of @governor.tool tools in this pass
        #: coroutines the attempt created and dropped unawaited (:mod:`.unawaited`)
        self.unawaited: list[str] = []

    def __repr__(self) -> str:
        return f"<TaskRun {self.state!r} outcome={self.outcome}>"

    # -- beginning an attempt ------------------------------------------------------------
    def begin(self, *, phase: str | None = None, dependency: str | None = None) -> Attempt:
        """Start the next attempt: pays failure debt, checks cancellation, builds the context."""
        return drive(self.beginning(phase=phase, dependency=dependency), self.g)  # type: ignore[arg-type,no-any-return]

    def beginning(
        self,
        *,
        phase: str | None = None,
        dependency: str | None = None,
        started_at: float | None = None,
        ts: datetime | None = None,
        check_cancelled: bool = True,
    ) -> Loop:
        """:meth:`begin` as a turn of the loop (a fast first try passes when it really started)."""
        s = self.state
        if check_cancelled and self.g.chains.is_cancelled(s.task_id):
            cancelled = Verdict(
                Decision.CANCEL_CHAIN, "the task chain was cancelled before the attempt"
            )
            yield from stop(self, cancelled, None)
        self.refresh_policy()
        verdict = self._gate(dependency) if check_cancelled else None
        if verdict is not None:
            self.record_decision(self.last_attempt, verdict)
            yield from stop(self, verdict, None)
        if self._debts:
            yield from pay_debts(self)
        return self._new_attempt(phase, dependency, started_at, ts)

    def _new_attempt(
        self,
        phase: str | None,
        dependency: str | None,
        started_at: float | None,
        ts: datetime | None,
    ) -> Attempt:
        s = self.state
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
            policy=s.policy,
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

    def _gate(self, dependency: str | None) -> Verdict | None:
        """Why the attempt must not run: pre-flight review, open breaker, kill switch."""
        s = self.state
        if s.attempt == 0:
            dep = s.substitutions.get(dependency or s.dependency, dependency or s.dependency)
            if s.review_first:
                return Verdict(
                    Decision.HANDOFF_HUMAN,
                    f"pre-flight asked for human review before the task runs ({s.preflight_note})",
                    rule="preflight",
                )
            if dep and not s.policy.fallbacks.get(dep) and not self.g.breakers[dep].allow():
                return stop_verdict(
                    s,
                    f"circuit breaker for {dep} is open and has no fallback: failing fast "
                    "before the first attempt",
                    "protect_dependency",
                )
        elif s.policy.is_killed(s.agent.name):
            scope = "project" if s.policy.kill_switch.project else f"agent {s.agent.name}"
            return stop_verdict(
                s, f"kill switch: automatic retries are off for {scope}", "stop_when_killed"
            )
        return None

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

    # -- ending an attempt ---------------------------------------------------------------
    def fail(
        self,
        attempt: Attempt,
        error: BaseException,
        *,
        as_applied: Callable[[Verdict], Verdict] | None = None,
        **fields: Any,
    ) -> Verdict:
        """Record a failed attempt and decide. Returns a retrying verdict or raises TaskStopped.

        ``phase``/``dependency`` say where the attempt failed when it moved on from where it
        began; ``tokens_in``/``tokens_out``/``cost_usd``/``latency_ms`` what it spent.
        ``as_applied`` turns the rules' verdict into what the caller can carry out (an
        adapter that can only resend the same request, :mod:`~retrylens.sdk.integrations.providers.resent_verdicts`): that one
        is applied and recorded.
        """
        return drive(self.failing(attempt, error, as_applied=as_applied, **fields), self.g)  # type: ignore[arg-type,no-any-return]

    def failing(
        self,
        attempt: Attempt,
        error: BaseException,
        *,
        as_applied: Callable[[Verdict], Verdict] | None = None,
        **fields: Any,
    ) -> Loop:
        """:meth:`fail` as a turn of the loop: record, decide, and stop (hand off) if told to."""
        self.record_failure(attempt, error, **fields)
        s = self.state
        self.refresh_policy()
        verdict = self.g.rules(s) or Verdict(Decision.GIVE_UP, _NO_RULE)
        candidate = self._shadow_verdict()
        shadow = candidate.decision if candidate is not None else None
        propensity = None
        epsilon = s.policy.shadow.exploration
        stops = s.policy.shadow.explore_stops
        if stops > 0 and candidate is not None and candidate.retrying and not verdict.retrying:
            explored = explore_stop(verdict, candidate, stops, self.g.rng)
            verdict, propensity = explored.verdict, explored.propensity
        elif epsilon > 0:
            explored = explore(verdict, s, epsilon, self.g.rng)
            verdict, propensity = explored.verdict, explored.propensity
        if as_applied is not None:
            verdict = as_applied(verdict)
        if verdict.retrying:
            apply_verdict(s, verdict)
        self.record_decision(attempt, verdict, shadow=shadow, propensity=propensity)
        if not verdict.retrying:
            yield from stop(self, verdict, error)
        return verdict

    def decide(self) -> Verdict:
        """What the live rules would decide now (read-only; adapters use it to veto retries)."""
        return self.g.rules(self.state) or Verdict(Decision.GIVE_UP, _NO_RULE)

    def decides(self, error: BaseException) -> bool:
        """Whether ``error`` ending an attempt is recorded and decided (else it propagates).

        Every exception is, except :class:`TaskStopped` (the task already stopped) and
        :class:`AsyncToolInPlainCall` and :class:`CoroutineNeverAwaited` (usage errors:
        retrying cannot help); of the other
        base exceptions only the asyncio cancellation that ``cancel_chain`` caused.
        """
        if isinstance(error, TaskStopped | AsyncToolInPlainCall | CoroutineNeverAwaited):
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

    # -- dependencies ----------------------------------------------------------------------
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
        """Feed one call's outcome to the dependency's breaker and retry throttle.

        A success after this task's failure of the same dependency is its recovery: the
        breaker counts the blip and the recovery as one success (:mod:`.breaker`).
        """
        self._observed.add(dependency)
        if success:  # one recovery takes back one failure: a run of several still counts
            recovers = self._unrecovered.pop(dependency, False)
        else:
            recovers, self._unrecovered[dependency] = False, True
        self.g.breakers[dependency].record(success, recovers=recovers)
        self.g.throttles[dependency].record(success)

    def check_cancelled(self) -> None:
        """For cooperative sync code: raise :class:`ChainCancelled` if the chain was cancelled."""
        if self.g.chains.is_cancelled(self.state.task_id):
            verdict = Verdict(Decision.CANCEL_CHAIN, "the task chain was cancelled")
            drive(stop(self, verdict, None), self.g)  # type: ignore[arg-type]

    # -- finishing -------------------------------------------------------------------------
    def finish(self, outcome: TaskOutcome | None = None) -> None:
        """Emit ``task_finished`` once; failed/handed-off tasks feed the fingerprint history."""
        if self._finished:
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
            and len(held) == len(COMPACT_SEQUENCE)
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
            self.finish(TaskOutcome.CANCELLED if is_async_cancellation(exc) else TaskOutcome.FAILED)

    # -- internals -------------------------------------------------------------------------
    def _shadow_verdict(self) -> Verdict | None:
        candidate = self.state.policy.candidate() if self.state.policy.shadow.candidate else None
        if candidate is None:
            return None
        verdict = shadow_verdict(candidate, self.state, self.g.rules)
        return verdict if verdict else Verdict(Decision.GIVE_UP, _NO_RULE)
