"""What a governor's verdict comes to when the retry can only send the client's request again.

Under the adapters (:mod:`.client_retries`) the governor decides the retries of a client
whose request is the framework's: its prompt and context are built by pydantic-ai,
LangChain or the user's code, and the retry is that request sent again. A verdict that
changes the next attempt must not be recorded as done when it is not, or RetryLens
would report rebuilds, patches and fallbacks the provider never saw. So, per verdict:

* a retry of the same request (``retry_same``, ``retry_backoff``) or a stop: as it is;
* a fallback dependency that names the request's own ``model``: applied — the resend
  asks for the fallback model (:func:`switched_model`), the attempt records it;
* a fallback the request cannot name, given because the dependency's circuit breaker is
  open or its fleet retry budget spent (``protect_dependency``): a stop ("failing fast"),
  what that rule decides for a dependency without a fallback — a resend of the same
  request would pile on the dependency it protects;
* any other change (rebuild the context, patch the prompt, degrade the scope, the
  precision or to a fallback the request cannot name): the same request resent, recorded
  as such and waiting what the policy's backoff waits for that failure (``Retry-After``
  honoured), with the decision that was not applied named in the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from retrylens.schemas.taxonomy import Decision

from ...core.backoff import wait_from_policy
from ...core.retry_rules import retry_by_class
from ...core.verdicts import Verdict, stop_verdict

if TYPE_CHECKING:
    from ...core.state import TaskState

_SAME_REQUEST = frozenset({Decision.RETRY_SAME, Decision.RETRY_BACKOFF})


def as_resent(state: TaskState, model: str | None) -> Callable[[Verdict], Verdict]:
    """The verdict a resend of a request asking for ``model`` can carry out, for ``state``."""

    def resent(verdict: Verdict) -> Verdict:
        decision = verdict.decision
        if not verdict.retrying or decision in _SAME_REQUEST:
            return verdict
        if decision is Decision.DEGRADE_DEPENDENCY and verdict.fallback:
            if model is not None and model == state.dependency:
                return verdict  # the resend asks for the fallback model
            if verdict.rule == "protect_dependency":
                why = f"{verdict.reason}, which the client's resend cannot use: failing fast"
                return stop_verdict(state, why, verdict.rule)
        not_applied = f"the client's request is resent as it was ({decision.value} not applied)"
        plain = retry_by_class(wait_from_policy(state.policy.backoff))(state)
        if plain is not None and plain.decision in _SAME_REQUEST:
            return Verdict(
                plain.decision, f"{plain.reason}; {not_applied}", plain.backoff_ms, rule=plain.rule
            )
        return Verdict(Decision.RETRY_SAME, f"{verdict.reason}; {not_applied}", rule=verdict.rule)

    return resent


def switched_model(options: Any, state: TaskState) -> Any:
    """A stainless client's request ``options`` asking for the fallback of their ``model``
    when the task switched to one (else ``options`` as they are)."""
    try:
        body = options.json_data
        fallback = state.substitutions.get(body["model"])
        if not fallback:
            return options
        return options.model_copy(update={"json_data": {**body, "model": fallback}})
    except Exception:  # noqa: BLE001 - a request without a JSON model: sent as it is
        return options


def model_of(options: Any) -> str | None:
    """The ``model`` a stainless client's request asks for, if it names one."""
    try:
        model = options.json_data["model"]
    except Exception:  # noqa: BLE001 - no JSON body or no model in it
        return None
    return model if isinstance(model, str) else None
