"""Decisions as a chain of small rules; the first rule that answers decides.

A rule is any callable ``rule(state) -> Verdict | None`` (``None``: not my call). Rules
compose with ``|`` into a chain that reads top to bottom like the policy document:
stop rules first (cancellation, kill switch, whitelist, budget, known-bad input, caps,
loops), then fleet protection (retry throttle, circuit breaker), then degradation, then
the per-class retry. Rules only *read* the state and the environment, so the same chain
can be evaluated for a shadow candidate without side effects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from retrylens.schemas.taxonomy import (
    RETRYING_DECISIONS,
    TRANSIENT_ERROR_TYPES,
    Decision,
    ErrorType,
)

from .backoff import wait_from_policy
from .state import FailureRecord, TaskState

if TYPE_CHECKING:
    from .policy import TaskBudget

RuleFn = Callable[[TaskState], "Verdict | None"]


@dataclass(frozen=True)
class Verdict:
    """A decision, its human-readable reason and what the next attempt needs."""

    decision: Decision
    reason: str
    backoff_ms: int = 0
    fallback: str | None = None
    rule: str = ""

    @property
    def retrying(self) -> bool:
        return self.decision in RETRYING_DECISIONS


class Rule:
    name = "rule"

    def __call__(self, state: TaskState) -> Verdict | None:
        raise NotImplementedError

    def __or__(self, other: RuleFn) -> Rule:
        return FirstOf(self, other)

    def __repr__(self) -> str:
        return f"{self.name}()"


class FirstOf(Rule):
    name = "first_of"

    def __init__(self, *rules: RuleFn) -> None:
        flat: list[RuleFn] = []
        for rule in rules:
            flat.extend(rule.rules if isinstance(rule, FirstOf) else [rule])
        self.rules = flat

    def __call__(self, state: TaskState) -> Verdict | None:
        for rule in self.rules:
            verdict = rule(state)
            if verdict is not None:
                return verdict
        return None

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.rules))


def _stop(state: TaskState, reason: str, rule: str) -> Verdict:
    handoff = (
        state.policy.rules.handoff_when_stopped
        and state.env is not None
        and state.env.can_handoff()
    )
    return Verdict(Decision.HANDOFF_HUMAN if handoff else Decision.GIVE_UP, reason, rule=rule)


stop_verdict = _stop  # the verdict a stop rule gives (hand-off when a channel exists)


def _err(state: TaskState) -> ErrorType:
    assert state.last_failure is not None, "rules run after a failure"
    return state.last_failure.error_type


class stop_when_cancelled(Rule):  # noqa: N801
    name = "stop_when_cancelled"

    def __call__(self, s: TaskState) -> Verdict | None:
        if _err(s) is ErrorType.CANCELLED:
            return Verdict(Decision.CANCEL_CHAIN, "the task chain was cancelled", rule=self.name)
        return None


class stop_when_killed(Rule):  # noqa: N801
    name = "stop_when_killed"

    def __call__(self, s: TaskState) -> Verdict | None:
        if s.policy.is_killed(s.agent.name):
            scope = "project" if s.policy.kill_switch.project else f"agent {s.agent.name}"
            return _stop(s, f"kill switch: automatic retries are off for {scope}", self.name)
        return None


class stop_unless_retryable(Rule):  # noqa: N801
    name = "stop_unless_retryable"

    def __call__(self, s: TaskState) -> Verdict | None:
        failure = s.last_failure
        assert failure is not None
        if not failure.retryable or failure.error_type not in s.policy.retryable:
            return _stop(
                s, f"{failure.error_type.value} is not in the retryable whitelist", self.name
            )
        return None


class stop_on_ambiguous_side_effect(Rule):  # noqa: N801
    """A side effect declared ``unsafe`` may have happened: never repeat it blindly."""

    name = "stop_on_ambiguous_side_effect"

    def __call__(self, s: TaskState) -> Verdict | None:
        if s.ambiguous:
            return _stop(
                s,
                f"ambiguous outcome of side effect {s.ambiguous}: it may have happened and is "
                "declared unsafe to repeat, so a person checks it",
                self.name,
            )
        return None


class hand_off_unclassified(Rule):  # noqa: N801
    """The seed design: a failure nobody can classify goes to a person early, not to a guess."""

    name = "hand_off_unclassified"

    def __call__(self, s: TaskState) -> Verdict | None:
        if _err(s) is ErrorType.UNKNOWN and s.policy.cap(ErrorType.UNKNOWN) < s.failures_of(
            ErrorType.UNKNOWN
        ):
            failure = s.last_failure
            code = failure.code if failure is not None and failure.code else "exception"
            return _stop(
                s,
                f"unclassified failure ({code}): no retry rule applies to it, so it goes to a "
                "person early instead of being retried blindly",
                self.name,
            )
        return None


class stop_on_budget(Rule):  # noqa: N801
    """The task's budget; ``budget`` fixes one instead of reading the (reloadable) policy's."""

    name = "stop_on_budget"

    def __init__(self, budget: TaskBudget | None = None) -> None:
        self.budget = budget

    def __repr__(self) -> str:
        return f"stop_on_budget({self.budget!r})" if self.budget is not None else "stop_on_budget()"

    def __call__(self, s: TaskState) -> Verdict | None:
        now = s.env.now() if s.env is not None else s.ledger.started_at
        reason = s.ledger.exhausted(self.budget or s.policy.budget, now)
        return _stop(s, reason, self.name) if reason else None


class stop_on_known_bad_input(Rule):  # noqa: N801
    name = "stop_on_known_bad_input"

    def __call__(self, s: TaskState) -> Verdict | None:
        limit = s.policy.rules.fingerprint_failure_limit
        seen = s.env.fingerprint_failures(s.fingerprint) if s.env is not None else 0
        if seen >= limit and _err(s) not in TRANSIENT_ERROR_TYPES:
            return _stop(
                s,
                f"this input failed {seen} times before (≥ {limit}): a retry will not fix it",
                self.name,
            )
        return None


class stop_at_phase_cap(Rule):  # noqa: N801
    name = "stop_at_phase_cap"

    def __init__(self, caps: Mapping[str, int] | None = None) -> None:
        self.caps = caps

    def __repr__(self) -> str:
        return f"stop_at_phase_cap({dict(self.caps)!r})" if self.caps is not None else "stop_at_phase_cap()"

    def __call__(self, s: TaskState) -> Verdict | None:
        cap = (self.caps if self.caps is not None else s.policy.phase_caps).get(s.phase)
        failed = s.failures_in_phase(s.phase)
        if cap is not None and failed >= cap:
            return _stop(s, f"phase {s.phase} failed {failed} times (cap {cap})", self.name)
        return None


class stop_at_class_cap(Rule):  # noqa: N801
    """Retries caused by one failure class are capped; a change of class earns one more try."""

    name = "stop_at_class_cap"

    def __init__(self, caps: Mapping[ErrorType, int] | None = None) -> None:
        self.caps = caps  # None: the policy's caps (they follow reloads)

    def __repr__(self) -> str:
        if self.caps is None:
            return "stop_at_class_cap()"
        return f"stop_at_class_cap({ {k.value: v for k, v in self.caps.items()} })"

    def __call__(self, s: TaskState) -> Verdict | None:
        error = _err(s)
        cap = self.caps.get(error, 0) if self.caps is not None else s.policy.cap(error)
        failed = s.failures_of(error)
        if failed <= cap:
            return None
        if error is ErrorType.CONTEXT_OVERFLOW and s.degradations < s.policy.rules.max_degradations:
            return None  # shrinking the input is not a retry of the same attempt
        if (
            s.policy.rules.extra_try_on_type_change
            and s.type_changed()
            and not s.extra_try_used
            and cap > 0
        ):
            return None
        if cap == 0:
            return _stop(s, f"{error.value}: the policy allows no retries of this class (cap 0)", self.name)
        return _stop(s, f"{error.value} retry cap reached ({failed - 1}/{cap} retries)", self.name)


class break_loops(Rule):  # noqa: N801
    """The same phase failing back to back for a non-transient reason is a loop."""

    name = "break_loops"

    def __call__(self, s: TaskState) -> Verdict | None:
        limit = s.policy.rules.same_phase_limit
        recent = s.failures[-limit:]
        if len(recent) < limit or s.phase_streak() < limit:
            return None
        if any(r.error_type in TRANSIENT_ERROR_TYPES for r in recent):
            return None
        if not s.relaxed and s.degradations < s.policy.rules.max_degradations:
            return Verdict(
                Decision.DEGRADE_PRECISION,
                f"phase {s.phase} failed {limit} times in a row: switching to simplified mode",
                rule=self.name,
            )
        return _stop(s, f"phase {s.phase} keeps failing even in simplified mode (loop)", self.name)


class protect_dependency(Rule):  # noqa: N801
    """Fleet retry budget and circuit breaker: fall back or fail fast, never pile on."""

    name = "protect_dependency"

    def __call__(self, s: TaskState) -> Verdict | None:
        if s.env is None or not s.dependency or _err(s) not in TRANSIENT_ERROR_TYPES:
            return None
        fallback = s.policy.fallbacks.get(s.dependency)
        if s.env.breaker_open(s.dependency):
            why = f"circuit breaker for {s.dependency} is open"
        elif not s.env.retry_allowed(s.dependency):
            why = f"fleet retry budget for {s.dependency} is spent (retries > {s.policy.fleet_budget.ratio:.0%} of calls)"
        else:
            return None
        if fallback:
            return Verdict(
                Decision.DEGRADE_DEPENDENCY,
                f"{why}: falling back to {fallback}",
                fallback=fallback,
                rule=self.name,
            )
        return _stop(s, f"{why}: failing fast", self.name)


_DEGRADE_FOR: dict[ErrorType, Decision] = {
    ErrorType.CONTEXT_OVERFLOW: Decision.DEGRADE_SCOPE,
    ErrorType.SCHEMA_MISMATCH: Decision.DEGRADE_PRECISION,
    ErrorType.VALIDATION: Decision.DEGRADE_PRECISION,
}


class degrade_after_failures(Rule):  # noqa: N801
    name = "degrade_after_failures"

    def __call__(self, s: TaskState) -> Verdict | None:
        n = s.type_streak()
        if n < s.policy.degrade_after or s.degradations >= s.policy.rules.max_degradations:
            return None
        error = _err(s)
        fallback = s.policy.fallbacks.get(s.dependency)
        if error in TRANSIENT_ERROR_TYPES and fallback:
            return Verdict(
                Decision.DEGRADE_DEPENDENCY,
                f"{n} failures in a row on {s.dependency}: using {fallback}",
                fallback=fallback,
                rule=self.name,
            )
        decision = _DEGRADE_FOR.get(error)
        if decision is Decision.DEGRADE_PRECISION and s.relaxed:
            decision = Decision.DEGRADE_SCOPE
        if decision is None:
            return None
        return Verdict(
            decision,
            f"{n} failures in a row ({error.value}): degrading before the cap",
            rule=self.name,
        )


class retry_by_class(Rule):  # noqa: N801
    """The default retry for each failure class."""

    name = "retry_by_class"

    def __init__(self, wait: Callable[[Any], float] | None = None) -> None:
        self.wait = wait  # None: the policy's backoff, e.g. wait_exponential(...) * jitter(0.3)

    def __repr__(self) -> str:
        return f"retry_by_class(wait={self.wait!r})" if self.wait is not None else "retry_by_class()"

    def __call__(self, s: TaskState) -> Verdict | None:
        error = _err(s)
        failure = s.last_failure
        assert failure is not None
        if error in TRANSIENT_ERROR_TYPES:
            wait_fn = self.wait or wait_from_policy(s.policy.backoff)
            wait = round(wait_fn(_BackoffView(s)))
            why = f"{error.value} is transient: retry after {wait} ms"
            if error is ErrorType.RATE_LIMIT and failure.retry_after_ms:
                why = f"rate limited: honouring Retry-After ({failure.retry_after_ms} ms), waiting {wait} ms"
            return Verdict(Decision.RETRY_BACKOFF, why, backoff_ms=wait, rule=self.name)
        if error is ErrorType.SCHEMA_MISMATCH:
            what = (
                f"field '{failure.missing_field}'"
                if failure.missing_field
                else "the expected schema"
            )
            return Verdict(
                Decision.PATCH_PROMPT,
                f"output did not match the schema: prompt now names {what}",
                rule=self.name,
            )
        if error is ErrorType.CONTEXT_OVERFLOW:
            return Verdict(
                Decision.DEGRADE_SCOPE, "context overflow: shrinking the batch", rule=self.name
            )
        return Verdict(
            Decision.REBUILD_CONTEXT,
            f"{error.value}: retry from a clean context with a one-line failure summary",
            rule=self.name,
        )


@dataclass
class _BackoffView:
    state: TaskState

    @property
    def retries(self) -> int:
        return self.state.retries + 1

    @property
    def retry_after_ms(self) -> int | None:
        return self.state.retry_after_ms

    @property
    def rng(self):  # noqa: ANN201
        return self.state.rng


def default_rules() -> Rule:
    """The governor's decision chain, in order."""
    return (
        stop_when_cancelled()
        | stop_when_killed()
        | stop_on_ambiguous_side_effect()
        | stop_unless_retryable()
        | hand_off_unclassified()
        | stop_on_budget()
        | stop_on_known_bad_input()
        | stop_at_phase_cap()
        | stop_at_class_cap()
        | break_loops()
        | protect_dependency()
        | degrade_after_failures()
        | retry_by_class()
    )


DEGRADE_SCOPE_FACTOR = 0.2  # shrink a batch 5× per degradation (the brief says 5–10×)


def record_failure(state: TaskState, failure_summary: str) -> None:
    """Add the last failure to the execution layer (before rules run)."""
    assert state.last_failure is not None
    state.failures.append(
        FailureRecord(
            state.attempt,
            state.phase,
            state.dependency,
            state.last_failure.error_type,
            failure_summary,
            state.current_step,
        )
    )
    state.consecutive_failures += 1


def apply_verdict(state: TaskState, verdict: Verdict) -> None:
    """Prepare the next attempt; the failed attempt's raw output never comes along."""
    d = verdict.decision
    if not verdict.retrying:
        return
    state.retries += 1
    if state.type_changed() and state.failures_of(state.failures[-1].error_type) > state.policy.cap(
        state.failures[-1].error_type
    ):
        state.extra_try_used = True
    summary = state.failures[-1].summary if state.failures else None
    if d is Decision.REBUILD_CONTEXT:
        state.failure_summary = summary
    elif d is Decision.PATCH_PROMPT:
        missing = state.last_failure.missing_field if state.last_failure else None
        state.patch = (
            f"Your answer must be valid JSON and include the field '{missing}'."
            if missing
            else "Your answer must be valid JSON matching the requested schema."
        )
    elif d is Decision.DEGRADE_SCOPE:
        state.scope *= DEGRADE_SCOPE_FACTOR
        state.degradations += 1
        state.degraded = True
    elif d is Decision.DEGRADE_PRECISION:
        state.relaxed = True
        state.degradations += 1
        state.degraded = True
    elif d is Decision.DEGRADE_DEPENDENCY:
        if verdict.fallback:
            state.substitutions[state.dependency] = verdict.fallback
            state.dependency = verdict.fallback
        state.degradations += 1
        state.degraded = True
