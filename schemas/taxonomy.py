"""Closed vocabularies shared by every RetryLens component.

They are closed on purpose: analytics group by them, policies are keyed by them and
agents in other languages validate against the exported JSON Schema, so a new value is a
schema change (and a new ``schema_version``), never a silent free-form string.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorType(StrEnum):
    """What kind of failure an attempt hit; drives per-class retry caps."""

    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    SERVER_ERROR = "server_error"
    NETWORK = "network"
    SCHEMA_MISMATCH = "schema_mismatch"
    VALIDATION = "validation"
    TOOL_ERROR = "tool_error"
    LOGIC = "logic"
    CONTEXT_OVERFLOW = "context_overflow"
    BUDGET_EXHAUSTED = "budget_exhausted"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"


#: Failures that a plain retry can fix: the cause is outside the attempt's input.
TRANSIENT_ERROR_TYPES: frozenset[ErrorType] = frozenset(
    {ErrorType.TIMEOUT, ErrorType.RATE_LIMIT, ErrorType.SERVER_ERROR, ErrorType.NETWORK}
)


class EventKind(StrEnum):
    """The step of a task's story that an event records."""

    TASK_STARTED = "task_started"
    ATTEMPT_STARTED = "attempt_started"
    ATTEMPT_FAILED = "attempt_failed"
    ATTEMPT_SUCCEEDED = "attempt_succeeded"
    DECISION = "decision"
    SIDE_EFFECT = "side_effect"
    HANDOFF = "handoff"
    TASK_FINISHED = "task_finished"


class Decision(StrEnum):
    """What the retry governor decided after a failure."""

    RETRY_SAME = "retry_same"
    RETRY_BACKOFF = "retry_backoff"
    REBUILD_CONTEXT = "rebuild_context"
    PATCH_PROMPT = "patch_prompt"
    DEGRADE_SCOPE = "degrade_scope"
    DEGRADE_PRECISION = "degrade_precision"
    DEGRADE_DEPENDENCY = "degrade_dependency"
    CANCEL_CHAIN = "cancel_chain"
    HANDOFF_HUMAN = "handoff_human"
    GIVE_UP = "give_up"
    NONE = "none"


#: Decisions after which the task makes another attempt.
RETRYING_DECISIONS: frozenset[Decision] = frozenset(
    {
        Decision.RETRY_SAME,
        Decision.RETRY_BACKOFF,
        Decision.REBUILD_CONTEXT,
        Decision.PATCH_PROMPT,
        Decision.DEGRADE_SCOPE,
        Decision.DEGRADE_PRECISION,
        Decision.DEGRADE_DEPENDENCY,
    }
)

#: Decisions that count as a degradation in the metrics.
DEGRADING_DECISIONS: frozenset[Decision] = frozenset(
    {Decision.DEGRADE_SCOPE, Decision.DEGRADE_PRECISION, Decision.DEGRADE_DEPENDENCY}
)


class SideEffectStatus(StrEnum):
    """Life of one side-effecting tool call guarded by an idempotency key."""

    INTENDED = "intended"
    COMMITTED = "committed"
    SKIPPED_DUPLICATE = "skipped_duplicate"
    FAILED = "failed"
    ROLLED_BACK = "rolled_back"


class TaskOutcome(StrEnum):
    """How a task ended; carried on ``task_finished`` events."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    HANDED_OFF = "handed_off"
    CANCELLED = "cancelled"
