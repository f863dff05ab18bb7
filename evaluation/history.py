"""Logged attempt histories as task-level arrays: what replay and off-policy estimators read.

One row per *finished attempt* (failed or succeeded), sorted by task then attempt, with
the decision that followed a failure joined on (task, attempt). Tasks that have not
finished yet are left out: their outcome is unknown. The same :class:`History` is built
from the store (one SQL query, values bound) or from in-memory events (tests, the
ground-truth simulation), so both paths run the same estimators.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from retrylens.schemas import TRANSIENT_ERROR_TYPES, Decision, ErrorType, RetryEvent
from retrylens.store import EventStore
from retrylens.store.sql import query_df

ERRORS: tuple[ErrorType, ...] = tuple(ErrorType)
ERROR_CODE: dict[str, int] = {e.value: i for i, e in enumerate(ERRORS)}
TRANSIENT_MASK = np.array([e in TRANSIENT_ERROR_TYPES for e in ERRORS])
DECISIONS: tuple[Decision, ...] = tuple(Decision)
DECISION_CODE: dict[str, int] = {d.value: i for i, d in enumerate(DECISIONS)}
STOP_CODES = np.array([DECISION_CODE[d] for d in ("give_up", "handoff_human", "cancel_chain", "none")])
NO_ERROR = -1

COLUMNS = ("project", "agent_name", "task_id", "attempt", "phase", "kind", "error_type", "retryable",
           "decision", "decision_reason", "backoff_ms", "shadow_decision", "propensity", "tokens_in",
           "tokens_out", "cost_usd", "latency_ms", "outcome", "policy_id", "policy_version")

_HISTORY_SQL = """
SELECT project, agent_name, task_id, attempt, phase, kind, error_type, retryable, decision,
       decision_reason, backoff_ms, shadow_decision, propensity, tokens_in, tokens_out, cost_usd,
       latency_ms, outcome, policy_id, policy_version
FROM [[db]].events FINAL
WHERE kind IN ('attempt_failed', 'attempt_succeeded', 'decision', 'task_finished')
  AND ({project:String} = '' OR project = {project:String})
  AND ({agent:String} = '' OR agent_name = {agent:String})
  AND ts >= {since:DateTime64(3)}
ORDER BY project, task_id, attempt, kind
"""

_EXPLORED = re.compile(r"instead of (\w+)")
_STEPS = re.compile(r"after (\d+) steps")


def read_frame(store: EventStore, *, project: str | None = None, agent: str | None = None,
               since: datetime | None = None) -> pd.DataFrame:
    """The events replay needs, read exactly (``FINAL``) from the store."""
    params = {"project": project or "", "agent": agent or "",
              "since": since or datetime(1970, 1, 1)}
    return query_df(store.client, store.sql(_HISTORY_SQL), params)


def frame_from_events(events: Iterable[RetryEvent]) -> pd.DataFrame:
    """The same frame as :func:`read_frame`, from events in memory."""
    wanted = {"attempt_failed", "attempt_succeeded", "decision", "task_finished"}
    rows = []
    for e in events:
        kind = e.kind.value if hasattr(e.kind, "value") else str(e.kind)
        if kind not in wanted:
            continue
        rows.append((e.project, e.agent.name, e.task_id, e.attempt, e.phase, kind,
                     e.error_type.value if e.error_type else "", e.retryable,
                     e.decision.value if e.decision else "none", e.decision_reason, e.backoff_ms,
                     e.shadow_decision.value if e.shadow_decision else "", e.propensity, e.tokens_in,
                     e.tokens_out, e.cost_usd, e.latency_ms, e.outcome.value if e.outcome else "",
                     e.policy_id, e.policy_version))
    return pd.DataFrame(rows, columns=list(COLUMNS))


@dataclass
class History:
    """Finished tasks and their attempts as aligned numpy arrays (attempt rows sorted by task)."""

    task_ids: np.ndarray          # per task
    agents: np.ndarray            # per task
    succeeded: np.ndarray         # per task, bool
    handed_off: np.ndarray        # per task, bool
    starts: np.ndarray            # per task: index of its first attempt row
    counts: np.ndarray            # per task: attempts
    task: np.ndarray              # per attempt: task index
    pos: np.ndarray               # per attempt: 1-based position within the task
    failed: np.ndarray            # per attempt, bool
    error: np.ndarray             # per attempt: ERRORS index or NO_ERROR
    retryable: np.ndarray         # per attempt: logged retryable flag (failures)
    phase: np.ndarray             # per attempt: phase code
    phases: tuple[str, ...]
    tokens: np.ndarray
    cost: np.ndarray
    latency: np.ndarray
    backoff: np.ndarray           # per attempt: wait after it (failures that were retried)
    decision: np.ndarray          # per attempt: DECISIONS index (failures), -1 otherwise
    greedy: np.ndarray            # per attempt: the live rules' decision before exploration
    shadow: np.ndarray            # per attempt: shadow candidate's decision, -1 when none
    propensity: np.ndarray        # per attempt: probability of the logged decision (1 when not logged)
    policies: tuple[str, ...]     # policy id@version seen in the history
    #: per attempt: steps the task had completed at that failure, where the log says so (a
    #: budget stop's reason: "... after N steps"); 0 elsewhere — events do not carry the
    #: step count, so replay credits per-step retries only where the log names them
    steps: np.ndarray | None = None
    #: per task: the ``policy_id@policy_version`` its first attempt ran under
    task_policies: np.ndarray | None = None
    _cache: dict[str, np.ndarray] | None = None

    @property
    def n_tasks(self) -> int:
        return len(self.task_ids)

    @property
    def n_attempts(self) -> int:
        return len(self.task)

    @property
    def last(self) -> np.ndarray:
        """Per attempt: is it the task's last logged attempt."""
        return self.pos == self.counts[self.task]

    def derived(self) -> dict[str, np.ndarray]:
        """Policy-independent running counts, computed once and shared by every replay."""
        if self._cache is None:
            self._cache = _derive(self)
        return self._cache


def _code_cumcount(codes: np.ndarray, mask: np.ndarray, task: np.ndarray) -> np.ndarray:
    """Per row where ``mask``: how many rows of its task so far (itself included) share its code."""
    n = len(codes)
    if n == 0:
        return np.zeros(0, np.int64)
    width = int(codes.max(initial=0)) + 2
    key = task * width + np.where(mask, codes + 1, 0)
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    new = np.ones(n, bool)
    new[1:] = sorted_key[1:] != sorted_key[:-1]
    group_start = np.maximum.accumulate(np.where(new, np.arange(n), 0))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - group_start + 1
    return np.where(mask, rank, 0)


def _derive(h: History) -> dict[str, np.ndarray]:
    failed = h.failed
    base = np.repeat(h.starts, h.counts)
    class_count = _code_cumcount(h.error, failed, h.task)
    phase_count = _code_cumcount(h.phase, failed, h.task)
    tok_cum = _segment_cumsum(h.tokens.astype(np.float64), base)
    cost_cum = _segment_cumsum(h.cost, base)
    lat_cum = _segment_cumsum(h.latency.astype(np.float64), base)
    fail_cum = _segment_cumsum(failed.astype(np.float64), base)
    return {"class_count": class_count, "phase_count": phase_count, "tok_cum": tok_cum,
            "cost_cum": cost_cum, "lat_cum": lat_cum, "fail_cum": fail_cum, "base": base}


def _segment_cumsum(values: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Cumulative sums restarting at each task (``base`` = the task's first row per row)."""
    total = np.cumsum(values)
    before = np.concatenate(([0.0], total))[base]
    return total - before


def build_history(frame: pd.DataFrame) -> History:
    """Finished tasks of ``frame`` (see :data:`COLUMNS`) as a :class:`History`."""
    if frame.empty:
        return _empty()
    frame = frame.copy()
    frame["key"] = frame["project"].astype(str) + "\x00" + frame["task_id"].astype(str)
    # A task's end: its task_finished event, or the compact first-try success that carries
    # the outcome itself (see retrylens.schemas.event).
    ended = (frame["kind"] == "task_finished") | (frame["outcome"].fillna("").astype(str) != "")
    finished = frame[ended].drop_duplicates("key", keep="last")
    attempts = frame[frame["kind"].isin(["attempt_failed", "attempt_succeeded"])]
    attempts = attempts[attempts["key"].isin(finished["key"])]
    if attempts.empty:
        return _empty()
    decisions = frame[frame["kind"] == "decision"].drop_duplicates(["key", "attempt"], keep="last")
    decisions = decisions[["key", "attempt", "decision", "decision_reason", "backoff_ms", "shadow_decision",
                           "propensity"]]
    attempts = attempts.drop(columns=["decision", "decision_reason", "backoff_ms", "shadow_decision",
                                      "propensity"])
    att = attempts.merge(decisions, on=["key", "attempt"], how="left")
    att = att.sort_values(["key", "attempt"], kind="stable").reset_index(drop=True)
    fin = finished.set_index("key").loc[pd.unique(att["key"])]
    task_codes, task_keys = pd.factorize(att["key"], sort=False)
    counts = np.bincount(task_codes, minlength=len(task_keys))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    pos = np.arange(len(att)) - starts[task_codes] + 1
    failed = (att["kind"] == "attempt_failed").to_numpy()
    error = att["error_type"].fillna("").map(ERROR_CODE).fillna(NO_ERROR).astype(int).to_numpy()
    error = np.where(failed, np.where(error < 0, ERROR_CODE["unknown"], error), NO_ERROR)
    phase_codes, phases = pd.factorize(att["phase"].fillna("").astype(str))
    decision = att["decision"].fillna("none").map(DECISION_CODE).fillna(DECISION_CODE["none"]).astype(int)
    decision = np.where(failed, decision.to_numpy(), -1)
    shadow = att["shadow_decision"].fillna("").map(DECISION_CODE).fillna(-1).astype(int).to_numpy()
    reasons = att["decision_reason"].fillna("").astype(str)
    explored = reasons.str.extract(_EXPLORED, expand=False).map(DECISION_CODE)
    steps = pd.to_numeric(reasons.str.extract(_STEPS, expand=False), errors="coerce").fillna(0)
    greedy = np.where(explored.notna(), explored.fillna(-1).astype(int), decision)
    propensity = pd.to_numeric(att["propensity"], errors="coerce").fillna(1.0).to_numpy(dtype=np.float64)
    retried = failed & ~np.isin(decision, STOP_CODES)
    backoff = np.where(retried, pd.to_numeric(att["backoff_ms"]).fillna(0).to_numpy(dtype=np.float64), 0.0)
    retryable = att["retryable"].astype("boolean").fillna(True).to_numpy(dtype=bool)
    outcome = fin["outcome"].astype(str).to_numpy()
    named = (att["policy_id"].astype(str) + "@" + att["policy_version"].astype(str)).to_numpy()
    policies = tuple(sorted(set(named)))
    return History(
        task_ids=fin["task_id"].astype(str).to_numpy(), agents=fin["agent_name"].astype(str).to_numpy(),
        succeeded=outcome == "succeeded", handed_off=outcome == "handed_off",
        starts=starts.astype(np.int64), counts=counts.astype(np.int64), task=task_codes.astype(np.int64),
        pos=pos.astype(np.int64), failed=failed, error=error.astype(np.int64), retryable=retryable,
        phase=phase_codes.astype(np.int64), phases=tuple(phases),
        tokens=(att["tokens_in"].astype(np.int64) + att["tokens_out"].astype(np.int64)).to_numpy(),
        cost=att["cost_usd"].astype(np.float64).to_numpy(), latency=att["latency_ms"].astype(np.float64).to_numpy(),
        backoff=backoff, decision=decision.astype(np.int64), greedy=np.where(failed, greedy, -1).astype(np.int64),
        shadow=np.where(failed, shadow, -1).astype(np.int64), propensity=np.where(failed, propensity, 1.0),
        policies=policies, steps=np.where(failed, steps.to_numpy(dtype=np.float64), 0.0),
        task_policies=named[starts],
    )


def _empty() -> History:
    i, f, b = np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, bool)
    return History(task_ids=np.zeros(0, object), agents=np.zeros(0, object), succeeded=b, handed_off=b,
                   starts=i, counts=i, task=i, pos=i, failed=b, error=i, retryable=b, phase=i, phases=(),
                   tokens=i, cost=f, latency=f, backoff=f, decision=i, greedy=i, shadow=i, propensity=f,
                   policies=())


def observed_metrics(h: History) -> dict[str, np.ndarray]:
    """Per-task metrics as logged (what a policy replayed on its own log must give back)."""
    return {
        "success": h.succeeded.astype(np.float64),
        "attempts": h.counts.astype(np.float64),
        "tokens": _task_sum(h, h.tokens.astype(np.float64)),
        "cost_usd": _task_sum(h, h.cost),
        "latency_ms": _task_sum(h, h.latency + h.backoff),
        "handoff": h.handed_off.astype(np.float64),
    }


def _task_sum(h: History, values: np.ndarray) -> np.ndarray:
    return np.bincount(h.task, weights=values, minlength=h.n_tasks)


def describe(h: History) -> Mapping[str, Any]:
    return {"tasks": h.n_tasks, "attempts": h.n_attempts, "failures": int(h.failed.sum()),
            "explored_decisions": int(((h.greedy != h.decision) & h.failed).sum()),
            "shadow_decisions": int((h.shadow >= 0).sum()), "policies": list(h.policies)}
