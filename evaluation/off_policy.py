"""Unbiased off-policy estimates from logged propensities: IPS, self-normalised IPS, DR.

The governor explores: at a failure it sometimes takes another allowed decision and logs
the probability ``propensity`` of the decision it took. A task is a trajectory of
decisions; a *target* policy picks, at each logged failure, either a decision kind (the
live rules' own choice before exploration — ``greedy`` — or the logged shadow candidate's
choice — ``shadow``) or a stop.

- Importance weight of a task: the product over its decisions of
  ``1{logged = target} / propensity``; unbiased for any target the logging policy could
  have taken with positive probability.
- **Stops need no exploration** (implicit feedback, as in the "Sayer" paper): if the
  target stops at failure j while the log went on, the outcome of stopping is known
  exactly from the prefix, so the trajectory is cut there and decisions from j on carry
  no weight. Downward cap and budget changes are therefore evaluated without bias.
- Where the *log* stopped and the target would go on, the logging policy had probability
  0 of continuing (exploration never turns a stop into a retry): IPS and SNIPS cannot see
  it and are biased there; the doubly robust estimator fills it with its model. The share
  of such tasks is reported as ``unsupported``.

Estimators (per metric, mean per task): IPS ``mean(w·G)``, SNIPS ``Σw·G / Σw`` and the
step-wise doubly robust estimator of Jiang & Li (2016) with a direct model ``q̂`` (mean
logged continuation by failure class and decision). Variances: the sample variance of the
per-task terms over n for IPS and DR, the delta method for SNIPS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from retrylens.sdk.core.policy import RetryPolicy

from .history import DECISIONS, ERRORS, STOP_CODES, History
from .limits import Limits, backoff_under, stop_matrix
from .replay import METRICS

Actions = Literal["greedy", "shadow"]
ESTIMATORS = ("ips", "snips", "dr")
Z95 = 1.959964


@dataclass
class OffPolicyEstimate:
    value: float
    variance: float
    se: float
    lo: float
    hi: float

    def as_dict(self) -> dict[str, float]:
        return {"value": self.value, "variance": self.variance, "se": self.se, "lo": self.lo, "hi": self.hi}


@dataclass
class OffPolicyResult:
    name: str
    actions: str
    estimates: dict[str, dict[str, OffPolicyEstimate]]   # estimator → metric → estimate
    n: int
    effective_n: float
    unsupported: float

    def as_dict(self) -> dict[str, object]:
        return {"actions": self.actions, "n": self.n, "effective_n": self.effective_n,
                "unsupported_share": self.unsupported,
                "estimates": {k: {m: e.as_dict() for m, e in v.items()} for k, v in self.estimates.items()}}


def _estimate(terms: np.ndarray) -> OffPolicyEstimate:
    n = len(terms)
    value = float(terms.mean()) if n else float("nan")
    var = float(terms.var(ddof=1) / n) if n > 1 else float("nan")
    se = var**0.5
    return OffPolicyEstimate(value, var, se, value - Z95 * se, value + Z95 * se)


def ips(weights: np.ndarray, returns: np.ndarray) -> OffPolicyEstimate:
    return _estimate(weights * returns)


def snips(weights: np.ndarray, returns: np.ndarray) -> OffPolicyEstimate:
    total = weights.sum()
    if total <= 0:
        return OffPolicyEstimate(float("nan"), float("nan"), float("nan"), float("nan"), float("nan"))
    value = float((weights * returns).sum() / total)
    var = float(((weights * (returns - value)) ** 2).sum() / total**2)
    se = var**0.5
    return OffPolicyEstimate(value, var, se, value - Z95 * se, value + Z95 * se)


@dataclass
class _Steps:
    """Per attempt row: rewards, target action, importance ratio, cut points."""

    reward: np.ndarray        # rows × metrics, what the row itself adds (target view)
    stop_value: np.ndarray    # rows × metrics, terminal value if the trajectory ends at the row
    ends: np.ndarray          # row is where the target's trajectory ends
    ratio: np.ndarray         # importance ratio of the decision after the row (1 when none)
    target: np.ndarray        # target decision code (-1: stop / none)
    unsupported: np.ndarray   # row where the target goes on but the log stopped


def _steps(h: History, lim: Limits, ref: Limits, actions: Actions) -> _Steps:
    d = h.derived()
    base = d["base"]
    wait = backoff_under(h, lim, ref)
    cum = np.cumsum(wait)
    waited_before = d["lat_cum"] + (cum - np.concatenate(([0.0], cum))[base] - wait)
    sc = stop_matrix(h, lim, waited_before, ref)
    cum_l = np.cumsum(h.backoff)
    sl = stop_matrix(h, ref, d["lat_cum"] + (cum_l - np.concatenate(([0.0], cum_l))[base] - h.backoff), ref)
    last = h.last
    stop_codes = np.isin(np.arange(len(DECISIONS)), STOP_CODES)
    target = h.greedy.copy()
    if actions == "shadow":
        target = np.where(h.shadow >= 0, h.shadow, target)
    target_stops = h.failed & (target >= 0) & stop_codes[np.maximum(target, 0)]
    cut = h.failed & ~last & ((sc & ~sl).any(0) | target_stops)         # Sayer: the stop is observed
    log_stop = h.failed & last
    unsupported = log_stop & sl.any(0) & ~sc.any(0)
    ends = cut | last
    handoff_any = bool(h.handed_off.any())
    n_m = len(METRICS)
    reward = np.zeros((h.n_attempts, n_m))
    reward[:, 1] = 1.0
    reward[:, 2] = h.tokens
    reward[:, 3] = h.cost
    reward[:, 4] = h.latency + np.where(ends, 0.0, wait)
    stop_value = np.zeros((h.n_attempts, n_m))
    success_last = last & ~h.failed
    stop_value[:, 0] = success_last
    logged_handoff = h.handed_off[h.task] & last
    if lim.handoff == ref.handoff:
        ho = np.where(cut, lim.handoff and handoff_any, logged_handoff)
    else:
        ho = (cut | (last & h.failed)) & lim.handoff
    stop_value[:, 5] = ho
    supported = h.failed & ~ends & (target >= 0)
    ratio = np.where(supported, (h.decision == target) / np.maximum(h.propensity, 1e-9), 1.0)
    ratio = np.where(unsupported, 0.0, ratio)
    return _Steps(reward, stop_value, ends, ratio, np.where(supported, target, -1), unsupported)


def _direct_model(h: History, s: _Steps, cont: np.ndarray) -> np.ndarray:
    """q̂[error, decision] = mean logged continuation value after that decision (with fallbacks)."""
    rows = np.flatnonzero(h.failed & ~h.last)
    n_e, n_d, n_m = len(ERRORS), len(DECISIONS), cont.shape[1]
    key = h.error[rows] * n_d + h.decision[rows]
    counts = np.bincount(key, minlength=n_e * n_d).astype(np.float64)
    q = np.zeros((n_e * n_d, n_m))
    for m in range(n_m):
        q[:, m] = np.bincount(key, weights=cont[rows, m], minlength=n_e * n_d)
    by_err_n = counts.reshape(n_e, n_d).sum(1)
    by_err = q.reshape(n_e, n_d, n_m).sum(1) / np.maximum(by_err_n, 1)[:, None]
    overall = cont[rows].mean(0) if len(rows) else np.zeros(n_m)
    by_err = np.where(by_err_n[:, None] > 0, by_err, overall)
    q = q / np.maximum(counts, 1)[:, None]
    q = np.where(counts[:, None] > 0, q, np.repeat(by_err, n_d, axis=0))
    return q.reshape(n_e, n_d, n_m)


def _logged_continuation(h: History) -> np.ndarray:
    """Per row: the logged value from the next row to the end (for the direct model)."""
    n_m = len(METRICS)
    row_value = np.zeros((h.n_attempts, n_m))
    row_value[:, 1] = 1
    row_value[:, 2] = h.tokens
    row_value[:, 3] = h.cost
    row_value[:, 4] = h.latency + h.backoff
    row_value[:, 0] = h.last & ~h.failed
    row_value[:, 5] = h.last & h.handed_off[h.task]
    total = np.cumsum(row_value[::-1], axis=0)[::-1]   # suffix sums over all rows
    end = (h.starts + h.counts)[h.task]                # exclusive end row of each row's task
    tail = np.vstack([total, np.zeros((1, n_m))])
    return tail[np.arange(h.n_attempts) + 1] - tail[end]


def evaluate(h: History, target: RetryPolicy | Limits, live: RetryPolicy | Limits, *,
             actions: Actions = "greedy", name: str | None = None) -> OffPolicyResult:
    """IPS, SNIPS and DR estimates of every metric under ``target`` from the live log ``h``."""
    lim = target if isinstance(target, Limits) else Limits.of(target, h.phases)
    ref = live if isinstance(live, Limits) else Limits.of(live, h.phases)
    name = name or lim.name
    if h.n_tasks == 0:
        empty = {m: _estimate(np.zeros(0)) for m in METRICS}
        return OffPolicyResult(name, actions, {k: dict(empty) for k in ESTIMATORS}, 0, 0.0, 0.0)
    s = _steps(h, lim, ref, actions)
    q = _direct_model(h, s, _logged_continuation(h))
    n_m = len(METRICS)
    max_pos = int(h.pos.max())
    # IPS / SNIPS: cumulative weights up to the target's end; return of the cut trajectory.
    after_end = _after(s.ends, h)
    live_row = ~after_end
    log_w = np.where(live_row & ~s.ends, np.log(np.maximum(s.ratio, 1e-300)), 0.0)
    zero = live_row & ~s.ends & (s.ratio == 0)
    w = np.exp(np.bincount(h.task, weights=log_w, minlength=h.n_tasks))
    w[np.bincount(h.task, weights=zero, minlength=h.n_tasks) > 0] = 0.0
    w[np.bincount(h.task, weights=s.unsupported, minlength=h.n_tasks) > 0] = 0.0
    ret = np.zeros((h.n_tasks, n_m))
    for m in range(n_m):
        ret[:, m] = np.bincount(h.task, weights=np.where(live_row, s.reward[:, m] + np.where(
            s.ends, s.stop_value[:, m], 0.0), 0.0), minlength=h.n_tasks)
    # DR: backwards over positions, vectorised across tasks.
    value = np.zeros((h.n_attempts, n_m))
    err = np.maximum(h.error, 0)
    unsup_q = q[err, np.maximum(h.greedy, 0)]
    for k in range(max_pos, 0, -1):
        rows = np.flatnonzero(h.pos == k)
        end_rows = rows[s.ends[rows]]
        value[end_rows] = s.reward[end_rows] + s.stop_value[end_rows]
        un = rows[s.unsupported[rows]]
        value[un] = s.reward[un] + unsup_q[un]
        go = rows[~s.ends[rows]]
        tgt = np.maximum(s.target[go], 0)
        q_target = q[err[go], tgt]
        q_logged = q[err[go], h.decision[go]]
        value[go] = s.reward[go] + q_target + s.ratio[go, None] * (value[go + 1] - q_logged)
    dr_terms = value[h.starts]
    estimates = {
        "ips": {m: ips(w, ret[:, i]) for i, m in enumerate(METRICS)},
        "snips": {m: snips(w, ret[:, i]) for i, m in enumerate(METRICS)},
        "dr": {m: _estimate(dr_terms[:, i]) for i, m in enumerate(METRICS)},
    }
    ess = float(w.sum() ** 2 / max((w**2).sum(), 1e-12))
    unsupported = float(np.bincount(h.task, weights=s.unsupported, minlength=h.n_tasks).astype(bool).mean())
    return OffPolicyResult(name, actions, estimates, h.n_tasks, ess, unsupported)


def _after(ends: np.ndarray, h: History) -> np.ndarray:
    """Rows that come after the first trajectory end of their task."""
    cum = np.cumsum(ends.astype(np.int64))
    before_task = np.concatenate(([0], cum))[h.starts][h.task]
    return (cum - before_task - ends) > 0
