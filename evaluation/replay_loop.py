"""Replay as a plain per-attempt loop that runs the scalar rules: the readable reference.

Same semantics as :func:`replay.replay_policy` (point estimates, no bootstrap), but each
logged task is walked attempt by attempt through a real
:class:`~retrylens.sdk.core.state.TaskState`: the candidate's and the live chain's stop rules
are *called* on it (``rule(state)``), the candidate's ``retry_by_class`` gives the wait,
and :func:`~retrylens.sdk.core.rules.apply_verdict` moves the state on with the logged
decision. The tests check that the vectorised replay gives the same numbers, so the
vectorised twins are held to the rules the governor runs; ``bench/replay.py`` times both.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import numpy as np

from retrylens.schemas import AgentRef, Decision
from retrylens.sdk.core.state import TaskState
from retrylens.sdk.core.verdicts import Verdict, apply_verdict, record_failure
from retrylens.sdk.text.sanitizer import Failure

from .history import DECISIONS, STOP_CODES, TRANSIENT_MASK, History
from .limits import MEDIAN_DRAW, STOP_DIMENSIONS, Limits
from .replay import MAX_EXTRA, ImputationModel
from .vectorised import ERRORS, RATE_LIMIT


class ReplayEnv:
    """The world as replay sees it: a clock it sets, and nothing else binding."""

    def __init__(self, clock_s: float = 0.0) -> None:
        self.clock_s = clock_s

    def now(self) -> float:
        return self.clock_s

    def breaker_open(self, dependency: str) -> bool:
        return False

    def retry_allowed(self, dependency: str) -> bool:
        return True

    def fingerprint_failures(self, fingerprint: str) -> int:
        return 0

    def can_handoff(self) -> bool:
        return True


class _MedianDraw(random.Random):
    """Every jitter draw at its median, as the vectorised replay assumes."""

    def random(self) -> float:
        return MEDIAN_DRAW


def _state(env: ReplayEnv) -> TaskState:
    return TaskState(task_id="replay", project="replay", agent=AgentRef(name="replay"), goal="",
                     fingerprint="", features={}, trace_id="0" * 32, root_span_id="0" * 16, env=env,
                     rng=_MedianDraw())


def _binding(lim: Limits, state: TaskState) -> list[bool]:
    """Which of ``lim``'s replayed stop rules stop ``state`` (one flag per STOP_DIMENSIONS name)."""
    flags = [False] * len(STOP_DIMENSIONS)
    for rule in lim.stops:
        if rule(state) is not None:
            flags[STOP_DIMENSIONS.index(rule.name)] = True
    return flags


def _wait(lim: Limits, ref: Limits, state: TaskState, logged: float, error: int) -> float:
    if lim.backoff_key == ref.backoff_key:
        return logged
    if logged <= 0 or not TRANSIENT_MASK[error] or lim.retry is None:
        return 0.0
    verdict = lim.retry(state)
    assert verdict is not None, "retry_by_class always answers"
    return float(verdict.backoff_ms)


def _walk(h: History, t: int, ref: Limits, env: ReplayEnv) -> Iterator[tuple[int, TaskState]]:
    """Task ``t``'s logged states, one per failed attempt row, as the live governor held them.

    After each row the log went on from, the state moves on with the logged decision
    (:func:`apply_verdict`, the extra try judged by the live caps).
    """
    live_caps = {e: ref.caps[k] for k, e in enumerate(ERRORS)}
    state = _state(env)
    tok = cost = 0.0
    start, count = int(h.starts[t]), int(h.counts[t])
    for pos, i in enumerate(range(start, start + count), start=1):
        tok += float(h.tokens[i])
        cost += float(h.cost[i])
        if not h.failed[i]:
            return
        e = int(h.error[i])
        state.attempt, state.phase = pos, h.phases[int(h.phase[i])]
        state.ledger.attempts, state.ledger.tokens, state.ledger.cost_usd = pos, int(tok), cost
        state.ledger.steps = int(h.steps[i]) if h.steps is not None else 0
        state.last_failure = Failure(ERRORS[e], retryable=bool(h.retryable[i]),
                                     retry_after_ms=h.backoff[i] if e == RATE_LIMIT else None)
        record_failure(state, "")
        yield i, state
        if pos < count:  # the log went on: move the state as the live governor did
            logged = DECISIONS[h.decision[i]] if h.decision[i] >= 0 else Decision.NONE
            apply_verdict(state, Verdict(logged if logged in _RETRYING else Decision.RETRY_SAME, "logged"),
                          caps=live_caps)


def scalar_stop_matrix(h: History, lim: Limits, ref: Limits, elapsed: np.ndarray) -> np.ndarray:
    """:func:`limits.stop_matrix` computed by calling ``lim``'s stop rules on every logged state."""
    out = np.zeros((len(STOP_DIMENSIONS), h.n_attempts), bool)
    env = ReplayEnv()
    for t in range(h.n_tasks):
        for i, state in _walk(h, t, ref, env):
            env.clock_s = float(elapsed[i]) / 1000.0
            out[:, i] = _binding(lim, state)
    return out


def scalar_waits(h: History, lim: Limits, ref: Limits) -> np.ndarray:
    """:func:`limits.backoff_under` computed by calling ``lim``'s ``retry_by_class`` on every logged state."""
    out = np.zeros(h.n_attempts)
    env = ReplayEnv()
    for t in range(h.n_tasks):
        for i, state in _walk(h, t, ref, env):
            out[i] = _wait(lim, ref, state, float(h.backoff[i]), int(h.error[i]))
    return out


def replay_loop(h: History, lim: Limits, ref: Limits, model: ImputationModel,
                rows: int | None = None) -> dict[str, list[float]]:
    """Per-task metrics of the first ``rows`` attempts' tasks, one attempt at a time."""
    out: dict[str, list[float]] = {m: [] for m in ("success", "attempts", "tokens", "cost_usd", "latency_ms",
                                                   "handoff")}
    limit = h.n_attempts if rows is None else rows
    any_handoff = bool(h.handed_off.any())
    env = ReplayEnv()
    for t in range(h.n_tasks):
        start, count = int(h.starts[t]), int(h.counts[t])
        if start + count > limit:
            break
        tok = cost = lat = elapsed_c = elapsed_l = 0.0
        attempts, truncated, extended = 0, False, None
        states = _walk(h, t, ref, env)
        for pos, i in enumerate(range(start, start + count), start=1):
            attempts += 1
            tok += float(h.tokens[i])
            cost += float(h.cost[i])
            lat += float(h.latency[i])
            elapsed_c += float(h.latency[i])
            elapsed_l += float(h.latency[i])
            if not h.failed[i]:
                break
            _, state = next(states)
            e, ph = int(h.error[i]), int(h.phase[i])
            env.clock_s = elapsed_c / 1000.0
            sc = _binding(lim, state)
            env.clock_s = elapsed_l / 1000.0
            sl = _binding(ref, state)
            last = pos == count
            explored_stop = h.greedy[i] in _STOPS and h.decision[i] not in _STOPS
            extends = any(sl) and not any(sc)
            if not last and (any(c and not s for c, s in zip(sc, sl, strict=True))
                             or (explored_stop and not extends)):
                truncated = True
                break
            if last and any(sl) and not any(sc):
                extended = (e, ph, state.failures_of(ERRORS[e]), state.failures_in_phase(state.phase), tok,
                            cost, pos, state.ledger.steps)
            wait = _wait(lim, ref, state, float(h.backoff[i]), e)
            lat += wait
            elapsed_c += wait
            elapsed_l += float(h.backoff[i])
        success = 0.0 if truncated else float(h.succeeded[t])
        if lim.handoff == ref.handoff:
            handoff = float(any_handoff and lim.handoff) if truncated else float(h.handed_off[t])
        else:
            handoff = float(success == 0.0 and lim.handoff and (any_handoff or lim.handoff))
        extra = 0.0
        if extended is not None:
            e, ph, c, pc, tk, cs, pos, steps = extended
            phase_cap = lim.phase_caps[ph] if len(lim.phase_caps) else math.inf
            group = int(model.task_agent[t]) * len(ERRORS) + e
            m = min(lim.caps[e] - c + 1, _attempt_limit(lim, steps) - pos, phase_cap - pc,
                    math.ceil((lim.max_tokens - tk) / max(model.tokens[group], 1.0)) if lim.max_tokens < math.inf
                    else math.inf,
                    math.ceil((lim.max_cost - cs) / max(model.cost[group], 1e-12)) if lim.max_cost < math.inf
                    else math.inf, MAX_EXTRA)
            m = min(max(m, 1), MAX_EXTRA)
            key = np.array([[group, c, pos]])
            if model.trials(key)[0] >= model.min_trials:
                p = float(model.rates(key)[0])
                fail_all = (1 - p) ** m
                extra = (1 - fail_all) / p if p > 0 else m
            else:  # no evidence for these retries: all m of them count as failing
                fail_all, extra = 1.0 - success, m
            success = 1 - fail_all
            handoff = fail_all * float(lim.handoff)
            tok += extra * model.tokens[group]
            cost += extra * model.cost[group]
            lat += extra * model.latency[group]
        for name, value in (("success", success), ("attempts", attempts + extra), ("tokens", tok),
                            ("cost_usd", cost), ("latency_ms", lat), ("handoff", handoff)):
            out[name].append(float(value))
    return out


def _attempt_limit(lim: Limits, steps: int) -> float:
    """The scalar form of :meth:`Limits.attempt_limit`, from the budget object itself."""
    budget = lim.budget
    if budget is None:
        return math.inf
    return min(lim.max_attempts, budget.allowance(steps) + 1.0)


_STOPS = frozenset(int(c) for c in STOP_CODES)
_RETRYING = frozenset(d for d in Decision if Verdict(d, "").retrying)


def as_arrays(result: dict[str, list[float]]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in result.items()}
