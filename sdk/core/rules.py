"""Decisions as a chain of small rules that carry their own parameters; the first that answers decides.

The one place to import rules from, to compose a governor's decisions or read a verdict.
A rule is any callable ``rule(state) -> Verdict | None`` (``None``: not my call), plain
functions included. Rules compose with ``|`` into a chain that reads top to bottom like
the policy document: stop rules first (cancellation, kill switch, whitelist, budget,
known-bad input, caps, loops), then fleet protection (retry throttle, circuit breaker),
then degradation, then the per-class retry with its wait::

    stop_at_class_cap({ErrorType.TIMEOUT: 1}) | stop_on_budget(TaskBudget(max_attempts=4))
    | retry_by_class(wait_exponential(500, cap_ms=8000) * jitter(0.3) | wait_retry_after())

Every rule holds what it decides by (caps, a budget, a limit); none reads the task's
policy. A :class:`~retrylens.sdk.core.policy.RetryPolicy` *compiles* into such a chain
(:func:`compile_policy`), and :func:`follow_policy` is the chain of whatever policy a task
runs under now (hot reloads, role overrides, pre-flight adaptations each compile once).
Rules only *read* the state and the environment, so a shadow candidate is just another
chain evaluated on the same state, and the offline replay derives its vectorised limits
from the same objects (``retrylens.evaluation.vectorised``).

Each part lives in a module of its own; this one only gathers them:

- :mod:`.rule_chain`: what a rule is, ``|`` and the chain (:class:`Rule`, :class:`FirstOf`);
- :mod:`.stop_rules`: the rules that stop a task (and :class:`StopRule`, their base);
- :mod:`.retry_rules`: the rules that keep it going (degrade, retry by class);
- :mod:`.policy_chain`: a policy compiled into its chain, and the chain a task follows now;
- :mod:`.verdicts`: a :class:`Verdict` and what it does to the task's state.
"""

from __future__ import annotations

from .policy_chain import compile_policy, compiled, default_rules, follow_policy
from .retry_rules import degrade_after_failures, retry_by_class
from .rule_chain import FirstOf, Rule, RuleFn, rules_of
from .stop_rules import (
    StopRule,
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
from .verdicts import DEGRADE_SCOPE_FACTOR, Verdict, apply_verdict, record_failure, stop_verdict

__all__ = [
    # composing
    "Rule",
    "RuleFn",
    "FirstOf",
    "rules_of",
    # the rules that stop a task
    "StopRule",
    "stop_when_cancelled",
    "stop_when_killed",
    "stop_on_ambiguous_side_effect",
    "stop_unless_retryable",
    "hand_off_unclassified",
    "stop_on_budget",
    "stop_on_known_bad_input",
    "stop_at_phase_cap",
    "stop_at_class_cap",
    "break_loops",
    "protect_dependency",
    # the rules that keep it going
    "degrade_after_failures",
    "retry_by_class",
    # a policy's chain
    "compile_policy",
    "compiled",
    "follow_policy",
    "default_rules",
    # verdicts
    "Verdict",
    "stop_verdict",
    "record_failure",
    "apply_verdict",
    "DEGRADE_SCOPE_FACTOR",
]
