"""Rules as composable parts: ``a | b`` asks ``a`` first, then ``b``; the first that answers decides.

A rule is any callable ``rule(state) -> Verdict | None`` (``None``: not my call), plain
functions included. :class:`Rule` gives a rule its ``|``, its ``repr`` (the parameters it
decides by, so a chain prints like the policy document) and its scope (``answers_for``:
the failure classes it can decide); :class:`FirstOf` is the chain, which calls for each
failure only the rules that can answer for its class. The rules themselves live in
:mod:`.stop_rules` and :mod:`.retry_rules`; a policy becomes a chain in :mod:`.policy_chain`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from retrylens.schemas.taxonomy import ErrorType

from .state import TaskState

if TYPE_CHECKING:
    from .verdicts import Verdict

RuleFn = Callable[[TaskState], "Verdict | None"]


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


def _err(state: TaskState) -> ErrorType:
    """The class of the failure being decided (rules run only after a failure)."""
    assert state.last_failure is not None, "rules run after a failure"
    return state.last_failure.error_type
