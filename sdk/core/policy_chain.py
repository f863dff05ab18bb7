"""A :class:`~.policy.RetryPolicy` compiled into its decision chain, and the chain a task follows now.

Every rule holds what it decides by; none reads the task's policy. :func:`compile_policy`
turns a policy into the chain, in the order the policy document reads (stop rules, fleet
protection, degradation, the per-class retry); :func:`compiled` caches it per policy
object, and :class:`follow_policy` is the chain of whatever policy a task runs under now
(hot reloads, role overrides, pre-flight adaptations each compile once).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from retrylens.schemas.taxonomy import ErrorType

from .backoff import wait_from_policy
from .retry_rules import degrade_after_failures, retry_by_class
from .rule_chain import FirstOf, Rule
from .stop_rules import (
    break_loops,
    hand_off_unclassified,
    protect_dependency,
    stop_at_class_cap,
    stop_at_phase_cap,
    stop_on_ambiguous_side_effect,
    stop_on_budget,
    stop_on_known_bad_input,
    stop_unless_retryable,
    stop_when_cancelled,
    stop_when_killed,
)

if TYPE_CHECKING:
    from .policy import RetryPolicy
    from .state import TaskState
    from .verdicts import Verdict


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
