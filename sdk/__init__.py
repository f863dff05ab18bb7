"""The RetryLens agent SDK: every retry decided explicitly, protected and recorded.

    from retrylens.sdk import Governor, build_emitter, load_policy

    emitter = build_emitter()                     # Kafka if configured, else the local spool
    governor = Governor(load_policy("policy.yaml"), project="shop", emit=emitter.emit)
    answer = governor.call(ask_model, goal=question, agent="support", dependency="gpt-4o")

What an agent needs is here; everything else (rules and waits to compose, context
hygiene, the sanitizer, framework adapters) is in its submodule: ``retrylens.sdk.core.rules``,
``.core.backoff``, ``.text.context``, ``.text.sanitizer``, ``.integrations.langchain`` and so on. Names load
on first use (PEP 562), so importing the SDK costs a few milliseconds and an agent pays
only for what it touches; nothing here imports the RetryLens server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .old_paths import install as _install_old_paths

# every import path from before the rooms (retrylens.sdk.features, ...) is the same module
_install_old_paths()

#: public name → submodule that defines it
_EXPORTS: dict[str, str] = {
    # governing calls
    "Governor": "core.governor",
    "TaskRun": "core.run",
    "Attempt": "core.state",
    "Usage": "core.usage",
    "Failure": "text.sanitizer",
    "current_run": "core.governor",
    "observe": "integrations.providers.observing",
    # emitting events
    "build_emitter": "transport.build",
    "Emitter": "transport.emitter",
    "EmitterSettings": "transport.settings",
    # the policy in force
    "RetryPolicy": "core.policy",
    "load_policy": "core.policy",
    "parse_policy": "core.policy",
    "policy_from_env": "core.policy",
    "PolicySource": "core.policy_source",
    "FileWatcher": "core.hot_reload",
    "ApiPoller": "core.hot_reload",
    "poll_in_background": "core.hot_reload",
    # side effects and hand-offs
    "MemoryKeyStore": "core.side_effects",
    "SqliteKeyStore": "core.side_effects",
    "ClickHouseKeyStore": "core.side_effects",
    "HandoffPackage": "transport.handoff",
    "CallbackChannel": "transport.handoff",
    "FileChannel": "transport.handoff",
    "WebhookChannel": "transport.handoff",
    # the RetryLens API
    "Preflight": "core.preflight",
    "RetryLensClient": "transport.client",
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

    from .core.governor import Governor, current_run
    from .core.hot_reload import ApiPoller, FileWatcher, poll_in_background
    from .core.policy import RetryPolicy, load_policy, parse_policy, policy_from_env
    from .core.policy_source import PolicySource
    from .core.preflight import Preflight
    from .core.run import TaskRun
    from .core.side_effects import ClickHouseKeyStore, MemoryKeyStore, SqliteKeyStore
    from .core.state import Attempt
    from .core.usage import Usage
    from .integrations.providers.observing import observe
    from .text.sanitizer import Failure
    from .transport.build import build_emitter
    from .transport.client import RetryLensClient
    from .transport.emitter import Emitter
    from .transport.handoff import CallbackChannel, FileChannel, HandoffPackage, WebhookChannel
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
