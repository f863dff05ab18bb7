"""The two questions users ask of a failure: will it pass by itself, and whose fault is it.

Why: a failure group or an input fingerprint is only actionable once you know whether a
retry can fix it (**transient** vs **permanent**) and whether to look at a dependency or at
the input (**dependency** vs **input**). Temporal reports a workflow's
``last_attempt_cause``; PostHog grades its ingestion warnings by severity. Here both come
from the taxonomy first and from the history second:

- persistence: the error types of :data:`~retrylens.schemas.taxonomy.TRANSIENT_ERROR_TYPES`
  are transient, every other classified type permanent (``unknown``: not classified);
- cause: the same input failing on :data:`INPUT_DEPENDENCIES` or more dependencies is the
  input's fault whatever the error type (the history outweighs the taxonomy); otherwise the
  error type decides (:data:`DEPENDENCY_ERROR_TYPES` → dependency,
  :data:`INPUT_ERROR_TYPES` → input, the rest ``unknown``).

"Retries exhausted" is a measure of its own (:data:`RETRIES_EXHAUSTED`): a task the governor
stopped because a retry cap or its budget ran out, not because retrying could not help.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from retrylens.schemas.taxonomy import TRANSIENT_ERROR_TYPES, ErrorType

Persistence = Literal["transient", "permanent", "unknown"]
Cause = Literal["dependency", "input", "unknown"]

#: Failures caused by what the attempt called (a model provider, an API, a tool's backend).
DEPENDENCY_ERROR_TYPES: frozenset[str] = frozenset(
    t.value for t in (*TRANSIENT_ERROR_TYPES, ErrorType.TOOL_ERROR)
)
#: Failures caused by what the attempt was given (the task's input or its context).
INPUT_ERROR_TYPES: frozenset[str] = frozenset(
    t.value
    for t in (ErrorType.SCHEMA_MISMATCH, ErrorType.VALIDATION, ErrorType.LOGIC, ErrorType.CONTEXT_OVERFLOW)
)
_TRANSIENT: frozenset[str] = frozenset(t.value for t in TRANSIENT_ERROR_TYPES)
_UNCLASSIFIED: frozenset[str] = frozenset({"", ErrorType.UNKNOWN.value})
#: The same input failing on this many distinct dependencies is the input's fault.
INPUT_DEPENDENCIES = 2

#: SQL over ``events``: the decision that stopped a task because its retries ran out — a
#: retry cap (class or phase) or the task's budget. These reasons are the governor's
#: (``retrylens.sdk.core.rules``: ``stop_at_class_cap``, ``stop_at_phase_cap``, ``stop_on_budget``).
RETRIES_EXHAUSTED = (
    "(kind = 'decision' AND decision IN ('give_up', 'handoff_human') AND ("
    "positionCaseInsensitive(decision_reason, 'retry cap reached') > 0"
    " OR positionCaseInsensitive(decision_reason, 'budget exhausted') > 0"
    " OR match(decision_reason, '\\\\(cap [0-9]+\\\\)')))"
)


def persistence_of(error_types: Iterable[str]) -> Persistence:
    """Transient when every classified type is transient, permanent when any is not."""
    known = {t for t in error_types if t not in _UNCLASSIFIED}
    if not known:
        return "unknown"
    return "transient" if known <= _TRANSIENT else "permanent"


def cause_of(error_types: Iterable[str], *, dependencies_per_input: int = 0) -> Cause:
    """Input when one input failed on several dependencies, else by the error types (the
    input's types win a mix: a bad input also makes dependencies fail)."""
    if dependencies_per_input >= INPUT_DEPENDENCIES:
        return "input"
    known = set(error_types)
    if known & INPUT_ERROR_TYPES:
        return "input"
    if known & DEPENDENCY_ERROR_TYPES:
        return "dependency"
    return "unknown"
