"""The RetryLens agent SDK: every retry decided explicitly, protected and recorded.

    from retrylens.sdk import Governor, build_emitter, load_policy

    emitter = build_emitter()                     # Kafka if configured, else the local spool
    governor = Governor(load_policy("policy.yaml"), project="shop", emit=emitter.emit)
    answer = governor.call(ask_model, goal=question, agent="support", dependency="gpt-4o")

What an agent needs is here; everything else (rules and waits to compose, context
hygiene, the sanitizer, framework adapters) is in its submodule: ``retrylens.sdk.rules``,
``.backoff``, ``.context``, ``.sanitizer``, ``.adapters_langchain`` and so on. Names load
on first use (PEP 562), so importing the SDK costs a few milliseconds and an agent pays
only for what it touches; nothing here imports the RetryLens server.
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
    "Usage": "usage",
    "Failure": "sanitizer",
    "current_run": "governor",
    "observe": "observing",
    # emitting events
    "build_emitter": "transport.build",
    "Emitter": "transport.emitter",
    "EmitterSettings": "transport.settings",
    # the policy in force
    "RetryPolicy": "policy",
    "load_policy": "policy",
    "parse_policy": "policy",
    "policy_from_env": "policy",
    "PolicySource": "policy_source",
    "FileWatcher": "hot_reload",
    "ApiPoller": "hot_reload",
    "poll_in_background": "hot_reload",
    # side effects and hand-offs
    "MemoryKeyStore": "side_effects",
    "SqliteKeyStore": "side_effects",
    "ClickHouseKeyStore": "side_effects",
    "HandoffPackage": "handoff",
    "CallbackChannel": "handoff",
    "FileChannel": "handoff",
    "WebhookChannel": "handoff",
    # the RetryLens API
    "Preflight": "preflight",
    "RetryLensClient": "client",
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
    "Usage",
    "Failure",
    "current_run",
    "observe",
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
    "MemoryKeyStore",
    "SqliteKeyStore",
    "ClickHouseKeyStore",
    "HandoffPackage",
    "CallbackChannel",
    "FileChannel",
    "WebhookChannel",
    "Preflight",
    "RetryLensClient",
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

    from .client import RetryLensClient
    from .governor import Governor, current_run
    from .handoff import CallbackChannel, FileChannel, HandoffPackage, WebhookChannel
    from .hot_reload import ApiPoller, FileWatcher, poll_in_background
    from .observing import observe
    from .policy import RetryPolicy, load_policy, parse_policy, policy_from_env
    from .policy_source import PolicySource
    from .preflight import Preflight
    from .run import TaskRun
    from .sanitizer import Failure
    from .side_effects import ClickHouseKeyStore, MemoryKeyStore, SqliteKeyStore
    from .state import Attempt
    from .transport.build import build_emitter
    from .transport.emitter import Emitter
    from .transport.settings import EmitterSettings
    from .usage import Usage


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
