"""A :class:`RetryPolicy` as the arrays replay applies to logged attempts.

Replay only needs the parts of a policy that decide *whether* a task goes on after a
failure and what waiting costs: per-class caps, the retryable whitelist, per-phase caps,
the task budget (attempts, tokens, money, deadline), whether stops are handed off, and
the backoff. Role overrides are not applied (events do not carry the full policy of the
role), and fleet-level protection (retry throttle, breaker) is left to the log: it
depends on the whole fleet's traffic, which a per-task replay does not re-create.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrylens.sdk.policy import RetryPolicy

from .history import ERRORS, TRANSIENT_MASK, History

STOP_DIMENSIONS = ("retryable", "attempts", "tokens", "cost", "deadline", "phase_cap", "class_cap")


@dataclass(frozen=True)
class Limits:
    name: str
    caps: np.ndarray            # per ERRORS index
    retryable: np.ndarray       # per ERRORS index
    phase_caps: np.ndarray      # per history phase code (inf: no cap)
    max_attempts: float
    max_tokens: float
    max_cost: float
    deadline_ms: float
    handoff: bool
    degrade_after: int
    backoff_key: tuple
    base_ms: float
    cap_ms: float
    jitter_mean: float
    honour_retry_after: bool
    max_retry_after_ms: float

    @classmethod
    def of(cls, policy: RetryPolicy, phases: tuple[str, ...], name: str | None = None) -> Limits:
        b = policy.backoff
        inf = np.inf
        return cls(
            name=name or policy.id,
            caps=np.array([policy.cap(e) for e in ERRORS], dtype=np.float64),
            retryable=np.array([e in policy.retryable for e in ERRORS]),
            phase_caps=np.array([policy.phase_caps.get(p, inf) for p in phases], dtype=np.float64),
            max_attempts=float(policy.budget.max_attempts),
            max_tokens=float(policy.budget.max_tokens or inf),
            max_cost=float(policy.budget.max_cost_usd or inf),
            deadline_ms=float(policy.budget.deadline_s * 1000 if policy.budget.deadline_s else inf),
            handoff=policy.rules.handoff_when_stopped,
            degrade_after=policy.degrade_after,
            backoff_key=tuple(b.model_dump().values()),
            base_ms=float(b.base_ms), cap_ms=float(b.cap_ms), jitter_mean=0.5 if b.full_jitter else 1.0,
            honour_retry_after=b.honour_retry_after, max_retry_after_ms=float(b.max_retry_after_ms),
        )


def stop_matrix(h: History, lim: Limits, elapsed: np.ndarray) -> np.ndarray:
    """``(len(STOP_DIMENSIONS), n_attempts)``: which of ``lim``'s stop rules bind at each failure."""
    d = h.derived()
    err = np.where(h.failed, h.error, 0)
    phase_cap = lim.phase_caps[h.phase] if len(lim.phase_caps) else np.full(h.n_attempts, np.inf)
    rows = (
        ~h.retryable | ~lim.retryable[err],
        h.pos >= lim.max_attempts,
        d["tok_cum"] >= lim.max_tokens,
        d["cost_cum"] >= lim.max_cost,
        elapsed >= lim.deadline_ms,
        d["phase_count"] >= phase_cap,
        d["class_count"] > lim.caps[err],
    )
    return np.vstack(rows) & h.failed


def backoff_under(h: History, lim: Limits, live: Limits) -> np.ndarray:
    """Expected wait after each retried failure under ``lim`` (the logged wait if unchanged)."""
    if lim.backoff_key == live.backoff_key:
        return h.backoff
    d = h.derived()
    exponent = np.clip(d["fail_cum"] - 1, 0, 30)
    wait = np.minimum(lim.cap_ms, lim.base_ms * 2.0**exponent) * lim.jitter_mean
    if lim.honour_retry_after:
        rate_limited = h.error == ERRORS.index(next(e for e in ERRORS if e.value == "rate_limit"))
        wait = np.where(rate_limited, np.maximum(wait, np.minimum(h.backoff, lim.max_retry_after_ms)), wait)
    transient = TRANSIENT_MASK[np.where(h.failed, h.error, 0)] & h.failed
    return np.where((h.backoff > 0) & transient, wait, 0.0)
