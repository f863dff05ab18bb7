"""What a retry event is: the contract every other RetryLens part reads or writes.

The vocabularies (:mod:`.taxonomy`) and size bounds (:mod:`.limits`) are plain Python and
load at once; the pydantic model (:mod:`.event`) loads on first use of one of its names,
so the agent SDK can share the vocabulary without paying for pydantic at import time.
"""

from typing import TYPE_CHECKING, Any

from retrylens.errors import EventTooLargeError

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

if TYPE_CHECKING:
    from .event import (
        SCHEMA_VERSION,
        AgentRef,
        ContextMessage,
        ContextSnapshot,
        ErrorDetail,
        RetryEvent,
        SideEffect,
        json_schema,
    )

_FROM_EVENT = frozenset(
    {
        "SCHEMA_VERSION",
        "AgentRef",
        "ContextMessage",
        "ContextSnapshot",
        "ErrorDetail",
        "RetryEvent",
        "SideEffect",
        "json_schema",
    }
)


def __getattr__(name: str) -> Any:
    if name in _FROM_EVENT:
        from . import event

        return getattr(event, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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
