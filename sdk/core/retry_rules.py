"""The rules that keep a task going: degrade after repeated failures, else retry by failure class.

They come last in a chain, after every stop rule has let the failure through
(:mod:`.stop_rules`). ``retry_by_class`` is the default answer for any class: transient
failures wait (a :mod:`.backoff` wait, composable), a schema mismatch patches the prompt,
a context overflow shrinks the batch, anything else retries from a clean context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from retrylens.schemas.taxonomy import TRANSIENT_ERROR_TYPES, Decision, ErrorType

from .backoff import default_wait
from .rule_chain import Rule, _describe, _err
from .state import TaskState
from .verdicts import Verdict

_DEGRADE_FOR: dict[ErrorType, Decision] = {
    ErrorType.CONTEXT_OVERFLOW: Decision.DEGRADE_SCOPE,
    ErrorType.SCHEMA_MISMATCH: Decision.DEGRADE_PRECISION,
    ErrorType.VALIDATION: Decision.DEGRADE_PRECISION,
}


class degrade_after_failures(Rule):  # noqa: N801
    """``after`` failures of one class in a row: degrade (fallback, smaller scope, simpler mode)."""

    name = "degrade_after_failures"

    def __init__(
        self,
        after: int = 2,
        *,
        max_degradations: int = 2,
        fallbacks: Mapping[str, str] | None = None,
    ) -> None:
        self.after, self.max_degradations = after, max_degradations
        self.fallbacks = dict(fallbacks or {})

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        keywords: dict[str, Any] = {}
        if self.max_degradations != 2:
            keywords["max_degradations"] = self.max_degradations
        if self.fallbacks:
            keywords["fallbacks"] = self.fallbacks
        return (self.after,), keywords

    def answers_for(self) -> frozenset[ErrorType]:
        # a transient failure degrades only to a fallback dependency; others by _DEGRADE_FOR
        classes = frozenset(_DEGRADE_FOR)
        return classes | TRANSIENT_ERROR_TYPES if self.fallbacks else classes

    def __call__(self, s: TaskState) -> Verdict | None:
        n = s.type_streak()
        if n < self.after or s.degradations >= self.max_degradations:
            return None
        error = _err(s)
        fallback = self.fallbacks.get(s.dependency)
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
    """The default retry for each failure class; transient ones wait ``wait(view)`` ms first.

    ``wait`` is any callable of a view with ``retries``, ``retry_after_ms`` and ``rng``
    (:mod:`.backoff`'s waits compose; a plain function works too).
    """

    name = "retry_by_class"

    def __init__(self, wait: Callable[[Any], float] | None = None) -> None:
        self.wait = default_wait() if wait is None else wait

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (), {"wait": self.wait}

    def __repr__(self) -> str:
        return f"retry_by_class(wait={_describe(self.wait)})"

    def __call__(self, s: TaskState) -> Verdict | None:
        failure = s.last_failure
        assert failure is not None, "rules run after a failure"
        error = failure.error_type
        if error in TRANSIENT_ERROR_TYPES:
            wait = round(self.wait(_BackoffView(s)))
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


class _BackoffView:
    """What a wait sees of the task: the retry about to happen (1-based), Retry-After, the rng.

    ``retries`` counts from where the step in progress began (``TaskState.backoff_from``):
    a step's retries back off from the base, whatever earlier steps spent, so a long task
    with one blip per step waits the base each time, not a wait grown by the whole task.
    Read once per decision into slots (a composed wait reads them several times).
    """

    __slots__ = ("state", "retries", "retry_after_ms", "rng")

    def __init__(self, state: TaskState) -> None:
        self.state = state
        self.retries: int = state.retries - state.backoff_from + 1
        self.retry_after_ms: int | None = state.retry_after_ms
        self.rng = state.rng
