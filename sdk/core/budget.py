"""Budgets: what one task may spend, and how much the fleet may retry one dependency.

:class:`TaskLedger` is shared by a task and all its sub-agents (keyed by the root task
id), so a sub-agent's retries draw on the same attempts, tokens and money.
:class:`RetryThrottle` is gRPC's retry throttling per dependency: a token bucket that
failures drain and successes refill, so retries stop by themselves while a dependency
fails for more than about ``ratio`` of recent calls — the retry storm never starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from .policy import FleetBudgetPolicy, TaskBudget


@dataclass
class TaskLedger:
    """Attempts, completed steps, tokens and money spent by one task tree; thread-safe.

    The interface the decision loop uses is three calls: :meth:`charge` (an attempt
    begins, tokens and money are reported), :meth:`complete_step` (a step is done: the
    task earns retries) and :meth:`exhausted` (may another attempt run, else which budget
    stopped it). Retries used are the attempts beyond the first, sub-agents' included.
    """

    started_at: float
    attempts: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    steps: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def charge(self, *, attempts: int = 0, tokens: int = 0, cost_usd: float = 0.0) -> None:
        with self._lock:
            self.attempts += attempts
            self.tokens += tokens
            self.cost_usd += cost_usd

    def complete_step(self, steps: int = 1) -> None:
        """Count completed steps: each earns the task ``retries_per_step`` more retries."""
        with self._lock:
            self.steps += steps

    @property
    def retries(self) -> int:
        return max(0, self.attempts - 1)

    def exhausted(self, budget: TaskBudget, now: float) -> str | None:
        """Why another attempt would exceed ``budget``, or ``None`` if it fits.

        The reason names the budget that stopped the task (see :data:`BUDGET_NAMES` and
        :func:`stopping_budget`): a fixed attempt count, the task retry allowance with the
        steps that earned it (a runaway task and a long one read differently), tokens,
        money or the deadline.
        """
        steps = self.steps
        if budget.max_attempts is not None and self.attempts >= budget.max_attempts:
            after = f" after {steps} steps" if steps else ""
            return (
                f"task budget exhausted: {self.attempts}/{budget.max_attempts} attempts used{after}"
            )
        allowed = budget.allowance(steps)
        if self.retries >= allowed:
            return (
                f"task retry allowance {self.retries}/{allowed} after {steps} steps: budget "
                f"exhausted ({budget.retries} + {budget.retries_per_step:g} per step, at most "
                f"{budget.max_retries})"
            )
        if budget.max_tokens is not None and self.tokens >= budget.max_tokens:
            return f"token budget exhausted: {self.tokens}/{budget.max_tokens}"
        if budget.max_cost_usd is not None and self.cost_usd >= budget.max_cost_usd:
            return f"cost budget exhausted: ${self.cost_usd:.4f}/${budget.max_cost_usd:.4f}"
        if budget.deadline_s is not None and now - self.started_at >= budget.deadline_s:
            return f"deadline passed: {now - self.started_at:.1f}s of {budget.deadline_s:.1f}s"
        return None


#: The budget a stop reason names, by the words that open it (the governor's reasons:
#: :meth:`TaskLedger.exhausted` and the per-step class cap of ``stop_at_class_cap``).
BUDGET_NAMES: tuple[tuple[str, str], ...] = (
    ("step cap", "step cap"),
    ("task retry allowance", "task retry allowance"),
    ("task budget exhausted", "attempts"),
    ("token budget exhausted", "tokens"),
    ("cost budget exhausted", "money"),
    ("deadline passed", "deadline"),
)


def stopping_budget(reason: str) -> str | None:
    """Which budget a decision reason says stopped the task, or ``None`` (not a budget)."""
    for opening, name in BUDGET_NAMES:
        if reason.startswith(opening):
            return name
    return None


class RetryThrottle:
    """gRPC-style retry token bucket for one dependency."""

    def __init__(self, policy: FleetBudgetPolicy) -> None:
        self.policy = policy
        self.tokens = policy.max_tokens
        self._lock = threading.Lock()

    def record(self, success: bool) -> None:
        with self._lock:
            if success:
                self.tokens = min(self.policy.max_tokens, self.tokens + self.policy.ratio)
            else:
                self.tokens = max(0.0, self.tokens - 1.0)

    def allows_retry(self) -> bool:
        return not self.policy.enabled or self.tokens > self.policy.max_tokens / 2

    def __repr__(self) -> str:
        return f"RetryThrottle(tokens={self.tokens:.1f}/{self.policy.max_tokens})"


T = TypeVar("T")


class PerDependency(Generic[T]):
    """A lazily created ``T`` per dependency name (throttles, breakers)."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()

    def __getitem__(self, dependency: str) -> T:
        with self._lock:
            item = self._items.get(dependency)
            if item is None:
                item = self._items[dependency] = self._factory()
            return item

    def items(self) -> list[tuple[str, T]]:
        with self._lock:
            return list(self._items.items())
