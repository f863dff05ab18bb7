"""One state object per governed task: task, execution and context layers.

Every rule reads a :class:`TaskState`, every event is built from it, and its ``repr`` is
what you want to see in a debugger or a failing test.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from retrylens.schemas.taxonomy import Decision, ErrorType

from ..text.context import ContextBuilder, Message, digest, tool_call_digest
from ..text.sanitizer import Failure
from .budget import TaskLedger
from .usage import Usage, usage_of

if TYPE_CHECKING:
    from retrylens.schemas import AgentRef

    from .policy import RetryPolicy


class Environment(Protocol):
    """What rules may read about the world beyond one task (read-only)."""

    def now(self) -> float: ...
    def breaker_open(self, dependency: str) -> bool: ...
    def retry_allowed(self, dependency: str) -> bool: ...
    def fingerprint_failures(self, fingerprint: str) -> int: ...
    def can_handoff(self) -> bool: ...


@dataclass
class FailureRecord:
    attempt: int
    phase: str
    dependency: str
    error_type: ErrorType
    summary: str
    step: str = ""  # the step that failed ("" for the task as a whole)


@dataclass
class Attempt:
    """What one attempt is given: its context and the governor's adaptations."""

    number: int
    phase: str
    dependency: str
    correlation_id: str
    span_id: str
    started_at: float
    messages: list[Message]
    scope: float = 1.0
    relaxed: bool = False
    patch: str | None = None
    degraded: bool = False
    usage: Usage | None = None
    policy: Any = None  # the RetryPolicy this attempt ran under (its events name it)
    charged_tokens: int = 0  # already charged to the budget (by steps, as they completed)
    charged_cost: float = 0.0
    tool_calls: list[str] = field(default_factory=list)  # digests of (name, canonical args)

    def tool_call(self, name: str, args: Any = None) -> bool:
        """Record that this attempt called tool ``name`` with ``args``; True if it repeats the
        call just before it exactly (a loop). Only a digest is kept, never the arguments.

        ``side_effect`` and the adapters call it; call it yourself for other tools:
        ``attempt.tool_call("search", {"q": query})``. The attempt's snapshot reports how many
        calls repeated the previous one (``repeated_tool_calls``).
        """
        call = tool_call_digest(name, args)
        repeats = bool(self.tool_calls) and self.tool_calls[-1] == call
        self.tool_calls.append(call)
        return repeats

    def report(self, usage: Usage | Any = None, /, **fields: Any) -> Usage:
        """Add what this attempt spent: a :class:`Usage`, a provider's usage object, or fields.

        ``attempt.report(Usage(tokens_in=900, cost_usd=0.004))``,
        ``attempt.report(openai_response)`` or ``attempt.report(tokens_out=120)``; reports
        add up. Budgets (``max_tokens``, ``max_cost_usd``) and events use the total.
        """
        spent = Usage(**fields) if usage is None else usage_of(usage) or Usage()
        self.usage = spent if self.usage is None else self.usage + spent
        return self.usage

    def __repr__(self) -> str:
        flags = [
            f
            for f, on in (
                ("relaxed", self.relaxed),
                ("patched", bool(self.patch)),
                ("degraded", self.degraded),
            )
            if on
        ]
        return (
            f"<Attempt #{self.number} {self.phase}@{self.dependency or '-'} scope={self.scope:g} "
            f"msgs={len(self.messages)}{' ' + ','.join(flags) if flags else ''}>"
        )


@dataclass(repr=False)
class TaskState:
    # -- task layer ----------------------------------------------------------------------
    task_id: str
    project: str
    agent: AgentRef
    goal: str
    fingerprint: str
    features: dict[str, Any]
    trace_id: str
    root_span_id: str
    parent_task_id: str | None = None
    completed_steps: dict[str, Any] = field(default_factory=dict)
    success_check: Callable[[Any], bool] | None = None
    # -- execution layer -----------------------------------------------------------------
    policy: RetryPolicy = field(default_factory=lambda: _default_policy())
    ledger: TaskLedger = field(default_factory=lambda: TaskLedger(started_at=0.0))
    env: Environment | None = None
    rng: random.Random = field(default_factory=random.Random)
    attempt: int = 0
    phase: str = "execution"
    dependency: str = ""
    tokens: int = 0
    cost_usd: float = 0.0
    last_validation: str | None = None
    failures: list[FailureRecord] = field(default_factory=list)
    last_failure: Failure | None = None
    consecutive_failures: int = 0
    retries: int = 0
    backoff_from: int = 0  # ``retries`` when the current step began: its backoff starts there
    degradations: int = 0
    extra_try_used: bool = False
    decisions: list[Decision] = field(default_factory=list)
    preflight_note: str = ""
    current_step: str = ""  # the step being retried in place (see TaskRun.step)
    review_first: bool = False  # pre-flight asked for a person before the first attempt
    ambiguous: str | None = None  # a side effect whose outcome is unknown (not to repeat)
    ambiguous_why: str = ""  # why it is not repeated, and how to make it repeatable
    # -- context layer -------------------------------------------------------------------
    context: ContextBuilder = field(default_factory=lambda: ContextBuilder(base=[]))
    given: list[list[str]] = field(default_factory=list)  # message digests per attempt
    scope: float = 1.0
    relaxed: bool = False
    patch: str | None = None
    failure_summary: str | None = None
    degraded: bool = False
    substitutions: dict[str, str] = field(default_factory=dict)  # dependency → fallback in use
    #: What every event of this task shares, built once by the event factory (its cache).
    event_base: tuple[Any, str, dict[str, Any]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    # -- reads used by rules -------------------------------------------------------------
    @property
    def retry_after_ms(self) -> int | None:
        return self.last_failure.retry_after_ms if self.last_failure else None

    def failures_of(self, error_type: ErrorType) -> int:
        """Failures of one class, within the current step (class caps are per step)."""
        step = self.current_step
        return sum(1 for f in self.failures if f.error_type is error_type and f.step == step)

    def failures_in_phase(self, phase: str) -> int:
        return sum(1 for f in self.failures if f.phase == phase)

    def phase_streak(self) -> int:
        """How many of the latest failures, back to back, happened in the current phase."""
        streak = 0
        for record in reversed(self.failures):
            if record.phase != self.phase:
                break
            streak += 1
        return streak

    def type_streak(self) -> int:
        """How many of the latest failures, back to back, share the last failure's class."""
        if not self.failures:
            return 0
        last, streak = self.failures[-1].error_type, 0
        for record in reversed(self.failures):
            if record.error_type is not last:
                break
            streak += 1
        return streak

    def type_changed(self) -> bool:
        return (
            len(self.failures) >= 2
            and self.failures[-1].error_type is not self.failures[-2].error_type
        )

    def next_messages(self) -> list[Message]:
        return self.context.build(
            failure_summary=self.failure_summary, patch=self.patch, relaxed=self.relaxed
        )

    def record_given(self, messages: list[Message]) -> None:
        self.given.append([digest(m) for m in messages])

    def __repr__(self) -> str:
        last = self.failures[-1].error_type.value if self.failures else "-"
        return (
            f"<TaskState {self.task_id} agent={self.agent.name} attempt={self.attempt} phase={self.phase} "
            f"dep={self.dependency or '-'} last_error={last} consecutive={self.consecutive_failures} "
            f"spent={self.ledger.attempts}a/{self.ledger.tokens}t/${self.ledger.cost_usd:.4f} "
            f"policy={self.policy.id}@{self.policy.version}>"
        )


def _default_policy() -> RetryPolicy:
    from .policy import RetryPolicy

    return RetryPolicy()
