"""A verdict (what the governor decided and why) and what it does to the task's state.

Rules only *read* the state; the two functions here are the only writers around a
decision: :func:`record_failure` adds the failure before the rules run, and
:func:`apply_verdict` prepares the next attempt from the verdict (a rebuilt context, a
patched prompt, a smaller scope, a fallback dependency). The offline replay calls the same
two (``retrylens.evaluation.replay_loop``), so a replayed task moves on exactly as a live one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from retrylens.schemas.taxonomy import RETRYING_DECISIONS, Decision, ErrorType

from .state import FailureRecord, TaskState


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


def stop_verdict(state: TaskState, reason: str, rule: str, handoff: bool | None = None) -> Verdict:
    """The verdict a stop gives: a person when ``handoff`` and the run has a channel, else give up.

    ``handoff=None`` reads the task's policy (``rules.handoff_when_stopped``), for stops
    decided outside a chain (the pre-attempt gate); rules pass their own setting.
    """
    if handoff is None:
        handoff = state.policy.rules.handoff_when_stopped
    to_person = handoff and state.env is not None and state.env.can_handoff()
    return Verdict(Decision.HANDOFF_HUMAN if to_person else Decision.GIVE_UP, reason, rule=rule)


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


def apply_verdict(
    state: TaskState, verdict: Verdict, caps: Mapping[ErrorType, int] | None = None
) -> None:
    """Prepare the next attempt; the failed attempt's raw output never comes along.

    ``caps`` (default: the task policy's) tells whether this retry is the extra try a
    change of failure class earns, so that it is granted once.
    """
    d = verdict.decision
    if not verdict.retrying:
        return
    state.retries += 1
    last = state.failures[-1].error_type if state.failures else None
    cap = (caps.get(last, 0) if caps is not None else state.policy.cap(last)) if last else 0
    if state.type_changed() and last is not None and state.failures_of(last) > cap:
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
