"""What a retry event is: the contract every other RetryLens part reads or writes."""

from .event import (
    SCHEMA_VERSION,
    AgentRef,
    ContextMessage,
    ContextSnapshot,
    ErrorDetail,
    EventTooLargeError,
    RetryEvent,
    SideEffect,
    json_schema,
)
from .limits import MAX_EVENT_BYTES
from .taxonomy import (
    DEGRADING_DECISIONS,
    RETRYING_DECISIONS,
    TRANSIENT_ERROR_TYPES,
    Decision,
    ErrorType,
    EventKind,
    SideEffectStatus,
    TaskOutcome,
)

__all__ = [
    "DEGRADING_DECISIONS",
    "MAX_EVENT_BYTES",
    "RETRYING_DECISIONS",
    "SCHEMA_VERSION",
    "TRANSIENT_ERROR_TYPES",
    "AgentRef",
    "ContextMessage",
    "ContextSnapshot",
    "Decision",
    "ErrorDetail",
    "ErrorType",
    "EventKind",
    "EventTooLargeError",
    "RetryEvent",
    "SideEffect",
    "SideEffectStatus",
    "TaskOutcome",
    "json_schema",
]
