"""The SDK's rules and waits in vectorised form, derived from the rule objects themselves.

A replay asks, for every logged failure at once, what a candidate's chain would have
done. Instead of re-encoding each limit by hand, every replayable rule or wait class has
a vectorised twin here (a registry keyed by class) that reads the *parameters of the
object* and a :class:`Frame`: the same reads of a task state, one row per failure.
``tests/evaluation/test_rules_vectorised.py`` holds each twin equal to the scalar
``rule(state)`` over random states.

Replayed stops are those whose inputs the log has (the whitelist, the budget, phase and
class caps); rules that depend on the live fleet or on the world (kill switch, breakers,
known-bad inputs, loops, ambiguous side effects) and rules without a twin (your own)
are left to the log: they acted on the candidate as they acted on the live policy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from retrylens.schemas import TRANSIENT_ERROR_TYPES, ErrorType
from retrylens.sdk.core import backoff as b
from retrylens.sdk.core import rule_chain
from retrylens.sdk.core import rules as r
from retrylens.sdk.core.state import TaskState

ERRORS: tuple[ErrorType, ...] = tuple(ErrorType)
ERROR_INDEX = {e: i for i, e in enumerate(ERRORS)}
TRANSIENT = np.array([e in TRANSIENT_ERROR_TYPES for e in ERRORS])
RATE_LIMIT = ERROR_INDEX[ErrorType.RATE_LIMIT]
CONTEXT_OVERFLOW = ERROR_INDEX[ErrorType.CONTEXT_OVERFLOW]


@dataclass(frozen=True)
class Frame:
    """What rules read of a task state right after a failure, one row per failure.

    Each column is named after the state read it stands for (see :meth:`from_states`).
    """

    error: np.ndarray           # ERRORS index of last_failure.error_type
    retryable: np.ndarray       # last_failure.retryable
    attempts: np.ndarray        # ledger.attempts
    steps: np.ndarray           # ledger.steps (completed steps: they earn retries)
    tokens: np.ndarray          # ledger.tokens
    cost: np.ndarray            # ledger.cost_usd
    elapsed_s: np.ndarray       # env.now() - ledger.started_at
    phase: np.ndarray           # index of state.phase in ``phases``
    phases: tuple[str, ...]
    phase_count: np.ndarray     # failures_in_phase(phase)
    class_count: np.ndarray     # failures_of(error)
    degradations: np.ndarray    # state.degradations
    type_changed: np.ndarray    # state.type_changed()
    extra_try_used: np.ndarray  # state.extra_try_used
    retries: np.ndarray         # the wait's view: state.retries + 1
    retry_after_ms: np.ndarray  # last_failure.retry_after_ms (0: none)
    draw: np.ndarray            # the jitter's rng.random() draw

    def __len__(self) -> int:
        return len(self.error)

    @classmethod
    def from_states(cls, states: Sequence[TaskState], draws: Sequence[float]) -> Frame:
        """One row per state (each just after a failure), with the jitter draw each would get."""
        phases = tuple(dict.fromkeys(s.phase for s in states))
        rows = []
        for s in states:
            failure = s.last_failure
            assert failure is not None, "a frame row is a state right after a failure"
            now = s.env.now() if s.env is not None else s.ledger.started_at
            rows.append((
                ERROR_INDEX[failure.error_type], bool(failure.retryable), s.ledger.attempts, s.ledger.steps,
                s.ledger.tokens, s.ledger.cost_usd, now - s.ledger.started_at, phases.index(s.phase),
                s.failures_in_phase(s.phase), s.failures_of(failure.error_type), s.degradations,
                s.type_changed(), s.extra_try_used, s.retries + 1, float(s.retry_after_ms or 0),
            ))
        cols = list(zip(*rows, strict=True)) if rows else [()] * 15
        types = (np.int64, bool, np.float64, np.float64, np.float64, np.float64, np.float64, np.int64,
                 np.int64, np.int64, np.int64, bool, bool, np.float64, np.float64)
        arrays = [np.asarray(c, dtype=t) for c, t in zip(cols, types, strict=True)]
        return cls(*arrays[:8], phases, *arrays[8:], np.asarray(draws, dtype=np.float64))


R = TypeVar("R")
STOPS: dict[type, Callable[[Any, Frame], np.ndarray]] = {}
WAITS: dict[type, Callable[[Any, Frame], np.ndarray]] = {}


def _register(table: dict[type, Callable[[Any, Frame], np.ndarray]], kind: type) -> Callable[[R], R]:
    def add(fn: R) -> R:
        table[kind] = fn  # type: ignore[assignment]
        return fn

    return add


# -- stop rules: True where the rule stops the task ------------------------------------------
@_register(STOPS, r.stop_unless_retryable)
def _retryable(rule: r.stop_unless_retryable, f: Frame) -> np.ndarray:
    allowed = np.array([e in rule.retryable for e in ERRORS])
    return ~f.retryable | ~allowed[f.error]


@_register(STOPS, r.stop_on_budget)
def _budget(rule: r.stop_on_budget, f: Frame) -> np.ndarray:
    budget = rule.budget
    stops = np.maximum(f.attempts - 1, 0) >= allowance(budget, f.steps)
    if budget.max_attempts is not None:
        stops = stops | (f.attempts >= budget.max_attempts)
    if budget.max_tokens is not None:
        stops = stops | (f.tokens >= budget.max_tokens)
    if budget.max_cost_usd is not None:
        stops = stops | (f.cost >= budget.max_cost_usd)
    if budget.deadline_s is not None:
        stops = stops | (f.elapsed_s >= budget.deadline_s)
    return stops


@_register(STOPS, r.stop_at_phase_cap)
def _phase_cap(rule: r.stop_at_phase_cap, f: Frame) -> np.ndarray:
    caps = np.array([rule.caps.get(p, np.inf) for p in f.phases], dtype=np.float64)
    return f.phase_count >= caps[f.phase] if len(caps) else np.zeros(len(f), bool)


@_register(STOPS, r.stop_at_class_cap)
def _class_cap(rule: r.stop_at_class_cap, f: Frame) -> np.ndarray:
    cap = class_caps(rule)[f.error]
    over = f.class_count > cap
    shrinking = (f.error == CONTEXT_OVERFLOW) & (f.degradations < rule.max_degradations)
    extra_try = rule.extra_try_on_type_change & f.type_changed & ~f.extra_try_used & (cap > 0)
    return over & ~shrinking & ~extra_try


@_register(STOPS, r.hand_off_unclassified)
def _unclassified(rule: r.hand_off_unclassified, f: Frame) -> np.ndarray:
    return (f.error == ERROR_INDEX[ErrorType.UNKNOWN]) & (f.class_count > rule.cap)


def allowance(budget: Any, steps: np.ndarray) -> np.ndarray:
    """The task retry allowance after ``steps`` completed steps (``TaskBudget.allowance``)."""
    earned = np.floor(budget.retries_per_step * np.maximum(steps, 0) + 1e-9)
    return np.minimum(float(budget.max_retries), budget.retries + earned)


def class_caps(rule: r.stop_at_class_cap) -> np.ndarray:
    """``rule``'s cap per ERRORS index."""
    return np.array([rule.cap(e) for e in ERRORS], dtype=np.float64)


# -- waits: milliseconds -------------------------------------------------------------------
@_register(WAITS, b.wait_none)
def _none(wait: b.wait_none, f: Frame) -> np.ndarray:
    return np.zeros(len(f))


@_register(WAITS, b.wait_exponential)
def _exponential(wait: b.wait_exponential, f: Frame) -> np.ndarray:
    exponent = np.minimum(np.maximum(0, f.retries - 1), 30)
    return np.minimum(wait.cap_ms, wait.base_ms * 2.0**exponent)


@_register(WAITS, b.wait_retry_after)
def _retry_after(wait: b.wait_retry_after, f: Frame) -> np.ndarray:
    return np.minimum(wait.max_ms, f.retry_after_ms)


@_register(WAITS, b._Combined)
def _combined(wait: b._Combined, f: Frame) -> np.ndarray:
    left, right = wait_ms(wait.left, f), wait_ms(wait.right, f)
    return left + right if wait.sym == "+" else np.maximum(left, right)


@_register(WAITS, b._Jittered)
def _jittered(wait: b._Jittered, f: Frame) -> np.ndarray:
    jit = wait.jit
    if jit.full:
        factor = f.draw
    else:
        factor = 1.0 + jit.share * (2.0 * f.draw - 1.0) if jit.share else np.ones(len(f))
    value = wait_ms(wait.inner, f) * factor
    cap = getattr(wait.inner, "cap_ms", None)
    return np.minimum(cap, value) if cap is not None else value


@_register(WAITS, r.retry_by_class)
def _retry_by_class(rule: r.retry_by_class, f: Frame) -> np.ndarray:
    """The wait ``retry_by_class`` puts on its verdict (``backoff_ms``): transient failures only."""
    return np.where(TRANSIENT[f.error], np.round(wait_ms(rule.wait, f)), 0.0)


# -- lookups -------------------------------------------------------------------------------
def vectorisable(rule: Any) -> bool:
    return type(rule) in STOPS


def stops(rule: Any, frame: Frame) -> np.ndarray:
    """Where ``rule`` stops the task (bool per row); :class:`KeyError` for a rule with no twin."""
    try:
        fn = STOPS[type(rule)]
    except KeyError:
        raise KeyError(f"{rule_chain._describe(rule)} has no vectorised form") from None
    return np.asarray(fn(rule, frame), dtype=bool)


def wait_ms(wait: Any, frame: Frame) -> np.ndarray:
    """``wait`` (a wait, or ``retry_by_class`` for its verdict's backoff) over the frame."""
    try:
        fn = WAITS[type(wait)]
    except KeyError:
        raise KeyError(f"{b._describe(wait)} has no vectorised form") from None
    return np.asarray(fn(wait, frame), dtype=np.float64)


def replayed_stops(chain: Any) -> list[Any]:
    """The stop rules of ``chain`` that replay re-evaluates, in chain order."""
    return [rule for rule in r.rules_of(chain) if vectorisable(rule)]


def first_of_type(chain: Any, kind: type[R]) -> R | None:
    return next((rule for rule in r.rules_of(chain) if isinstance(rule, kind)), None)
