"""The retry event, schema version 1.

One event records one step of a governed task: an attempt starting, failing or
succeeding, a governor decision, a side effect, a hand-off, the task's end. Events are
immutable facts keyed by a client-generated ``event_id``; every store and metric
deduplicates on it, so a producer may safely send an event twice.

A task's events: ``task_started`` (with ``input_features``), per attempt
``attempt_started`` then ``attempt_failed`` + ``decision`` or ``attempt_succeeded``
(plus any ``side_effect``/``handoff``), and ``task_finished`` (with ``outcome``).

**Compact form.** A task whose first attempt succeeds cleanly (no failure, side effect
or other event) may be recorded as ONE ``attempt_succeeded`` event with ``attempt=1``,
``outcome='succeeded'`` and the task's ``input_features``/``input_fingerprint``: it
stands for task_started + attempt_started + attempt_succeeded + task_finished. Readers
therefore take a task's outcome from any event whose ``outcome`` is set (only
``task_finished`` and a compact event carry one) and its features from the first event
that has them; it counts as one call (one attempt correlation id). Any failure or retry
keeps the full sequence. The governor's ``call``/``acall`` emit it (``retrylens.sdk``).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from retrylens.errors import EventTooLargeError

from . import limits
from .taxonomy import Decision, ErrorType, EventKind, SideEffectStatus, TaskOutcome

SCHEMA_VERSION = 1

HexTraceId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
HexSpanId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16}$")]
HexDigest = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16,64}$")]
Identifier = Annotated[
    str, StringConstraints(min_length=1, max_length=limits.MAX_ID_CHARS, pattern=r"^[^\x00-\x1f]+$")
]
Name = Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_NAME_CHARS)]
ShortText = Annotated[str, StringConstraints(max_length=limits.MAX_NAME_CHARS)]
FeatureKey = Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_FEATURE_KEY_CHARS)]
FeatureValue = (
    bool
    | Annotated[int, Field(ge=limits.MIN_FEATURE_INT, le=limits.MAX_FEATURE_INT)]
    | float
    | Annotated[str, StringConstraints(max_length=limits.MAX_FEATURE_VALUE_CHARS)]
)


def utc_now_ms() -> datetime:
    """Now, in UTC, truncated to the store's millisecond resolution."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentRef(_Part):
    """Which agent emitted the event; ``role`` keys per-role policy overrides."""

    name: Name
    role: ShortText = ""


class ErrorDetail(_Part):
    """Bounded, already-redacted facts about a failure (never a raw traceback)."""

    message: Annotated[str, StringConstraints(max_length=limits.MAX_ERROR_MESSAGE_CHARS)] = ""
    code: ShortText = ""
    status: int | None = Field(default=None, ge=0, le=999)
    stack_digest: HexDigest | None = None


class ContextMessage(_Part):
    role: ShortText
    content: Annotated[str, StringConstraints(max_length=limits.MAX_MESSAGE_CHARS)]


class ContextSnapshot(_Part):
    """What an attempt was given, as counts and digests rather than raw text.

    ``is_delta`` marks a snapshot that only lists what changed since the task's
    previous attempt (the log-noise rule: full snapshot on the first failure only).
    """

    message_count: int = Field(ge=0, le=limits.MAX_COUNT)
    token_count: int = Field(default=0, ge=0, le=limits.MAX_COUNT)
    message_digests: list[HexDigest] = Field(default_factory=list, max_length=limits.MAX_MESSAGE_DIGESTS)
    last_messages: list[ContextMessage] = Field(default_factory=list, max_length=limits.MAX_LAST_MESSAGES)
    pollution_score: float = Field(default=0.0, ge=0.0, le=1.0)
    is_delta: bool = False
    #: Messages at the end of the context that carry error text, back to back.
    trailing_errors: int = Field(default=0, ge=0, le=limits.MAX_COUNT)
    #: Share of the last N (the SDK's ``RECENT_WINDOW``) messages that carry error text.
    recent_error_share: float = Field(default=0.0, ge=0.0, le=1.0)
    #: The attempt's tool calls identical (name and arguments) to the call just before.
    repeated_tool_calls: int = Field(default=0, ge=0, le=limits.MAX_COUNT)


class SideEffect(_Part):
    """One side-effecting tool call and the idempotency key that guards it."""

    tool: Name
    idempotency_key: Identifier
    status: SideEffectStatus
    rollback: ShortText | None = None


class RetryEvent(_Part):
    """A retry event (schema v1). See ``retry_event.v1.schema.json`` for other languages."""

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: uuid.UUID = Field(default_factory=uuid.uuid4)
    ts: AwareDatetime = Field(default_factory=lambda: utc_now_ms())
    project: Identifier
    agent: AgentRef
    task_id: Identifier
    correlation_id: Identifier
    parent_task_id: Identifier | None = None
    trace_id: HexTraceId | None = None
    span_id: HexSpanId | None = None
    parent_span_id: HexSpanId | None = None
    attempt: int = Field(default=0, ge=0, le=limits.MAX_ATTEMPT)
    phase: ShortText = ""
    kind: EventKind
    dependency: ShortText = ""
    error_type: ErrorType | None = None
    retryable: bool | None = None
    error_detail: ErrorDetail | None = None
    input_fingerprint: HexDigest | None = None
    input_features: dict[FeatureKey, FeatureValue] = Field(
        default_factory=dict, max_length=limits.MAX_INPUT_FEATURES
    )
    context_snapshot: ContextSnapshot | None = None
    side_effects: list[SideEffect] = Field(default_factory=list, max_length=limits.MAX_SIDE_EFFECTS)
    decision: Decision = Decision.NONE
    decision_reason: Annotated[str, StringConstraints(max_length=limits.MAX_REASON_CHARS)] = ""
    backoff_ms: int = Field(default=0, ge=0, le=86_400_000)
    policy_id: ShortText = ""
    policy_version: ShortText = ""
    shadow: bool = False
    shadow_decision: Decision | None = None
    propensity: float | None = Field(default=None, gt=0.0, le=1.0)
    degraded: bool = False
    outcome: TaskOutcome | None = None
    tokens_in: int = Field(default=0, ge=0, le=limits.MAX_COUNT)
    tokens_out: int = Field(default=0, ge=0, le=limits.MAX_COUNT)
    cost_usd: float = Field(default=0.0, ge=0.0, le=limits.MAX_COST_USD, allow_inf_nan=False)
    latency_ms: int = Field(default=0, ge=0, le=limits.MAX_COUNT)

    @field_validator("ts")
    @classmethod
    def _utc_milliseconds(cls, value: datetime) -> datetime:
        """Store time as UTC at millisecond precision, the resolution of the store."""
        try:
            value = value.astimezone(UTC)
        except OverflowError:
            raise ValueError("timestamp has no UTC equivalent (out of range)") from None
        return value.replace(microsecond=value.microsecond // 1000 * 1000)

    @model_validator(mode="after")
    def _consistent(self) -> RetryEvent:
        if self.kind == EventKind.ATTEMPT_FAILED and self.error_type is None:
            raise ValueError("attempt_failed events need an error_type")
        if self.shadow and self.shadow_decision is None:
            raise ValueError("shadow=true needs a shadow_decision")
        if self.kind == EventKind.TASK_FINISHED and self.outcome is None:
            raise ValueError("task_finished events need an outcome")
        compact_outcome = self.outcome in (None, TaskOutcome.SUCCEEDED)
        if self.kind == EventKind.ATTEMPT_SUCCEEDED and not compact_outcome:
            raise ValueError("attempt_succeeded may only carry outcome 'succeeded' (compact form)")
        return self

    def to_json_bytes(self) -> bytes:
        """Serialize compactly; raises :class:`EventTooLargeError` past the size limit."""
        payload = self.__pydantic_serializer__.to_json(self)
        if len(payload) > limits.MAX_EVENT_BYTES:
            raise EventTooLargeError(len(payload))
        return payload

    @classmethod
    def from_json_bytes(cls, payload: bytes | str) -> RetryEvent:
        """Parse and validate one serialized event (no size check: see the processor)."""
        return cls.model_validate_json(payload)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`RetryEvent` as published for non-Python agents."""
    schema = RetryEvent.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://retrylens.dev/schemas/retry_event.v1.schema.json"
    schema["description"] = (
        "RetryLens retry event, schema version 1. Serialized size must not exceed "
        f"{limits.MAX_EVENT_BYTES} bytes."
    )
    return schema
