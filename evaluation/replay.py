"""Counterfactual replay of logged attempt histories under candidate retry policies.

For every logged task, replay walks its attempts and asks, at each failure, whether the
candidate would have stopped where the live policy went on (a lower cap, a smaller
budget, a phase cap, a shorter whitelist, a deadline). A stop is *observed*, not guessed:
the task that went on to attempt k also shows what stopping at any j < k gives — the
attempts, tokens, money and time spent up to j, and a failed (or handed-off) task. This
is the implicit feedback of the log (as in the "Sayer" paper), so downward changes need
no exploration and carry no model error.

What replay cannot know: an attempt that was never tried. Where the live policy stopped
and the candidate would go on (a higher cap or budget), the extra attempts are
**imputed**: each succeeds with the probability that logged retries after the same
failure class succeeded (deep retries — the class's second failure or later — when there
are enough of them, since tasks that hit a cap are the hard ones), and costs what those
retries cost on average; the candidate's own limits bound how many it gets. Imputed tasks
enter the estimates as expected values, the imputation model is re-fitted in every
bootstrap replicate, and the share of imputed tasks is reported — a large share means
the estimate leans on the model, not on the log. Changes of *how* to retry (e.g. an
earlier degrade threshold) keep the logged continuation; the share of failures where
the candidate would have picked another kind of decision is reported as
``decision_divergence``. Use :mod:`off_policy` (logged propensities) for those.

Limits are compared *relative to the live policy* (a candidate stops where one of its
limits binds and the live policy's same limit did not), so the live policy replayed on
its own log gives the log back exactly, and rules replay does not model (loops, known-bad
inputs, circuit breakers) act on the candidate as they acted on the live policy.

Everything runs on task-level numpy arrays; the CIs are a paired Poisson bootstrap over
tasks (the same resamples for every policy, so differences against live get CIs too).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from retrylens.sdk.policy import RetryPolicy
from retrylens.sdk.rule_chain import Rule

from .history import ERRORS, History
from .limits import Limits, backoff_under, stop_matrix

METRICS = ("success", "attempts", "tokens", "cost_usd", "latency_ms", "handoff")
MAX_EXTRA = 20
DEEP_MIN_TRIALS = 10


@dataclass
class Estimate:
    value: float
    lo: float
    hi: float

    def as_dict(self) -> dict[str, float]:
        return {"value": self.value, "lo": self.lo, "hi": self.hi}


@dataclass
class PolicyReplay:
    """One policy's replay: per-task expected metrics and how much of it is imputed."""

    name: str
    per_task: dict[str, np.ndarray]
    truncated: np.ndarray
    extended: np.ndarray
    decision_divergence: float
    estimates: dict[str, Estimate] = field(default_factory=dict)
    diff_vs_live: dict[str, Estimate] = field(default_factory=dict)
    _ext: dict[str, np.ndarray] | None = None

    @property
    def point(self) -> dict[str, float]:
        return {m: float(v.mean()) if len(v) else float("nan") for m, v in self.per_task.items()}


@dataclass
class ImputationModel:
    """Success of one more retry after a failure of each class, and what a retry costs."""

    rows: np.ndarray           # attempt rows whose retry the model learns from
    row_task: np.ndarray
    row_err: np.ndarray
    row_ok: np.ndarray         # did the retry after the row succeed
    n_tasks: int
    p: np.ndarray              # per class
    tokens: np.ndarray         # per class: mean tokens of a retry
    cost: np.ndarray
    latency: np.ndarray        # retry latency + the wait before it

    def p_for(self, weights: np.ndarray) -> np.ndarray:
        """Per-class success probability under bootstrap ``weights`` (B × tasks)."""
        n_err = len(ERRORS)
        succ = np.zeros((self.n_tasks, n_err))
        trials = np.zeros((self.n_tasks, n_err))
        np.add.at(trials, (self.row_task, self.row_err), 1.0)
        np.add.at(succ, (self.row_task, self.row_err), self.row_ok.astype(np.float64))
        s, t = weights @ succ, weights @ trials
        return (s + 0.5) / (t + 1.0)


def fit_imputation(h: History) -> ImputationModel:
    n_err = len(ERRORS)
    d = h.derived()
    retried = h.failed & ~h.last
    nxt = np.minimum(np.arange(h.n_attempts) + 1, max(h.n_attempts - 1, 0))
    next_ok = np.where(retried, ~h.failed[nxt], False) if h.n_attempts else retried
    deep = retried & (d["class_count"] >= 2)
    err = np.where(h.failed, h.error, 0)
    deep_trials = np.bincount(err[deep], minlength=n_err)
    use_deep = deep_trials[err] >= DEEP_MIN_TRIALS
    rows = np.flatnonzero(retried & (~use_deep | deep))
    tot_t = np.bincount(err[rows], minlength=n_err).astype(np.float64)
    tot_s = np.bincount(err[rows], weights=next_ok[rows].astype(np.float64), minlength=n_err)
    glob = (tot_s.sum() + 0.5) / (tot_t.sum() + 1.0)
    p = np.where(tot_t > 0, (tot_s + 0.5) / (tot_t + 1.0), glob)
    retry_rows = np.flatnonzero(retried)
    following = retry_rows + 1
    n_ret = np.bincount(err[retry_rows], minlength=n_err).astype(np.float64)

    def per_class(values: np.ndarray) -> np.ndarray:
        sums = np.bincount(err[retry_rows], weights=values, minlength=n_err)
        fallback = values.mean() if len(values) else 0.0
        return np.where(n_ret > 0, sums / np.maximum(n_ret, 1), fallback)

    return ImputationModel(
        rows=rows, row_task=h.task[rows], row_err=err[rows], row_ok=next_ok[rows], n_tasks=h.n_tasks, p=p,
        tokens=per_class(h.tokens[following].astype(np.float64)), cost=per_class(h.cost[following]),
        latency=per_class(h.latency[following] + h.backoff[retry_rows]),
    )


def _extension(p: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expected success and expected extra attempts of up to ``m`` tries with success ``p``."""
    q = 1.0 - p
    fail_all = q**m
    attempts = np.where(p > 0, (1.0 - fail_all) / np.where(p > 0, p, 1.0), m)
    return 1.0 - fail_all, attempts


def replay_policy(h: History, policy: RetryPolicy | Rule | Limits, live: RetryPolicy | Rule | Limits,
                  model: ImputationModel | None = None) -> PolicyReplay:
    """Point replay of ``h`` under ``policy`` (a policy, a chain of rules, or their limits)."""
    lim = policy if isinstance(policy, Limits) else Limits.of(policy, h.phases)
    ref = live if isinstance(live, Limits) else Limits.of(live, h.phases)
    model = model or fit_imputation(h)
    d = h.derived()
    n = h.n_tasks
    base = d["base"]
    wait_c = backoff_under(h, lim, ref)
    waited_before = d["lat_cum"] + (_cum_by_task(wait_c, base) - wait_c)
    sc = stop_matrix(h, lim, waited_before, ref)
    sl = _live_stops(h, ref)
    last = h.last
    stricter = (sc & ~sl).any(0)
    stop_here = h.failed & ~last & stricter
    first_stop = _cum_by_task(stop_here.astype(np.float64), base) - stop_here
    kept = first_stop == 0
    truncated = np.bincount(h.task, weights=stop_here.astype(np.float64), minlength=n) > 0
    ext_row = h.failed & last & sl.any(0) & ~sc.any(0)
    extended = np.zeros(n, bool)
    extended[h.task[ext_row]] = True

    def tsum(values: np.ndarray) -> np.ndarray:
        return np.bincount(h.task, weights=np.where(kept, values, 0.0), minlength=n)

    waits = np.where(stop_here, 0.0, wait_c)
    per_task = {
        "success": np.where(truncated, 0.0, h.succeeded.astype(np.float64)),
        "attempts": tsum(np.ones(h.n_attempts)),
        "tokens": tsum(h.tokens.astype(np.float64)),
        "cost_usd": tsum(h.cost),
        "latency_ms": tsum(h.latency + waits),
    }
    stopped_failed = ~per_task["success"].astype(bool)
    if lim.handoff == ref.handoff:
        handoff = np.where(truncated, h.handed_off.any() and lim.handoff, h.handed_off)
    else:
        handoff = stopped_failed & lim.handoff & bool(h.handed_off.any() or lim.handoff)
    per_task["handoff"] = np.asarray(handoff, dtype=np.float64)
    result = PolicyReplay(lim.name, per_task, truncated, extended, _divergence(h, lim, ref))
    if ext_row.any():
        result._ext = _extend(h, lim, model, ext_row, per_task)
    return result


def _live_stops(h: History, ref: Limits) -> np.ndarray:
    """The live policy's binding limits on the log (cached on the history: shared by all candidates)."""
    cache = h.derived()
    key = "live_stops:" + ref.key
    if key not in cache:
        elapsed = cache["lat_cum"] + (_cum_by_task(h.backoff, cache["base"]) - h.backoff)
        cache[key] = stop_matrix(h, ref, elapsed, ref)
    return cache[key]


def _cum_by_task(values: np.ndarray, base: np.ndarray) -> np.ndarray:
    total = np.cumsum(values)
    return total - np.concatenate(([0.0], total))[base]


def _extend(h: History, lim: Limits, model: ImputationModel, rows: np.ndarray,
            per_task: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Impute the attempts the live policy never tried; updates ``per_task`` in place."""
    d = h.derived()
    idx = np.flatnonzero(rows)
    err = h.error[idx]
    phase_cap = lim.phase_caps[h.phase[idx]] if len(lim.phase_caps) else np.full(len(idx), np.inf)
    tok = np.maximum(model.tokens[err], 1.0)
    cost = np.maximum(model.cost[err], 1e-12)
    m = np.minimum.reduce([
        lim.caps[err] - d["class_count"][idx] + 1,
        lim.attempt_limit(h.steps[idx] if h.steps is not None else np.zeros(len(idx))) - h.pos[idx],
        phase_cap - d["phase_count"][idx],
        np.ceil((lim.max_tokens - d["tok_cum"][idx]) / tok),
        np.ceil((lim.max_cost - d["cost_cum"][idx]) / cost),
        np.full(len(idx), float(MAX_EXTRA)),
    ])
    m = np.clip(m, 1, MAX_EXTRA)
    ext = {"task": h.task[idx], "err": err, "m": m,
           "base_success": per_task["success"][h.task[idx]].copy(),
           "base_handoff": per_task["handoff"][h.task[idx]].copy()}
    _apply_extension(per_task, ext, model, model.p, lim.handoff)
    return ext


def _apply_extension(per_task: dict[str, np.ndarray], ext: dict[str, np.ndarray], model: ImputationModel,
                     p: np.ndarray, handoff: bool) -> None:
    t, err, m = ext["task"], ext["err"], ext["m"]
    success, extra = _extension(p[err], m)
    per_task["success"][t] = success
    per_task["attempts"][t] += extra
    per_task["tokens"][t] += extra * model.tokens[err]
    per_task["cost_usd"][t] += extra * model.cost[err]
    per_task["latency_ms"][t] += extra * model.latency[err]
    per_task["handoff"][t] = (1.0 - success) * float(handoff)


def _divergence(h: History, lim: Limits, ref: Limits) -> float:
    """Share of retried failures where the degrade threshold would pick another decision kind."""
    if lim.degrade_after == ref.degrade_after or not h.failed.any():
        return 0.0
    streak = _type_streak(h)
    retried = h.failed & ~h.last
    differs = (streak >= lim.degrade_after) != (streak >= ref.degrade_after)
    return float((differs & retried).sum() / max(1, retried.sum()))


def _type_streak(h: History) -> np.ndarray:
    """Consecutive same-class failures ending at each failed attempt (within a task)."""
    err = np.where(h.failed, h.error, -1)
    new_run = np.ones(h.n_attempts, bool)
    new_run[1:] = (err[1:] != err[:-1]) | (h.pos[1:] == 1)
    run_id = np.cumsum(new_run) - 1
    run_start = np.flatnonzero(new_run)
    return np.where(h.failed, np.arange(h.n_attempts) - run_start[run_id] + 1, 0)


# -- bootstrap ---------------------------------------------------------------------------------
def poisson_weights(n: int, replicates: int, seed: int) -> np.ndarray:
    """Poisson(1) bootstrap weights (B × n): each task counted 0, 1, 2 … times."""
    return np.random.default_rng(seed).poisson(1.0, size=(replicates, n)).astype(np.float64)


def bootstrap(results: list[PolicyReplay], model: ImputationModel, weights: np.ndarray,
              handoff: dict[str, bool], level: float = 0.95) -> None:
    """Percentile CIs of every policy's means, and of its differences to ``results[0]`` (live)."""
    alpha = (1 - level) / 2
    norm = weights.sum(1)
    norm[norm == 0] = 1.0
    boot: dict[str, dict[str, np.ndarray]] = {}
    p_b = model.p_for(weights) if any(r._ext is not None for r in results) else None
    for r in results:
        stats = {}
        for metric in METRICS:
            stats[metric] = weights @ r.per_task[metric] / norm
        if r._ext is not None and p_b is not None:
            _bootstrap_extension(r, model, weights, p_b, handoff[r.name], stats, norm)
        boot[r.name] = stats
        point = r.point
        r.estimates = {m: Estimate(point[m], *_quantiles(stats[m], alpha)) for m in METRICS}
    live = results[0]
    for r in results:
        point, ref = r.point, live.point
        r.diff_vs_live = {m: Estimate(point[m] - ref[m], *_quantiles(boot[r.name][m] - boot[live.name][m], alpha))
                          for m in METRICS}


def _bootstrap_extension(r: PolicyReplay, model: ImputationModel, weights: np.ndarray, p_b: np.ndarray,
                         handoff: bool, stats: dict[str, np.ndarray], norm: np.ndarray) -> None:
    """Swap the point imputation of extended tasks for the replicate's re-fitted one."""
    ext = r._ext
    assert ext is not None
    t, err, m = ext["task"], ext["err"], ext["m"]
    w = weights[:, t]
    success_b, extra_b = _extension(p_b[:, err], m[None, :])
    success_0, extra_0 = _extension(model.p[err], m)
    stats["success"] += (w * (success_b - success_0)).sum(1) / norm
    stats["attempts"] += (w * (extra_b - extra_0)).sum(1) / norm
    stats["tokens"] += (w * (extra_b - extra_0) * model.tokens[err]).sum(1) / norm
    stats["cost_usd"] += (w * (extra_b - extra_0) * model.cost[err]).sum(1) / norm
    stats["latency_ms"] += (w * (extra_b - extra_0) * model.latency[err]).sum(1) / norm
    stats["handoff"] -= (w * (success_b - success_0)).sum(1) / norm * float(handoff)


def _quantiles(values: np.ndarray, alpha: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [alpha, 1 - alpha])
    return float(lo), float(hi)


def replay(h: History, live: RetryPolicy | Rule, candidates: dict[str, RetryPolicy | Rule], *,
           replicates: int = 400,
           seed: int = 0, level: float = 0.95) -> list[PolicyReplay]:
    """Replay ``h`` under live (first) and each candidate, with paired bootstrap CIs."""
    model = fit_imputation(h)
    ref = Limits.of(live, h.phases, name="live")
    lims = [ref] + [Limits.of(p, h.phases, name=name) for name, p in candidates.items()]
    results = [replay_policy(h, lim, ref, model) for lim in lims]
    if h.n_tasks:
        bootstrap(results, model, poisson_weights(h.n_tasks, replicates, seed),
                  {lim.name: lim.handoff for lim in lims}, level)
    return results
