"""A candidate's compiled chain as what replay applies to logged attempts.

Replay only needs the parts of a chain that decide *whether* a task goes on after a
failure and what waiting costs: the stop rules whose inputs the log has (whitelist,
budget, phase and class caps, unclassified hand-off), whether stops are handed off, the
degrade threshold and the retry's wait. All of it is read from the rule objects of the
chain a :class:`~retrylens.sdk.core.policy.RetryPolicy` compiles into (or of a chain you
pass), and evaluated by their vectorised twins (:mod:`.vectorised`) — no limit is
re-encoded here. Role overrides are not applied (events do not carry the full policy of
the role), and fleet-level protection (retry throttle, breaker) is left to the log: it
depends on the whole fleet's traffic, which a per-task replay does not re-create.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from retrylens.schemas import Decision
from retrylens.sdk.core import rules as r
from retrylens.sdk.core.policy import RetryPolicy

from .history import DECISION_CODE, TRANSIENT_MASK, History
from .vectorised import (
    RATE_LIMIT,
    Frame,
    allowance,
    class_caps,
    first_of_type,
    replayed_stops,
    stops,
    wait_ms,
)

#: One row per replayed stop rule (by rule name), in the order a compiled chain asks them.
STOP_DIMENSIONS = ("stop_unless_retryable", "hand_off_unclassified", "stop_on_budget",
                   "stop_at_phase_cap", "stop_at_class_cap")
DEGRADE_CODES = np.array([DECISION_CODE[d.value] for d in
                          (Decision.DEGRADE_SCOPE, Decision.DEGRADE_PRECISION, Decision.DEGRADE_DEPENDENCY)])
MEDIAN_DRAW = 0.5  # replay waits at the jitter's median draw: ±share → ×1, full jitter → ×0.5


@dataclass(frozen=True)
class Limits:
    """A chain's replayed rules, and the bounds imputation reads from the same rule objects."""

    name: str
    chain: Any                  # the compiled chain (any chain of rules)
    stops: tuple[Any, ...]      # its replayed stop rules, in chain order
    retry: r.retry_by_class | None
    key: str                    # identity of the replayed stops (repr of their parameters)
    backoff_key: str            # identity of the retry's wait
    handoff: bool
    degrade_after: float
    caps: np.ndarray            # per ERRORS index (inf: no class cap rule)
    phase_caps: np.ndarray      # per history phase code (inf: no cap)
    max_attempts: float         # the fixed attempt cap (inf: none)
    budget: Any                 # the chain's TaskBudget (None: no budget rule)
    max_tokens: float
    max_cost: float

    @classmethod
    def of(cls, policy: RetryPolicy | Any, phases: tuple[str, ...], name: str | None = None) -> Limits:
        """``policy``'s compiled chain (or the chain ``policy`` is) as replay limits."""
        chain = r.compiled(policy) if isinstance(policy, RetryPolicy) else policy
        stop_rules = tuple(replayed_stops(chain))
        retry = first_of_type(chain, r.retry_by_class)
        class_cap = first_of_type(chain, r.stop_at_class_cap)
        phase_cap = first_of_type(chain, r.stop_at_phase_cap)
        budget = first_of_type(chain, r.stop_on_budget)
        degrade = first_of_type(chain, r.degrade_after_failures)
        stopping = first_of_type(chain, r.StopRule)
        inf = np.inf
        b = budget.budget if budget is not None else None
        return cls(
            name=name or (policy.id if isinstance(policy, RetryPolicy) else "chain"),
            chain=chain, stops=stop_rules, retry=retry,
            key=" | ".join(map(repr, stop_rules)),
            backoff_key=repr(retry.wait) if retry is not None else "",
            handoff=stopping.handoff if stopping is not None else True,
            degrade_after=float(degrade.after) if degrade is not None else inf,
            caps=class_caps(class_cap) if class_cap is not None else np.full(len(TRANSIENT_MASK), inf),
            phase_caps=np.array([phase_cap.caps.get(p, inf) if phase_cap is not None else inf for p in phases],
                                dtype=np.float64),
            max_attempts=float(b.max_attempts) if b is not None and b.max_attempts is not None else inf,
            budget=b,
            max_tokens=float(b.max_tokens or inf) if b is not None else inf,
            max_cost=float(b.max_cost_usd or inf) if b is not None else inf,
        )


    def attempt_limit(self, steps: np.ndarray) -> np.ndarray:
        """Attempts a task may make after ``steps`` completed steps: the retry allowance
        plus the first attempt, within the fixed cap (inf without a budget rule)."""
        steps = np.asarray(steps, dtype=np.float64)
        if self.budget is None:
            return np.full(steps.shape, np.inf)
        return np.minimum(self.max_attempts, allowance(self.budget, steps) + 1.0)


def history_frame(h: History, ref: Limits, elapsed: np.ndarray | None = None) -> Frame:
    """The logged task states as a :class:`Frame`: what the live governor's state read at each row.

    Replay keeps the logged continuation up to a stop, so a candidate is asked about the
    states the log went through: degradations and the extra try (granted under the live
    caps, ``ref``) as they happened.
    """
    d = h.derived()
    key = "frame:" + ref.key
    if key not in d:
        failed, base = h.failed, d["base"]
        err = np.where(failed, h.error, 0)
        went_on = failed & ~h.last
        degraded = went_on & np.isin(h.decision, DEGRADE_CODES)
        prev = np.concatenate(([-1], err[:-1])) if h.n_attempts else err
        type_changed = failed & (h.pos > 1) & (err != prev)
        extra = went_on & type_changed & (d["class_count"] > ref.caps[err])
        d[key + ":deg"] = _before(degraded, base)
        d[key + ":tc"] = type_changed
        d[key + ":extra"] = _before(extra, base) > 0
        d[key + ":attempts"] = h.pos.astype(np.float64)
        d[key + ":retry_after"] = np.where(failed & (err == RATE_LIMIT), h.backoff, 0.0)
        d[key + ":draw"] = np.full(h.n_attempts, MEDIAN_DRAW)
        d[key] = err
    return Frame(
        error=d[key], retryable=h.retryable, attempts=d[key + ":attempts"],
        steps=h.steps if h.steps is not None else np.zeros(h.n_attempts), tokens=d["tok_cum"],
        cost=d["cost_cum"], elapsed_s=(elapsed if elapsed is not None else d["lat_cum"]) / 1000.0,
        phase=h.phase, phases=h.phases, phase_count=d["phase_count"], class_count=d["class_count"],
        degradations=d[key + ":deg"], type_changed=d[key + ":tc"], extra_try_used=d[key + ":extra"],
        retries=d["fail_cum"], retry_after_ms=d[key + ":retry_after"], draw=d[key + ":draw"],
    )


def _before(flags: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Per row: how many earlier rows of its task have ``flags``."""
    total = np.cumsum(flags.astype(np.int64))
    return total - np.concatenate(([0], total))[base] - flags


def stop_matrix(h: History, lim: Limits, elapsed: np.ndarray, ref: Limits | None = None) -> np.ndarray:
    """``(len(STOP_DIMENSIONS), n_attempts)``: which of ``lim``'s stop rules bind at each failure.

    ``ref``: the live limits the log ran under (default ``lim``), for the logged states.
    """
    frame = history_frame(h, ref or lim, elapsed)
    rows = np.zeros((len(STOP_DIMENSIONS), h.n_attempts), bool)
    for rule in lim.stops:
        rows[STOP_DIMENSIONS.index(rule.name)] |= stops(rule, frame)
    return rows & h.failed


def backoff_under(h: History, lim: Limits, live: Limits) -> np.ndarray:
    """The wait after each retried failure under ``lim`` (the logged wait if unchanged)."""
    if lim.backoff_key == live.backoff_key:
        return h.backoff
    if lim.retry is None:
        return np.zeros(h.n_attempts)
    wait = wait_ms(lim.retry, history_frame(h, live))
    transient = TRANSIENT_MASK[np.where(h.failed, h.error, 0)] & h.failed
    return np.where((h.backoff > 0) & transient, wait, 0.0)

