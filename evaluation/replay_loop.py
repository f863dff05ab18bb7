"""The replay rules as a plain per-attempt Python loop: the readable reference.

Same semantics as :func:`replay.replay_policy` (point estimates, no bootstrap), written
attempt by attempt. The tests check that the vectorised replay gives the same numbers,
and ``bench/replay.py`` times both.
"""

from __future__ import annotations

import math

import numpy as np

from .history import ERROR_CODE, TRANSIENT_MASK, History
from .limits import Limits
from .replay import MAX_EXTRA, ImputationModel

_RATE_LIMIT = ERROR_CODE["rate_limit"]


def _wait(lim: Limits, ref: Limits, logged: float, error: int, failures: int) -> float:
    if lim.backoff_key == ref.backoff_key or logged <= 0 or not TRANSIENT_MASK[error]:
        return logged if lim.backoff_key == ref.backoff_key else 0.0
    wait = min(lim.cap_ms, lim.base_ms * 2.0 ** min(max(failures - 1, 0), 30)) * lim.jitter_mean
    if lim.honour_retry_after and error == _RATE_LIMIT:
        wait = max(wait, min(logged, lim.max_retry_after_ms))
    return wait


def _binding(lim: Limits, h: History, i: int, pos: int, classes: dict, phases: dict, tok: float, cost: float,
             elapsed: float) -> list[bool]:
    e, ph = int(h.error[i]), int(h.phase[i])
    phase_cap = lim.phase_caps[ph] if len(lim.phase_caps) else math.inf
    return [not h.retryable[i] or not lim.retryable[e], pos >= lim.max_attempts, tok >= lim.max_tokens,
            cost >= lim.max_cost, elapsed >= lim.deadline_ms, phases[ph] >= phase_cap, classes[e] > lim.caps[e]]


def replay_loop(h: History, lim: Limits, ref: Limits, model: ImputationModel,
                rows: int | None = None) -> dict[str, list[float]]:
    """Per-task metrics of the first ``rows`` attempts' tasks, one attempt at a time."""
    out: dict[str, list[float]] = {m: [] for m in ("success", "attempts", "tokens", "cost_usd", "latency_ms",
                                                   "handoff")}
    limit = h.n_attempts if rows is None else rows
    any_handoff = bool(h.handed_off.any())
    for t in range(h.n_tasks):
        start, count = int(h.starts[t]), int(h.counts[t])
        if start + count > limit:
            break
        classes: dict[int, int] = {}
        phases: dict[int, int] = {}
        tok = cost = lat = elapsed_c = elapsed_l = 0.0
        failures, attempts, truncated, extended = 0, 0, False, None
        for pos, i in enumerate(range(start, start + count), start=1):
            attempts += 1
            tok += float(h.tokens[i])
            cost += float(h.cost[i])
            lat += float(h.latency[i])
            elapsed_c += float(h.latency[i])
            elapsed_l += float(h.latency[i])
            if not h.failed[i]:
                break
            failures += 1
            e, ph = int(h.error[i]), int(h.phase[i])
            classes[e] = classes.get(e, 0) + 1
            phases[ph] = phases.get(ph, 0) + 1
            sc = _binding(lim, h, i, pos, classes, phases, tok, cost, elapsed_c)
            sl = _binding(ref, h, i, pos, classes, phases, tok, cost, elapsed_l)
            last = pos == count
            if not last and any(c and not s for c, s in zip(sc, sl, strict=True)):
                truncated = True
                break
            if last and any(sl) and not any(sc):
                extended = (i, e, ph, classes[e], phases[ph], tok, cost, pos)
            wait = _wait(lim, ref, float(h.backoff[i]), e, failures)
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
            i, e, ph, c, pc, tk, cs, pos = extended
            phase_cap = lim.phase_caps[ph] if len(lim.phase_caps) else math.inf
            m = min(lim.caps[e] - c + 1, lim.max_attempts - pos, phase_cap - pc,
                    math.ceil((lim.max_tokens - tk) / max(model.tokens[e], 1.0)) if lim.max_tokens < math.inf
                    else math.inf,
                    math.ceil((lim.max_cost - cs) / max(model.cost[e], 1e-12)) if lim.max_cost < math.inf
                    else math.inf, MAX_EXTRA)
            m = min(max(m, 1), MAX_EXTRA)
            p = float(model.p[e])
            fail_all = (1 - p) ** m
            success = 1 - fail_all
            extra = (1 - fail_all) / p if p > 0 else m
            handoff = fail_all * float(lim.handoff)
            tok += extra * model.tokens[e]
            cost += extra * model.cost[e]
            lat += extra * model.latency[e]
        for name, value in (("success", success), ("attempts", attempts + extra), ("tokens", tok),
                            ("cost_usd", cost), ("latency_ms", lat), ("handoff", handoff)):
            out[name].append(float(value))
    return out


def as_arrays(result: dict[str, list[float]]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in result.items()}
