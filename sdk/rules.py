"""Decisions as a chain of small rules that carry their own parameters; the first that answers decides.

A rule is any callable ``rule(state) -> Verdict | None`` (``None``: not my call), plain
functions included. Rules compose with ``|`` into a chain that reads top to bottom like
the policy document: stop rules first (cancellation, kill switch, whitelist, budget,
known-bad input, caps, loops), then fleet protection (retry throttle, circuit breaker),
then degradation, then the per-class retry with its wait::

    stop_at_class_cap({ErrorType.TIMEOUT: 1}) | stop_on_budget(TaskBudget(max_attempts=4))
    | retry_by_class(wait_exponential(500, cap_ms=8000) * jitter(0.3) | wait_retry_after())

Every rule holds what it decides by (caps, a budget, a limit); none reads the task's
policy. A :class:`~retrylens.sdk.policy.RetryPolicy` *compiles* into such a chain
(:func:`compile_policy`), and :func:`follow_policy` is the chain of whatever policy a task
runs under now (hot reloads, role overrides, pre-flight adaptations each compile once).
Rules only *read* the state and the environment, so a shadow candidate is just another
chain evaluated on the same state, and the offline replay derives its vectorised limits
from the same objects (``retrylens.evaluation.vectorised``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from retrylens.schemas.taxonomy import (
    RETRYING_DECISIONS,
    TRANSIENT_ERROR_TYPES,
    Decision,
    ErrorType,
)

from .backoff import default_wait, wait_from_policy
from .state import FailureRecord, TaskState

if TYPE_CHECKING:
    from .policy import RetryPolicy, TaskBudget

RuleFn = Callable[[TaskState], "Verdict | None"]


@dataclass(frozen=True)
class Verdict:
    """A decision, its human-readable reason and what the next attempt needs."""

    decision: Decision
    reason: str
    backoff_ms: int = 0
    fallback: str | None = None
    rule: str = ""

    @property
    def retrying(self) -> bool:
        return self.decision in RETRYING_DECISIONS


class Rule:
    """Base of composable rules: ``a | b`` asks ``a`` first, then ``b`` (plain callables too)."""

    name = "rule"

    def __call__(self, state: TaskState) -> Verdict | None:
        raise NotImplementedError

    def answers_for(self) -> frozenset[ErrorType] | None:
        """The failure classes this rule can answer for (``None``: any); fixed by its parameters.

        A chain skips a rule for the other classes without calling it, so a retried call
        only pays for the rules that can decide it. A rule must return ``None`` for every
        class outside this set, whatever the state (the chain's test checks it).
        """
        return None

    def __or__(self, other: RuleFn) -> Rule:
        return FirstOf(self, other)

    def __ror__(self, other: RuleFn) -> Rule:
        return FirstOf(other, self)

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The parameters ``repr`` shows: positional ones, and keywords that differ from defaults."""
        return (), {}

    def __repr__(self) -> str:
        positional, keywords = self._args()
        parts = [repr(a) for a in positional] + [f"{k}={v!r}" for k, v in keywords.items()]
        return f"{self.name}({', '.join(parts)})"


class FirstOf(Rule):
    """A chain: the first rule that answers decides."""

    name = "first_of"

    def __init__(self, *rules: RuleFn) -> None:
        flat: list[RuleFn] = []
        for rule in rules:
            flat.extend(rule.rules if isinstance(rule, FirstOf) else [rule])
        self.rules: tuple[RuleFn, ...] = tuple(flat)
        # per failure class, the rules that can answer for it (in order): built once here,
        # so deciding a failure calls only those (plain callables answer for any class)
        scopes = [rule.answers_for() if isinstance(rule, Rule) else None for rule in flat]
        self._for_class: dict[ErrorType, tuple[RuleFn, ...]] = {
            error: tuple(
                r for r, scope in zip(flat, scopes, strict=True) if scope is None or error in scope
            )
            for error in ErrorType
        }

    def __call__(self, state: TaskState) -> Verdict | None:
        failure = state.last_failure
        rules = (
            self.rules if failure is None else self._for_class.get(failure.error_type, self.rules)
        )
        for rule in rules:
            verdict = rule(state)
            if verdict is not None:
                return verdict
        return None

    def answers_for(self) -> frozenset[ErrorType] | None:
        scopes = [rule.answers_for() if isinstance(rule, Rule) else None for rule in self.rules]
        if any(scope is None for scope in scopes):
            return None
        return frozenset().union(*scopes)

    def __iter__(self):  # noqa: ANN204 - iterate the rules of the chain, in order
        return iter(self.rules)

    def __repr__(self) -> str:
        return " | ".join(map(_describe, self.rules))


def _describe(rule: Any) -> str:
    return repr(rule) if isinstance(rule, Rule) else getattr(rule, "__name__", repr(rule))


def rules_of(chain: RuleFn) -> list[RuleFn]:
    """The rules of ``chain`` in order (a single rule is a chain of one)."""
    return list(chain.rules) if isinstance(chain, FirstOf) else [chain]


def stop_verdict(state: TaskState, reason: str, rule: str, handoff: bool | None = None) -> Verdict:
    """The verdict a stop gives: a person when ``handoff`` and the run has a channel, else give up.

    ``handoff=None`` reads the task's policy (``rules.handoff_when_stopped``), for stops
    decided outside a chain (the pre-attempt gate); rules pass their own setting.
    """
    if handoff is None:
        handoff = state.policy.rules.handoff_when_stopped
    to_person = handoff and state.env is not None and state.env.can_handoff()
    return Verdict(Decision.HANDOFF_HUMAN if to_person else Decision.GIVE_UP, reason, rule=rule)


def _err(state: TaskState) -> ErrorType:
    assert state.last_failure is not None, "rules run after a failure"
    return state.last_failure.error_type


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

    Read once per decision into slots (a composed wait reads them several times).
    """

    __slots__ = ("state", "retries", "retry_after_ms", "rng")

    def __init__(self, state: TaskState) -> None:
        self.state = state
        self.retries: int = state.retries + 1
        self.retry_after_ms: int | None = state.retry_after_ms
        self.rng = state.rng


# -- a policy compiled into a chain ---------------------------------------------------------
def compile_policy(policy: RetryPolicy) -> FirstOf:
    """The governor's decision chain for ``policy``, in order; every rule holds its parameters."""
    r, handoff = policy.rules, policy.rules.handoff_when_stopped
    return (
        stop_when_cancelled()
        | stop_when_killed(
            project=policy.kill_switch.project, agents=policy.kill_switch.agents, handoff=handoff
        )
        | stop_on_ambiguous_side_effect(handoff=handoff)
        | stop_unless_retryable(policy.retryable, handoff=handoff)
        | hand_off_unclassified(policy.cap(ErrorType.UNKNOWN), handoff=handoff)
        | stop_on_budget(policy.budget, handoff=handoff)
        | stop_on_known_bad_input(r.fingerprint_failure_limit, handoff=handoff)
        | stop_at_phase_cap(policy.phase_caps, handoff=handoff)
        | stop_at_class_cap(
            policy.caps,
            max_degradations=r.max_degradations,
            extra_try_on_type_change=r.extra_try_on_type_change,
            handoff=handoff,
        )
        | break_loops(r.same_phase_limit, max_degradations=r.max_degradations, handoff=handoff)
        | protect_dependency(
            policy.fallbacks, fleet_ratio=policy.fleet_budget.ratio, handoff=handoff
        )
        | degrade_after_failures(
            policy.degrade_after, max_degradations=r.max_degradations, fallbacks=policy.fallbacks
        )
        | retry_by_class(wait_from_policy(policy.backoff))
    )  # type: ignore[return-value]


class _CompiledCache:
    """Chains by policy object (LRU): a policy compiles once, a reloaded one compiles anew."""

    def __init__(self, size: int = 128) -> None:
        self._size = size
        self._items: OrderedDict[int, tuple[RetryPolicy, FirstOf]] = OrderedDict()
        self._lock = threading.Lock()
        self._last: tuple[RetryPolicy, FirstOf] | None = None

    def get(self, policy: RetryPolicy) -> FirstOf:
        last = self._last  # one read of a tuple: no lock for the policy asked for last
        if last is not None and last[0] is policy:
            return last[1]
        key = id(policy)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] is policy:  # the entry holds the policy: no id reuse
                self._items.move_to_end(key)
                self._last = hit
                return hit[1]
        chain = compile_policy(policy)
        with self._lock:
            self._items[key] = (policy, chain)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            self._last = (policy, chain)
        return chain


compiled = _CompiledCache().get  # the compiled chain of a policy object, cached


class follow_policy(Rule):  # noqa: N801
    """The chain compiled from the policy the task runs under *now*.

    This is where a hot reload, a role override or a pre-flight adaptation takes effect:
    the task's current policy selects its compiled chain (compiled once per policy
    object); the rules of that chain decide by their own parameters.
    """

    name = "follow_policy"

    def __call__(self, s: TaskState) -> Verdict | None:
        return compiled(s.policy)(s)


def default_rules(policy: RetryPolicy | None = None) -> Rule:
    """The governor's decision chain: ``policy``'s, or (no policy) whichever the task runs under."""
    return follow_policy() if policy is None else compile_policy(policy)


DEGRADE_SCOPE_FACTOR = 0.2  # shrink a batch 5× per degradation (the brief says 5–10×)


def record_failure(state: TaskState, failure_summary: str) -> None:
    """Add the last failure to the execution layer (before rules run)."""
    assert state.last_failure is not None
    state.failures.append(
        FailureRecord(
            state.attempt,
            state.phase,
            state.dependency,
            state.last_failure.error_type,
            failure_summary,
            state.current_step,
        )
    )
    state.consecutive_failures += 1


def apply_verdict(
    state: TaskState, verdict: Verdict, caps: Mapping[ErrorType, int] | None = None
) -> None:
    """Prepare the next attempt; the failed attempt's raw output never comes along.

    ``caps`` (default: the task policy's) tells whether this retry is the extra try a
    change of failure class earns, so that it is granted once.
    """
    d = verdict.decision
    if not verdict.retrying:
        return
    state.retries += 1
    last = state.failures[-1].error_type if state.failures else None
    cap = (caps.get(last, 0) if caps is not None else state.policy.cap(last)) if last else 0
    if state.type_changed() and last is not None and state.failures_of(last) > cap:
        state.extra_try_used = True
    summary = state.failures[-1].summary if state.failures else None
    if d is Decision.REBUILD_CONTEXT:
        state.failure_summary = summary
    elif d is Decision.PATCH_PROMPT:
        missing = state.last_failure.missing_field if state.last_failure else None
        state.patch = (
            f"Your answer must be valid JSON and include the field '{missing}'."
            if missing
            else "Your answer must be valid JSON matching the requested schema."
        )
    elif d is Decision.DEGRADE_SCOPE:
        state.scope *= DEGRADE_SCOPE_FACTOR
        state.degradations += 1
        state.degraded = True
    elif d is Decision.DEGRADE_PRECISION:
        state.relaxed = True
        state.degradations += 1
        state.degraded = True
    elif d is Decision.DEGRADE_DEPENDENCY:
        if verdict.fallback:
            state.substitutions[state.dependency] = verdict.fallback
            state.dependency = verdict.fallback
        state.degradations += 1
        state.degraded = True
