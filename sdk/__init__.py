"""The RetryLens agent SDK: every retry decided explicitly, protected and recorded.

    from retrylens.sdk import Governor, build_emitter, load_policy

    emitter = build_emitter()                     # Kafka if configured, else the local spool
    governor = Governor(load_policy("policy.yaml"), project="shop", emit=emitter.emit)
    answer = governor.call(ask_model, goal=question, agent="support", dependency="gpt-4o")

Names load on first use (PEP 562), so importing the SDK costs a few milliseconds and an
agent pays only for what it touches; nothing here imports the RetryLens server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name → submodule that defines it
_EXPORTS: dict[str, str] = {
    # governing calls
    "Governor": "governor",
    "TaskRun": "run",
    "Attempt": "state",
    "TaskState": "state",
    "Verdict": "rules",
    "current_run": "governor",
    "VirtualClock": "governor",
    # emitting events
    "build_emitter": "transport.build",
    "Emitter": "transport.emitter",
    "EmitterSettings": "transport.settings",
    # policy and its parts
    "RetryPolicy": "policy",
    "load_policy": "policy",
    "parse_policy": "policy",
    "policy_from_env": "policy",
    "PolicySource": "policy_source",
    "FileWatcher": "hot_reload",
    "ApiPoller": "hot_reload",
    "poll_in_background": "hot_reload",
    "Rule": "rules",
    "default_rules": "rules",
    "wait_exponential": "backoff",
    "wait_retry_after": "backoff",
    "wait_none": "backoff",
    "jitter": "backoff",
    "CircuitBreaker": "breaker",
    "RetryThrottle": "budget",
    "TaskLedger": "budget",
    "FailureHistory": "history",
    # failures, context, side effects
    "Failure": "sanitizer",
    "classify": "sanitizer",
    "redact": "sanitizer",
    "ContextBuilder": "context",
    "drop_echoed_input": "context",
    "pollution_score": "context",
    "snapshot": "context",
    "idempotency_key": "side_effects",
    "MemoryKeyStore": "side_effects",
    "SqliteKeyStore": "side_effects",
    "ClickHouseKeyStore": "side_effects",
    # hand-off, pre-flight, features
    "HandoffPackage": "handoff",
    "CallbackChannel": "handoff",
    "FileChannel": "handoff",
    "WebhookChannel": "handoff",
    "Preflight": "preflight",
    "PrecheckRequest": "preflight",
    "PrecheckResponse": "preflight",
    "RetryLensClient": "client",
    "extract_input_features": "features",
    "input_fingerprint": "features",
    # adapters
    "TenacityHooks": "adapters_tenacity",
}
#: errors live in retrylens.errors (one hierarchy for the whole package)
_ERRORS = (
    "GovernorError",
    "PolicyError",
    "TaskStopped",
    "GaveUp",
    "HandedOff",
    "ChainCancelled",
    "SideEffectError",
)

__all__ = [
    "Governor",
    "TaskRun",
    "Attempt",
    "TaskState",
    "Verdict",
    "current_run",
    "VirtualClock",
    "build_emitter",
    "Emitter",
    "EmitterSettings",
    "RetryPolicy",
    "load_policy",
    "parse_policy",
    "policy_from_env",
    "PolicySource",
    "FileWatcher",
    "ApiPoller",
    "poll_in_background",
    "Rule",
    "default_rules",
    "wait_exponential",
    "wait_retry_after",
    "wait_none",
    "jitter",
    "CircuitBreaker",
    "RetryThrottle",
    "TaskLedger",
    "FailureHistory",
    "Failure",
    "classify",
    "redact",
    "ContextBuilder",
    "drop_echoed_input",
    "pollution_score",
    "snapshot",
    "idempotency_key",
    "MemoryKeyStore",
    "SqliteKeyStore",
    "ClickHouseKeyStore",
    "HandoffPackage",
    "CallbackChannel",
    "FileChannel",
    "WebhookChannel",
    "Preflight",
    "PrecheckRequest",
    "PrecheckResponse",
    "RetryLensClient",
    "extract_input_features",
    "input_fingerprint",
    "TenacityHooks",
    "GovernorError",
    "PolicyError",
    "TaskStopped",
    "GaveUp",
    "HandedOff",
    "ChainCancelled",
    "SideEffectError",
]

if TYPE_CHECKING:
    from retrylens.errors import (
        ChainCancelled,
        GaveUp,
        GovernorError,
        HandedOff,
        PolicyError,
        SideEffectError,
        TaskStopped,
    )

    from .adapters_tenacity import TenacityHooks
    from .backoff import jitter, wait_exponential, wait_none, wait_retry_after
    from .breaker import CircuitBreaker
    from .budget import RetryThrottle, TaskLedger
    from .client import RetryLensClient
    from .context import ContextBuilder, drop_echoed_input, pollution_score, snapshot
    from .features import extract_input_features, input_fingerprint
    from .governor import Governor, VirtualClock, current_run
    from .handoff import CallbackChannel, FileChannel, HandoffPackage, WebhookChannel
    from .history import FailureHistory
    from .hot_reload import ApiPoller, FileWatcher, poll_in_background
    from .policy import RetryPolicy, load_policy, parse_policy, policy_from_env
    from .policy_source import PolicySource
    from .preflight import PrecheckRequest, PrecheckResponse, Preflight
    from .rules import Rule, Verdict, default_rules
    from .run import TaskRun
    from .sanitizer import Failure, classify, redact
    from .side_effects import ClickHouseKeyStore, MemoryKeyStore, SqliteKeyStore, idempotency_key
    from .state import Attempt, TaskState
    from .transport.build import build_emitter
    from .transport.emitter import Emitter
    from .transport.settings import EmitterSettings


def __getattr__(name: str) -> Any:
    if name in _ERRORS:
        from retrylens import errors

        return getattr(errors, name)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
