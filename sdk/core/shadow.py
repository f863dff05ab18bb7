"""Shadow mode and exploration: evidence for the next policy without acting on it.

A candidate is just another chain of rules: a candidate policy compiles into one, or
you pass a chain yourself. It evaluates every failure beside the live one; its decision
goes on the decision event (``shadow=true``, ``shadow_decision``) and is never acted on.
Exploration takes, with a small configured probability, another *allowed* decision
instead of the live one, and logs the probability of the decision actually taken
(``propensity``), so off-line estimators (IPS, doubly robust) can evaluate other policies without bias.

Exploration (``shadow.exploration``) never turns a stop into a retry: it only varies *how*
to retry, among the retrying decisions that make sense for the failure class. Stop
exploration (``shadow.explore_stops``) is the one exception, asked for by name: where the
live rules stop and the shadow candidate would retry, it takes the candidate's retry with
that probability. A higher cap or budget has no evidence in a log that always stopped
(the policy report calls it "not supported by the log"); this is how it gets some.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retrylens.schemas.taxonomy import TRANSIENT_ERROR_TYPES, Decision, ErrorType

from .policy_chain import compiled
from .state import TaskState
from .verdicts import Verdict

if TYPE_CHECKING:
    from .policy import RetryPolicy

Chain = Callable[[TaskState], "Verdict | None"]


def shadow_chain(candidate: RetryPolicy | Chain, role: str = "") -> Chain:
    """The chain a candidate decides by: a policy's compiled chain (for ``role``), or the chain given."""
    if callable(candidate):
        return candidate
    return compiled(candidate.for_role(role))


def shadow_verdict(
    candidate: RetryPolicy | Chain, state: TaskState, rules: Chain | None = None
) -> Verdict | None:
    """What ``candidate`` (a policy or a chain) would decide for ``state`` (read-only).

    ``rules`` is not used: the live chain has its own parameters and says nothing about
    the candidate's; it is accepted so that existing callers keep working.
    """
    del rules
    view = copy.copy(state)
    if callable(candidate):
        return candidate(view)
    view.policy = candidate.for_role(state.agent.role)
    return compiled(view.policy)(view)


def alternatives(verdict: Verdict, state: TaskState) -> list[Decision]:
    """Retrying decisions that are reasonable for the failure, the live one first."""
    if not verdict.retrying or state.last_failure is None:
        return [verdict.decision]
    error = state.last_failure.error_type
    if error in TRANSIENT_ERROR_TYPES:
        options = [Decision.RETRY_BACKOFF, Decision.RETRY_SAME]
        if state.policy.fallbacks.get(state.dependency):
            options.append(Decision.DEGRADE_DEPENDENCY)
    elif error is ErrorType.SCHEMA_MISMATCH:
        options = [Decision.PATCH_PROMPT, Decision.REBUILD_CONTEXT, Decision.DEGRADE_PRECISION]
    elif error is ErrorType.CONTEXT_OVERFLOW:
        options = [Decision.DEGRADE_SCOPE, Decision.REBUILD_CONTEXT]
    else:
        options = [Decision.REBUILD_CONTEXT, Decision.RETRY_SAME, Decision.DEGRADE_PRECISION]
    ordered = [verdict.decision] + [d for d in options if d is not verdict.decision]
    return ordered


@dataclass(frozen=True)
class Explored:
    verdict: Verdict
    propensity: float


def explore_stop(verdict: Verdict, candidate: Verdict, epsilon: float, rng: random.Random) -> Explored:
    """With probability ``epsilon`` the candidate's retry instead of the live stop ``verdict``.

    Only where the live verdict stops and the candidate's retries; the propensity is that
    of the decision taken (``epsilon`` for the retry, ``1 - epsilon`` for the stop).
    """
    if epsilon <= 0 or verdict.retrying or not candidate.retrying:
        return Explored(verdict, 1.0)
    if rng.random() >= epsilon:
        return Explored(verdict, round(1 - epsilon, 6))
    taken = Verdict(
        candidate.decision,
        f"exploration (ε={epsilon:g}) instead of {verdict.decision.value}: {candidate.reason}",
        backoff_ms=candidate.backoff_ms,
        fallback=candidate.fallback,
        rule="explore",
    )
    return Explored(taken, round(epsilon, 6))


def explore(verdict: Verdict, state: TaskState, epsilon: float, rng: random.Random) -> Explored:
    """ε-greedy over :func:`alternatives`; the propensity is that of the decision taken."""
    options = alternatives(verdict, state)
    k = len(options)
    if epsilon <= 0 or k == 1:
        return Explored(verdict, 1.0)
    if rng.random() >= epsilon:
        return Explored(verdict, round(1 - epsilon + epsilon / k, 6))
    choice = options[rng.randrange(k)]
    propensity = round(
        (1 - epsilon + epsilon / k) if choice is verdict.decision else epsilon / k, 6
    )
    if choice is verdict.decision:
        return Explored(verdict, propensity)
    fallback = (
        state.policy.fallbacks.get(state.dependency)
        if choice is Decision.DEGRADE_DEPENDENCY
        else None
    )
    backoff = verdict.backoff_ms if choice is Decision.RETRY_BACKOFF else 0
    taken = Verdict(
        choice,
        f"exploration (ε={epsilon:g}) instead of {verdict.decision.value}: {verdict.reason}",
        backoff_ms=backoff,
        fallback=fallback,
        rule="explore",
    )
    return Explored(taken, propensity)
