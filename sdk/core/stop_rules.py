"""The rules that stop a task: cancellation, kill switch, whitelist, budget, caps, loops, protection.

Each is a small class holding what it decides by (caps, a budget, a limit), read as a
sentence (``stop_at_class_cap({ErrorType.TIMEOUT: 1})``, like tenacity's ``stop_after_attempt``).
A stop goes to a person when ``handoff`` is set and the run has a channel, else the task
gives up (:func:`~.verdicts.stop_verdict`). They come first in a chain, in the order
:func:`~.policy_chain.compile_policy` lists them; the rules that keep a task going
(degrade, retry) are in :mod:`.retry_rules`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from retrylens.schemas.taxonomy import TRANSIENT_ERROR_TYPES, Decision, ErrorType

from .rule_chain import Rule, _err
from .state import TaskState
from .verdicts import Verdict, stop_verdict

if TYPE_CHECKING:
    from .policy import TaskBudget


class StopRule(Rule):
    """A rule that stops the task; ``handoff`` sends the stop to a person when one is reachable."""

    def __init__(self, *, handoff: bool = True) -> None:
        self.handoff = handoff

    def stop(self, state: TaskState, reason: str) -> Verdict:
        return stop_verdict(state, reason, self.name, self.handoff)

    def _keywords(self, **defaults_and_values: tuple[Any, Any]) -> dict[str, Any]:
        pairs = {**defaults_and_values, "handoff": (True, self.handoff)}
        return {k: value for k, (default, value) in pairs.items() if value != default}

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (), self._keywords()


_ANY_CLASS: frozenset[ErrorType] = frozenset(ErrorType)
_LASTING_CLASSES: frozenset[ErrorType] = _ANY_CLASS - TRANSIENT_ERROR_TYPES


class stop_when_cancelled(Rule):  # noqa: N801 - reads as a sentence, like tenacity
    name = "stop_when_cancelled"

    def answers_for(self) -> frozenset[ErrorType]:
        return frozenset({ErrorType.CANCELLED})

    def __call__(self, s: TaskState) -> Verdict | None:
        if _err(s) is ErrorType.CANCELLED:
            return Verdict(Decision.CANCEL_CHAIN, "the task chain was cancelled", rule=self.name)
        return None


class stop_when_killed(StopRule):  # noqa: N801
    """The operator's kill switch: no automatic retries for the project or named agents."""

    name = "stop_when_killed"

    def __init__(
        self, *, project: bool = False, agents: Iterable[str] = (), handoff: bool = True
    ) -> None:
        super().__init__(handoff=handoff)
        self.project, self.agents = project, frozenset(agents)

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (), self._keywords(project=(False, self.project), agents=([], sorted(self.agents)))

    def answers_for(self) -> frozenset[ErrorType]:
        return _ANY_CLASS if self.project or self.agents else frozenset()

    def __call__(self, s: TaskState) -> Verdict | None:
        if self.project or s.agent.name in self.agents:
            scope = "project" if self.project else f"agent {s.agent.name}"
            return self.stop(s, f"kill switch: automatic retries are off for {scope}")
        return None


class stop_unless_retryable(StopRule):  # noqa: N801
    """Only whitelisted failure classes (and failures not marked unretryable) may be retried."""

    name = "stop_unless_retryable"

    def __init__(
        self, retryable: Iterable[ErrorType] | None = None, *, handoff: bool = True
    ) -> None:
        super().__init__(handoff=handoff)
        if retryable is None:
            from .policy import DEFAULT_RETRYABLE

            retryable = DEFAULT_RETRYABLE
        self.retryable = frozenset(ErrorType(e) for e in retryable)

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (sorted(e.value for e in self.retryable),), self._keywords()

    def __call__(self, s: TaskState) -> Verdict | None:
        failure = s.last_failure
        assert failure is not None
        if not failure.retryable or failure.error_type not in self.retryable:
            return self.stop(s, f"{failure.error_type.value} is not in the retryable whitelist")
        return None


class stop_on_ambiguous_side_effect(StopRule):  # noqa: N801
    """A side effect declared ``unsafe`` may have happened: never repeat it blindly."""

    name = "stop_on_ambiguous_side_effect"

    def __call__(self, s: TaskState) -> Verdict | None:
        if s.ambiguous:
            why = s.ambiguous_why or (
                "it may have happened and is declared unsafe to repeat, so a person checks it"
            )
            return self.stop(s, f"ambiguous outcome of side effect {s.ambiguous}: {why}")
        return None


class hand_off_unclassified(StopRule):  # noqa: N801
    """The seed design: a failure nobody can classify goes to a person early, not to a guess.

    ``cap``: retries allowed for unclassified failures (the policy's ``caps.unknown``).
    """

    name = "hand_off_unclassified"

    def __init__(self, cap: int = 0, *, handoff: bool = True) -> None:
        super().__init__(handoff=handoff)
        self.cap = cap

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.cap,), self._keywords()

    def answers_for(self) -> frozenset[ErrorType]:
        return frozenset({ErrorType.UNKNOWN})

    def __call__(self, s: TaskState) -> Verdict | None:
        if _err(s) is ErrorType.UNKNOWN and self.cap < s.failures_of(ErrorType.UNKNOWN):
            failure = s.last_failure
            code = failure.code if failure is not None and failure.code else "exception"
            return self.stop(
                s,
                f"unclassified failure ({code}): no retry rule applies to it, so it goes to a "
                "person early instead of being retried blindly",
            )
        return None


class stop_on_budget(StopRule):  # noqa: N801
    """The task's budget (attempts, tokens, money, deadline), shared with its sub-agents."""

    name = "stop_on_budget"

    def __init__(self, budget: TaskBudget | None = None, *, handoff: bool = True) -> None:
        super().__init__(handoff=handoff)
        if budget is None:
            from .policy import TaskBudget

            budget = TaskBudget()
        self.budget = budget

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.budget,), self._keywords()

    def __call__(self, s: TaskState) -> Verdict | None:
        # the clock is read only when the budget has a deadline (the only limit that needs it)
        timed = self.budget.deadline_s is not None and s.env is not None
        now = s.env.now() if timed else s.ledger.started_at  # type: ignore[union-attr]
        reason = s.ledger.exhausted(self.budget, now)
        return self.stop(s, reason) if reason else None


class stop_on_known_bad_input(StopRule):  # noqa: N801
    """An input that failed ``limit`` times before (any task) is not retried for a lasting error."""

    name = "stop_on_known_bad_input"

    def __init__(self, limit: int = 3, *, handoff: bool = True) -> None:
        super().__init__(handoff=handoff)
        self.limit = limit

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.limit,), self._keywords()

    def answers_for(self) -> frozenset[ErrorType]:
        return _LASTING_CLASSES

    def __call__(self, s: TaskState) -> Verdict | None:
        seen = s.env.fingerprint_failures(s.fingerprint) if s.env is not None else 0
        if seen >= self.limit and _err(s) not in TRANSIENT_ERROR_TYPES:
            return self.stop(
                s,
                f"this input failed {seen} times before (≥ {self.limit}): a retry will not fix it",
            )
        return None


class stop_at_phase_cap(StopRule):  # noqa: N801
    """Failures allowed per phase (``{"planning": 2}``); phases not named are not capped."""

    name = "stop_at_phase_cap"

    def __init__(self, caps: Mapping[str, int] | None = None, *, handoff: bool = True) -> None:
        super().__init__(handoff=handoff)
        self.caps: dict[str, int] = dict({"planning": 2} if caps is None else caps)

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.caps,), self._keywords()

    def answers_for(self) -> frozenset[ErrorType]:
        return _ANY_CLASS if self.caps else frozenset()

    def __call__(self, s: TaskState) -> Verdict | None:
        cap = self.caps.get(s.phase)
        if cap is None:
            return None  # phases not named are not capped: no need to count
        failed = s.failures_in_phase(s.phase)
        if failed >= cap:
            return self.stop(s, f"phase {s.phase} failed {failed} times (cap {cap})")
        return None


class stop_at_class_cap(StopRule):  # noqa: N801
    """Retries caused by one failure class are capped; a change of class earns one more try.

    A context overflow past its cap is not stopped while ``max_degradations`` allows
    shrinking the input (that is not a retry of the same attempt).
    """

    name = "stop_at_class_cap"

    def __init__(
        self,
        caps: Mapping[ErrorType | str, int] | None = None,
        *,
        max_degradations: int = 2,
        extra_try_on_type_change: bool = True,
        handoff: bool = True,
    ) -> None:
        super().__init__(handoff=handoff)
        if caps is None:
            from .policy import DEFAULT_CAPS

            caps = DEFAULT_CAPS
        self.caps: dict[ErrorType, int] = {ErrorType(k): v for k, v in caps.items()}
        self.max_degradations = max_degradations
        self.extra_try_on_type_change = extra_try_on_type_change

    def cap(self, error: ErrorType) -> int:
        return self.caps.get(error, 0)

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        caps = {k.value: v for k, v in self.caps.items()}
        return (caps,), self._keywords(
            max_degradations=(2, self.max_degradations),
            extra_try_on_type_change=(True, self.extra_try_on_type_change),
        )

    def __call__(self, s: TaskState) -> Verdict | None:
        error = _err(s)
        cap = self.cap(error)
        failed = s.failures_of(error)
        if failed <= cap:
            return None
        if error is ErrorType.CONTEXT_OVERFLOW and s.degradations < self.max_degradations:
            return None  # shrinking the input is not a retry of the same attempt
        if self.extra_try_on_type_change and s.type_changed() and not s.extra_try_used and cap > 0:
            return None
        if cap == 0:
            reason = f"{error.value}: the policy allows no retries of this class (cap 0)"
        else:
            reason = f"{error.value} retry cap reached ({failed - 1}/{cap} retries)"
        if s.current_step:  # caps count per step: say which step used its cap up
            reason = f"step cap of step {s.current_step[:64]!r}: {reason}"
        return self.stop(s, reason)


class break_loops(StopRule):  # noqa: N801
    """The same phase failing ``limit`` times back to back for a non-transient reason is a loop."""

    name = "break_loops"

    def __init__(self, limit: int = 2, *, max_degradations: int = 2, handoff: bool = True) -> None:
        super().__init__(handoff=handoff)
        self.limit, self.max_degradations = limit, max_degradations

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.limit,), self._keywords(max_degradations=(2, self.max_degradations))

    def __call__(self, s: TaskState) -> Verdict | None:
        limit = self.limit
        recent = s.failures[-limit:]
        if len(recent) < limit or s.phase_streak() < limit:
            return None
        if any(r.error_type in TRANSIENT_ERROR_TYPES for r in recent):
            return None
        if not s.relaxed and s.degradations < self.max_degradations:
            return Verdict(
                Decision.DEGRADE_PRECISION,
                f"phase {s.phase} failed {limit} times in a row: switching to simplified mode",
                rule=self.name,
            )
        return self.stop(s, f"phase {s.phase} keeps failing even in simplified mode (loop)")


class protect_dependency(StopRule):  # noqa: N801
    """Fleet retry budget and circuit breaker: fall back or fail fast, never pile on.

    ``fallbacks`` maps a dependency to its stand-in; ``fleet_ratio`` is only named in the
    reason (the throttle itself lives in the environment, shared by the fleet).
    """

    name = "protect_dependency"

    def __init__(
        self,
        fallbacks: Mapping[str, str] | None = None,
        *,
        fleet_ratio: float = 0.1,
        handoff: bool = True,
    ) -> None:
        super().__init__(handoff=handoff)
        self.fallbacks, self.fleet_ratio = dict(fallbacks or {}), fleet_ratio

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.fallbacks,), self._keywords(fleet_ratio=(0.1, self.fleet_ratio))

    def answers_for(self) -> frozenset[ErrorType]:
        return TRANSIENT_ERROR_TYPES

    def __call__(self, s: TaskState) -> Verdict | None:
        if s.env is None or not s.dependency or _err(s) not in TRANSIENT_ERROR_TYPES:
            return None
        fallback = self.fallbacks.get(s.dependency)
        if s.env.breaker_open(s.dependency):
            why = f"circuit breaker for {s.dependency} is open"
        elif not s.env.retry_allowed(s.dependency):
            why = (
                f"fleet retry budget for {s.dependency} is spent "
                f"(retries > {self.fleet_ratio:.0%} of calls)"
            )
        else:
            return None
        if fallback:
            return Verdict(
                Decision.DEGRADE_DEPENDENCY,
                f"{why}: falling back to {fallback}",
                fallback=fallback,
                rule=self.name,
            )
        return self.stop(s, f"{why}: failing fast")
