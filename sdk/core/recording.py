"""What a task run records when an attempt ends: its success, its failure, the decision.

The recording half of :class:`~retrylens.sdk.core.run.TaskRun` (a mixin): each method turns one
ending into state (budget, breaker, failure history) and one event. Adapters that let
their library decide call these directly (``record_failure`` then ``record_decision``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrylens.schemas.limits import MAX_REASON_CHARS
from retrylens.schemas.taxonomy import Decision, ErrorType, EventKind, TaskOutcome

from ..text.sanitizer import Failure, classify
from .awaitables import is_awaitable, refuse
from .chain import is_async_cancellation
from .unawaited import refuse_success
from .usage import usage_of
from .verdicts import record_failure

if TYPE_CHECKING:
    from .loop import Hook
    from .state import Attempt, TaskState
    from .verdicts import Verdict

_DEPENDENCY_FAULTS = {"timeout", "rate_limit", "server_error", "network"}


class RunRecords:
    """Success, failure and decision records of a :class:`~retrylens.sdk.core.run.TaskRun`."""

    g: Any
    state: TaskState
    outcome: TaskOutcome | None
    verdicts: list[Verdict]
    _debts: list[tuple[str, str, Hook]]
    _undoable: list[tuple[str, str, Hook, str]]
    _observed: set[str]
    unawaited: list[str]

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
        """Record a success; raises a validation :class:`Failure` if ``success_check`` rejects it.

        An awaitable ``output`` (an async function run by a plain call, a sync node or tool
        that returned a coroutine) is refused: nothing of it ran (:mod:`.awaitables`).
        """
        if is_awaitable(output):
            refuse(output, "the governed function")
        if self.unawaited:
            self._refuse_unawaited(attempt, "the governed function")
        s = self.state
        if s.success_check is not None and not s.success_check(output):
            raise Failure(
                ErrorType.VALIDATION, "the task's success check rejected the output", output=output
            )
        if not (tokens_in or tokens_out or cost_usd):
            usage = attempt.usage or usage_of(output)
            if usage is not None:
                tokens_in, tokens_out, cost_usd = usage.tokens_in, usage.tokens_out, usage.cost_usd
                latency_ms = latency_ms if latency_ms is not None else usage.latency_ms
        self._charge(attempt, tokens_in + tokens_out, cost_usd)
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

    def _refuse_unawaited(self, attempt: Attempt, where: str) -> None:
        """The attempt dropped a coroutine unawaited: recorded failed, the usage error raised."""
        try:
            refuse_success(self.unawaited, where)
        except Exception as error:
            usage = Failure(ErrorType.LOGIC, str(error), retryable=False, code=type(error).__name__)
            self.record_failure(attempt, usage)
            raise

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
            # the attempt failed after these effects returned: they are undone before the
            # next attempt (which performs them again); a completed step's effect stays
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
        self._charge(attempt, tokens_in + tokens_out, cost_usd)
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
            decision_reason=verdict.reason[:MAX_REASON_CHARS],
            backoff_ms=verdict.backoff_ms,
            error_type=s.last_failure.error_type if s.last_failure else None,
            shadow=shadow is not None,
            shadow_decision=shadow,
            propensity=propensity,
            degraded=s.degraded,
        )

    def _charge(self, attempt: Attempt, tokens: int, cost: float) -> None:
        """Charge what ``attempt`` spent, less what its steps already charged as they ended."""
        tokens -= attempt.charged_tokens
        cost -= attempt.charged_cost
        if tokens > 0 or cost > 0:
            self._spend(max(tokens, 0), max(cost, 0.0))
            attempt.charged_tokens += max(tokens, 0)
            attempt.charged_cost += max(cost, 0.0)

    def _spend(self, tokens: int, cost: float) -> None:
        if not (tokens or cost):
            return  # nothing reported: no lock taken on the shared ledger
        self.state.tokens += tokens
        self.state.cost_usd += cost
        self.state.ledger.charge(tokens=tokens, cost_usd=cost)
