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
**imputed only where the log shows such retries**: logged retries of the same agent and
failure class, at least as deep (failures of that class already in the task) and at
least as late (attempt position) — tasks that got that far are the hard ones. Where it
holds fewer than :data:`MIN_SUPPORT_TRIALS`, the retries are **not supported**: no rate is
borrowed from another class or the whole log; the task counts as failing every attempt
the candidate's limits give it (``per_task``), and :attr:`PolicyReplay.optimistic` lets the
first of them succeed, so the report can give bounds and say when they could change its
verdict (the "restrict to the support, or bound" answers of Sachdeva, Su & Joachims 2020
and Khan, Saveski & Ugander 2023). Stop exploration (``shadow.explore_stops``) is what
supplies the evidence: a retry the live rules would have refused, logged with its
propensity, cuts every policy that stops there and informs those that go on. Changes of
*how* to retry (e.g. an earlier degrade threshold) keep the logged continuation; the
share of failures where the candidate would have picked another kind of decision is
reported as ``decision_divergence``. Use :mod:`off_policy` (logged propensities) for those.

Limits are compared *relative to the live policy* (a candidate stops where one of its
limits binds and the live policy's same limit did not), so the live policy replayed on
its own log gives the log back exactly, and rules replay does not model (loops, known-bad
inputs, circuit breakers) act on the candidate as they acted on the live policy.

Everything runs on task-level numpy arrays; the CIs are a paired Poisson bootstrap over
tasks (the same resamples for every policy, so differences against live get CIs too),
each replicate computing exactly what the point computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from retrylens.sdk.core.policy import RetryPolicy
from retrylens.sdk.core.rule_chain import Rule

from .history import ERRORS, STOP_CODES, History
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
class Bounds:
    """Where a difference lies if the unsupported retries all fail (one end) or the first
    succeeds (the other): the two points and the outer ends of their 95 % CIs."""

    point_lo: float
    point_hi: float
    lo: float
    hi: float

    def as_dict(self) -> dict[str, float]:
        return {"point_lo": self.point_lo, "point_hi": self.point_hi, "lo": self.lo, "hi": self.hi}


@dataclass
class PolicyReplay:
    """One policy's replay: per-task expected metrics and how much of it the log supports.

    ``per_task`` counts every retry the log cannot support as failing (the candidate's
    limits decide how many it would make); ``optimistic`` lets the first of them succeed.
    Where no task needs unsupported retries the two are the same.
    """

    name: str
    per_task: dict[str, np.ndarray]
    truncated: np.ndarray
    extended: np.ndarray
    decision_divergence: float
    unsupported: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    optimistic: dict[str, np.ndarray] | None = None
    gaps: list[dict[str, object]] = field(default_factory=list)
    estimates: dict[str, Estimate] = field(default_factory=dict)
    diff_vs_live: dict[str, Estimate] = field(default_factory=dict)
    bounds: dict[str, Bounds] = field(default_factory=dict)
    diff_optimistic: dict[str, Estimate] = field(default_factory=dict)
    #: per agent (histories of 2 to :data:`MAX_AGENTS_JUDGED` agents): the same judged on its tasks alone
    by_agent: dict[str, Judged] = field(default_factory=dict)
    _ext: dict[str, np.ndarray] | None = None

    @property
    def point(self) -> dict[str, float]:
        return {m: float(v.mean()) if len(v) else float("nan") for m, v in self.per_task.items()}

    @property
    def supported_share(self) -> float:
        """Share of tasks whose estimate rests only on what the log shows."""
        return 1.0 - float(self.unsupported.mean()) if len(self.unsupported) else 1.0


#: Logged retries a situation needs before replay imputes from them (fewer: "not supported").
MIN_SUPPORT_TRIALS = 10


@dataclass
class ImputationModel:
    """What one more retry gives, learnt only from logged retries of the same situation.

    A situation is (agent, failure class, how many times the task had already failed
    that way, attempt position): a retry the live policy never made there — past its cap
    for the class, past its budget — has no evidence in the log, and a class never
    retried never borrows another class's rate or the global one. The evidence for an
    extension that starts at depth ``d`` and position ``k`` is every logged retry of the
    same agent and class at depth ≥ ``d`` and position ≥ ``k`` (tasks that got that far are
    the hard ones); the rate is assumed constant over the further attempts. Point and
    bootstrap replicates use the same formula (:meth:`rates`), so an interval holds its point.
    """

    ev_task: np.ndarray        # evidence rows: failures the log retried
    ev_group: np.ndarray       # agent code × len(ERRORS) + class
    ev_depth: np.ndarray       # failures of that class so far in the task (itself included)
    ev_pos: np.ndarray         # attempt position
    ev_ok: np.ndarray          # did the retry after the row succeed
    n_tasks: int
    task_agent: np.ndarray     # per task: agent code
    tokens: np.ndarray         # per group: mean tokens of a retry (the agent's mean attempt when none)
    cost: np.ndarray
    latency: np.ndarray        # retry latency + the wait before it
    min_trials: int = MIN_SUPPORT_TRIALS
    agent_names: tuple[str, ...] = ()       # per agent code

    def group_of(self, task: np.ndarray, err: np.ndarray) -> np.ndarray:
        return self.task_agent[task] * len(ERRORS) + err

    def _masks(self, keys: np.ndarray) -> list[np.ndarray]:
        """Per key (a row of ``group, depth, pos``): the evidence rows behind it."""
        return [(self.ev_group == group) & (self.ev_depth >= depth) & (self.ev_pos >= pos)
                for group, depth, pos in keys]

    def trials(self, keys: np.ndarray) -> np.ndarray:
        """Logged retries behind each key (its support)."""
        return np.array([float(m.sum()) for m in self._masks(keys)])

    def rates(self, keys: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Success of a retry per key, the share of its logged retries that succeeded; per
        replicate (B × keys) under bootstrap ``weights`` (B × tasks), the same share over
        the replicate's counts of those tasks.

        No prior is mixed in: a rate is only used where the log holds enough retries, and a
        class whose retries never succeed must read 0, not half a success. A replicate that
        happens to draw none of a key's tasks keeps the point's rate.
        """
        masks = self._masks(keys)
        t = np.array([float(m.sum()) for m in masks])
        s = np.array([float(self.ev_ok[m].sum()) for m in masks])
        point = np.divide(s, t, out=np.zeros(len(keys)), where=t > 0)
        if weights is None:
            return point
        t_b = np.stack([weights[:, self.ev_task[m]].sum(1) for m in masks], axis=1) if masks else \
            np.zeros((len(weights), 0))
        s_b = np.stack([weights[:, self.ev_task[m & self.ev_ok]].sum(1) for m in masks], axis=1) if masks else \
            np.zeros((len(weights), 0))
        return np.divide(s_b, t_b, out=np.broadcast_to(point, t_b.shape).copy(), where=t_b > 0)


def fit_imputation(h: History, *, min_trials: int = MIN_SUPPORT_TRIALS) -> ImputationModel:
    n_err = len(ERRORS)
    d = h.derived()
    retried = h.failed & ~h.last
    nxt = np.minimum(np.arange(h.n_attempts) + 1, max(h.n_attempts - 1, 0))
    next_ok = np.where(retried, ~h.failed[nxt], False) if h.n_attempts else retried
    agent_codes, agents = pd.factorize(pd.Series(h.agents, dtype=object)) if h.n_tasks else (np.zeros(0, np.int64), [])
    task_agent = np.asarray(agent_codes, dtype=np.int64)
    n_groups = max(1, len(agents)) * n_err
    err = np.where(h.failed, h.error, 0)
    rows = np.flatnonzero(retried)
    group = task_agent[h.task] * n_err + err if h.n_attempts else np.zeros(0, np.int64)
    following = rows + 1
    n_ret = np.bincount(group[rows], minlength=n_groups).astype(np.float64)
    row_agent = task_agent[h.task]
    n_att = np.bincount(row_agent, minlength=max(1, len(agents))).astype(np.float64)

    def per_group(values: np.ndarray, attempt_values: np.ndarray) -> np.ndarray:
        sums = np.bincount(group[rows], weights=values, minlength=n_groups)
        agent_mean = np.bincount(row_agent, weights=attempt_values, minlength=len(n_att)) / np.maximum(n_att, 1)
        fallback = np.repeat(agent_mean, n_err)
        return np.where(n_ret > 0, sums / np.maximum(n_ret, 1), fallback)

    tokens = h.tokens.astype(np.float64)
    return ImputationModel(
        ev_task=h.task[rows], ev_group=group[rows], ev_depth=d["class_count"][rows], ev_pos=h.pos[rows],
        ev_ok=next_ok[rows], n_tasks=h.n_tasks, task_agent=task_agent,
        tokens=per_group(tokens[following], tokens), cost=per_group(h.cost[following], h.cost),
        latency=per_group(h.latency[following] + h.backoff[rows], h.latency), min_trials=min_trials,
        agent_names=tuple(str(a) for a in agents),
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
    # where exploration retried although the live rules stopped, every policy that stops
    # there too is cut (its stop is observed); one that would go on keeps the continuation
    explored_stop = h.failed & ~last & np.isin(h.greedy, STOP_CODES) & ~np.isin(h.decision, STOP_CODES)
    stop_here = h.failed & ~last & (stricter | (explored_stop & ~(sl.any(0) & ~sc.any(0))))
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
    result = PolicyReplay(lim.name, per_task, truncated, extended, _divergence(h, lim, ref),
                          unsupported=np.zeros(n, bool))
    if ext_row.any():
        result._ext = _extend(h, lim, model, ext_row, per_task)
        sup = result._ext["supported"]
        result.unsupported[result._ext["task"][~sup]] = True
        if not sup.all():
            result.optimistic = _optimistic(per_task, result._ext, model, lim.handoff)
        result.gaps = _gaps(h, model, result._ext)
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
    """The attempts the live policy never tried; updates ``per_task`` in place.

    Supported rows (enough logged retries of their situation) get expected values from
    the model; the others count all ``m`` attempts the candidate would make as failing.
    """
    d = h.derived()
    idx = np.flatnonzero(rows)
    task, err = h.task[idx], h.error[idx]
    group = model.group_of(task, err)
    keys = np.stack([group, d["class_count"][idx], h.pos[idx]], axis=1)
    uniq, inverse = _unique_rows(keys)
    supported_key = model.trials(uniq) >= model.min_trials
    rates = np.where(supported_key, model.rates(uniq), np.nan)
    phase_cap = lim.phase_caps[h.phase[idx]] if len(lim.phase_caps) else np.full(len(idx), np.inf)
    tok = np.maximum(model.tokens[group], 1.0)
    cost = np.maximum(model.cost[group], 1e-12)
    m = np.minimum.reduce([
        lim.caps[err] - d["class_count"][idx] + 1,
        lim.attempt_limit(h.steps[idx] if h.steps is not None else np.zeros(len(idx))) - h.pos[idx],
        phase_cap - d["phase_count"][idx],
        np.ceil((lim.max_tokens - d["tok_cum"][idx]) / tok),
        np.ceil((lim.max_cost - d["cost_cum"][idx]) / cost),
        np.full(len(idx), float(MAX_EXTRA)),
    ])
    m = np.clip(m, 1, MAX_EXTRA)
    ext = {"task": task, "err": err, "group": group, "m": m, "key": inverse, "keys": uniq,
           "supported": supported_key[inverse], "rates": rates}
    _apply_extension(per_task, ext, model, rates[inverse], lim.handoff)
    return ext


def _apply_extension(per_task: dict[str, np.ndarray], ext: dict[str, np.ndarray], model: ImputationModel,
                     p: np.ndarray, handoff: bool) -> None:
    """Expected values of supported rows; unsupported ones (``p`` NaN) make ``m`` failing attempts."""
    t, group, m = ext["task"], ext["group"], ext["m"]
    sup = ext["supported"]
    success, extra = _extension(np.where(sup, p, 0.0), m)
    success = np.where(sup, success, per_task["success"][t])
    extra = np.where(sup, extra, m)
    per_task["success"][t] = success
    per_task["attempts"][t] += extra
    per_task["tokens"][t] += extra * model.tokens[group]
    per_task["cost_usd"][t] += extra * model.cost[group]
    per_task["latency_ms"][t] += extra * model.latency[group]
    per_task["handoff"][t] = (1.0 - success) * float(handoff)


def _optimistic(per_task: dict[str, np.ndarray], ext: dict[str, np.ndarray], model: ImputationModel,
                handoff: bool) -> dict[str, np.ndarray]:
    """``per_task`` with the first unsupported retry of each task succeeding (one attempt, not ``m``)."""
    out = {k: v.copy() for k, v in per_task.items()}
    un = ~ext["supported"]
    t, group, m = ext["task"][un], ext["group"][un], ext["m"][un]
    out["success"][t] = 1.0
    fewer = m - 1.0
    out["attempts"][t] -= fewer
    out["tokens"][t] -= fewer * model.tokens[group]
    out["cost_usd"][t] -= fewer * model.cost[group]
    out["latency_ms"][t] -= fewer * model.latency[group]
    out["handoff"][t] = 0.0
    return out


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=0, return_inverse=True)`` for small non-negative int columns, on
    one combined key (a 1-D unique is many times faster than the row-wise one)."""
    if len(rows) == 0:
        return rows.reshape(0, rows.shape[1]), np.zeros(0, np.int64)
    widths = rows.max(0).astype(np.int64) + 1
    key = np.zeros(len(rows), np.int64)
    for col, width in zip(rows.T, widths, strict=True):
        key = key * width + col
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return rows[first], np.asarray(inverse).reshape(-1)


def _gaps(h: History, model: ImputationModel, ext: dict[str, np.ndarray]) -> list[dict[str, object]]:
    """Each situation the candidate needs retries in and the log has too few of: agent, class,
    how many failures of that class the task had, tasks that reached it, logged retries there."""
    un = ~ext["supported"]
    if not un.any():
        return []
    n_err = len(ERRORS)
    keys = ext["keys"][ext["key"][un]]
    pairs, inverse = _unique_rows(keys[:, :2])
    tasks = _unique_rows(np.stack([inverse, ext["task"][un]], axis=1))[0][:, 0]
    n_tasks = np.bincount(tasks, minlength=len(pairs))
    retries = model.trials(np.column_stack([pairs, np.zeros(len(pairs), np.int64)]))
    gaps = [{"agent": model.agent_names[int(group) // n_err], "error_type": ERRORS[int(group) % n_err].value,
             "failures_of_class": int(depth), "tasks": int(n), "logged_retries": int(r)}
            for (group, depth), n, r in zip(pairs, n_tasks, retries, strict=True)]
    return sorted(gaps, key=lambda g: -int(g["tasks"]))  # type: ignore[call-overload]


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


#: Agents judged one by one (each from its own tasks and evidence) when a history holds 2 to this many.
MAX_AGENTS_JUDGED = 12


@dataclass
class Judged:
    """One policy's estimates on a set of tasks: means, differences to live and bounds, with CIs."""

    estimates: dict[str, Estimate]
    diff_vs_live: dict[str, Estimate]
    diff_optimistic: dict[str, Estimate]
    bounds: dict[str, Bounds]
    tasks: int
    unsupported_share: float
    imputed_share: float


def bootstrap(results: list[PolicyReplay], model: ImputationModel, weights: np.ndarray,
              handoff: dict[str, bool], level: float = 0.95) -> None:
    """Percentile CIs of every policy's means, and of its differences to ``results[0]`` (live).

    Each replicate computes what the point computes (the same imputation formula on the
    replicate's weights), and an interval is widened to its point in the rare skewed case
    where the percentiles leave it just outside. With 2 to :data:`MAX_AGENTS_JUDGED` agents,
    each agent is also judged on its own tasks (:attr:`PolicyReplay.by_agent`): the same
    replicates with the other agents' tasks weighted 0, so its extensions rest on its own
    logged retries only (the imputation is keyed by agent) and its interval is its own.
    """
    alpha = (1 - level) / 2
    for r, judged in zip(results, _judge(results, model, weights, handoff, alpha, None), strict=True):
        r.estimates, r.diff_vs_live = judged.estimates, judged.diff_vs_live
        r.diff_optimistic, r.bounds = judged.diff_optimistic, judged.bounds
    agents = model.agent_names
    if 2 <= len(agents) <= MAX_AGENTS_JUDGED:
        for code, agent in enumerate(agents):
            mask = model.task_agent == code
            for r, judged in zip(results, _judge(results, model, weights, handoff, alpha, mask), strict=True):
                r.by_agent[agent] = judged


def _judge(results: list[PolicyReplay], model: ImputationModel, weights: np.ndarray, handoff: dict[str, bool],
           alpha: float, mask: np.ndarray | None) -> list[Judged]:
    """Every policy judged on the tasks of ``mask`` (all tasks when ``None``)."""
    w = weights if mask is None else weights * mask
    norm = w.sum(1)
    norm[norm == 0] = 1.0
    sel = np.ones(model.n_tasks, bool) if mask is None else mask

    def mean(values: np.ndarray) -> float:
        return float(values[sel].mean()) if sel.any() else float("nan")

    boot: dict[str, dict[str, np.ndarray]] = {}
    opt_boot: dict[str, dict[str, np.ndarray]] = {}
    for r in results:
        adjust = {m: np.zeros(len(w)) for m in METRICS}
        if r._ext is not None and r._ext["supported"].any():
            _bootstrap_extension(r, model, w, handoff[r.name], adjust, norm)
        optimistic = r.optimistic if r.optimistic is not None else r.per_task
        boot[r.name] = {m: w @ r.per_task[m] / norm + adjust[m] for m in METRICS}
        opt_boot[r.name] = {m: w @ optimistic[m] / norm + adjust[m] for m in METRICS}
    live = results[0]
    ref = {m: mean(live.per_task[m]) for m in METRICS}
    out = []
    for r in results:
        point = {m: mean(r.per_task[m]) for m in METRICS}
        opt_point = {m: mean(v) for m, v in (r.optimistic or r.per_task).items()}
        diff = {m: _held(point[m] - ref[m], boot[r.name][m] - boot[live.name][m], alpha) for m in METRICS}
        opt = {m: _held(opt_point[m] - ref[m], opt_boot[r.name][m] - boot[live.name][m], alpha) for m in METRICS}
        bounds = {m: Bounds(min(diff[m].value, opt[m].value), max(diff[m].value, opt[m].value),
                            min(diff[m].lo, opt[m].lo), max(diff[m].hi, opt[m].hi)) for m in METRICS}
        unsupported = r.unsupported[sel] if len(r.unsupported) else np.zeros(0, bool)
        out.append(Judged(
            estimates={m: _held(point[m], boot[r.name][m], alpha) for m in METRICS}, diff_vs_live=diff,
            diff_optimistic=opt, bounds=bounds, tasks=int(sel.sum()),
            unsupported_share=float(unsupported.mean()) if len(unsupported) else 0.0,
            imputed_share=float(r.extended[sel].mean()) if sel.any() else 0.0))
    return out


def _held(point: float, replicates: np.ndarray, alpha: float) -> Estimate:
    lo, hi = _quantiles(replicates, alpha)
    return Estimate(point, min(lo, point), max(hi, point))


def _bootstrap_extension(r: PolicyReplay, model: ImputationModel, weights: np.ndarray, handoff: bool,
                         adjust: dict[str, np.ndarray], norm: np.ndarray) -> None:
    """What re-fitting the imputation in each replicate changes for the supported extended tasks."""
    ext = r._ext
    assert ext is not None
    sup = ext["supported"]
    t, group, m, key = ext["task"][sup], ext["group"][sup], ext["m"][sup], ext["key"][sup]
    used = np.unique(key)
    p_b = np.zeros((len(weights), len(ext["keys"])))
    p_b[:, used] = model.rates(ext["keys"][used], weights)
    w = weights[:, t]
    success_b, extra_b = _extension(p_b[:, key], m[None, :])
    success_0, extra_0 = _extension(ext["rates"][key], m)
    adjust["success"] += (w * (success_b - success_0)).sum(1) / norm
    adjust["attempts"] += (w * (extra_b - extra_0)).sum(1) / norm
    adjust["tokens"] += (w * (extra_b - extra_0) * model.tokens[group]).sum(1) / norm
    adjust["cost_usd"] += (w * (extra_b - extra_0) * model.cost[group]).sum(1) / norm
    adjust["latency_ms"] += (w * (extra_b - extra_0) * model.latency[group]).sum(1) / norm
    adjust["handoff"] -= (w * (success_b - success_0)).sum(1) / norm * float(handoff)


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
