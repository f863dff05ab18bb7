"""Import paths from before the SDK's rooms (issue 35): each is the same module object.

``import retrylens.sdk.features`` (now :mod:`retrylens.sdk.text.features`) keeps working, and
so do pickles, ``mock.patch("retrylens.sdk.features.task_features")`` and pytest's monkeypatch by the
old path: a meta-path finder, asked only after the real finders found nothing, answers an
old name with the module of its new one, so both names hold the same object and a patch
through either is seen by both. Nothing loads until an old path is imported.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

#: old import path -> where that module lives now
ALIASES: dict[str, str] = {
    "retrylens.sdk.adapters_langchain": "retrylens.sdk.integrations.langchain",
    "retrylens.sdk.adapters_langgraph": "retrylens.sdk.integrations.langgraph",
    "retrylens.sdk.adapters_openai_agents": "retrylens.sdk.integrations.openai_agents",
    "retrylens.sdk.adapters_pydantic_ai": "retrylens.sdk.integrations.pydantic_ai",
    "retrylens.sdk.adapters_tenacity": "retrylens.sdk.integrations.tenacity",
    "retrylens.sdk.ambiguity": "retrylens.sdk.core.ambiguity",
    "retrylens.sdk.attempt_scope": "retrylens.sdk.core.attempt_scope",
    "retrylens.sdk.attempts": "retrylens.sdk.core.attempts",
    "retrylens.sdk.awaitables": "retrylens.sdk.core.awaitables",
    "retrylens.sdk.backoff": "retrylens.sdk.core.backoff",
    "retrylens.sdk.breaker": "retrylens.sdk.core.breaker",
    "retrylens.sdk.budget": "retrylens.sdk.core.budget",
    "retrylens.sdk.chain": "retrylens.sdk.core.chain",
    "retrylens.sdk.client": "retrylens.sdk.transport.client",
    "retrylens.sdk.client_retries": "retrylens.sdk.integrations.providers.client_retries",
    "retrylens.sdk.clock": "retrylens.sdk.core.clock",
    "retrylens.sdk.context": "retrylens.sdk.text.context",
    "retrylens.sdk.drivers": "retrylens.sdk.core.drivers",
    "retrylens.sdk.effects": "retrylens.sdk.core.effects",
    "retrylens.sdk.events": "retrylens.sdk.core.events",
    "retrylens.sdk.features": "retrylens.sdk.text.features",
    "retrylens.sdk.first_try": "retrylens.sdk.core.first_try",
    "retrylens.sdk.governor": "retrylens.sdk.core.governor",
    "retrylens.sdk.handoff": "retrylens.sdk.transport.handoff",
    "retrylens.sdk.history": "retrylens.sdk.core.history",
    "retrylens.sdk.hot_reload": "retrylens.sdk.core.hot_reload",
    "retrylens.sdk.http_attempts": "retrylens.sdk.integrations.providers.http_attempts",
    "retrylens.sdk.http_resends": "retrylens.sdk.integrations.providers.http_resends",
    "retrylens.sdk.http_status": "retrylens.sdk.text.http_status",
    "retrylens.sdk.ids": "retrylens.sdk.core.ids",
    "retrylens.sdk.lazy_pattern": "retrylens.sdk.text.lazy_pattern",
    "retrylens.sdk.litellm_calls": "retrylens.sdk.integrations.litellm",
    "retrylens.sdk.loop": "retrylens.sdk.core.loop",
    "retrylens.sdk.number_checks": "retrylens.sdk.text.number_checks",
    "retrylens.sdk.observe_spans": "retrylens.sdk.integrations.providers.observe_spans",
    "retrylens.sdk.observing": "retrylens.sdk.integrations.providers.observing",
    "retrylens.sdk.operations": "retrylens.sdk.integrations.providers.operations",
    "retrylens.sdk.otel": "retrylens.sdk.integrations.otel",
    "retrylens.sdk.personal": "retrylens.sdk.text.personal",
    "retrylens.sdk.plain_calls": "retrylens.sdk.integrations.providers.plain_calls",
    "retrylens.sdk.policy": "retrylens.sdk.core.policy",
    "retrylens.sdk.policy_chain": "retrylens.sdk.core.policy_chain",
    "retrylens.sdk.policy_source": "retrylens.sdk.core.policy_source",
    "retrylens.sdk.preflight": "retrylens.sdk.core.preflight",
    "retrylens.sdk.processors": "retrylens.sdk.text.processors",
    "retrylens.sdk.provider_calls": "retrylens.sdk.integrations.providers.provider_calls",
    "retrylens.sdk.provider_hook": "retrylens.sdk.integrations.providers.provider_hook",
    "retrylens.sdk.provider_send": "retrylens.sdk.integrations.providers.provider_send",
    "retrylens.sdk.recording": "retrylens.sdk.core.recording",
    "retrylens.sdk.redaction": "retrylens.sdk.text.redaction",
    "retrylens.sdk.refs": "retrylens.sdk.text.refs",
    "retrylens.sdk.resent_verdicts": "retrylens.sdk.integrations.providers.resent_verdicts",
    "retrylens.sdk.retry_rules": "retrylens.sdk.core.retry_rules",
    "retrylens.sdk.rule_chain": "retrylens.sdk.core.rule_chain",
    "retrylens.sdk.rules": "retrylens.sdk.core.rules",
    "retrylens.sdk.run": "retrylens.sdk.core.run",
    "retrylens.sdk.run_events": "retrylens.sdk.core.run_events",
    "retrylens.sdk.sanitizer": "retrylens.sdk.text.sanitizer",
    "retrylens.sdk.shadow": "retrylens.sdk.core.shadow",
    "retrylens.sdk.side_effects": "retrylens.sdk.core.side_effects",
    "retrylens.sdk.state": "retrylens.sdk.core.state",
    "retrylens.sdk.steps": "retrylens.sdk.core.steps",
    "retrylens.sdk.stop_rules": "retrylens.sdk.core.stop_rules",
    "retrylens.sdk.stopping": "retrylens.sdk.core.stopping",
    "retrylens.sdk.tools": "retrylens.sdk.core.tools",
    "retrylens.sdk.unawaited": "retrylens.sdk.core.unawaited",
    "retrylens.sdk.usage": "retrylens.sdk.core.usage",
    "retrylens.sdk.verdicts": "retrylens.sdk.core.verdicts",
    "retrylens.sdk.word_hashes": "retrylens.sdk.text.word_hashes",
}


class _Alias:
    """Loads an old path as the module of its new one (the same object).

    A plain class, not an ``importlib.abc.Loader``: that module loads ``importlib.resources``,
    a cost every agent would pay at ``import retrylens.sdk``.
    """

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # the import system set the alias's spec; the module keeps its own


class OldPaths:
    """Finds the SDK's old module paths (:data:`ALIASES`)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        new = ALIASES.get(fullname)
        if new is None:
            return None
        from importlib.machinery import ModuleSpec  # only when an old path is imported

        return ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (once): real modules are always found first."""
    if not any(isinstance(finder, OldPaths) for finder in sys.meta_path):
        sys.meta_path.append(OldPaths())
