"""Stored pre-checks joined to how their tasks ended: the risk model and its advice, judged.

Every pre-check the API answers is a row of ``prechecks`` (migration 0011). Joined to the
task's events by ``(project, task_id)`` it says what happened after the advice: the
outcome (failed or handed off counts as the model's positive class, as in training), what
the task spent, and whether the agent applied the advice (the SDK writes the applied advice
on the task's ``task_started`` event as ``risk … (version); …``, so this is read from what
the agent did). From those rows:

- :func:`recent_prechecks` — the latest pre-checks with their outcomes;
- :func:`calibration_over_time` — per time bucket (sized to the data: an hour to a week):
  how many were judged, mean predicted risk vs observed failure rate (the calibration gap),
  ROC-AUC and Brier score on real outcomes, so drift shows as a trend;
- :func:`advice_vs_outcome` — per advice kind, followed vs not: tasks, failure and hand-off
  rates, cost per task;
- :func:`precheck_measures` — the window figures an alert rule reads
  (``calibration_gap``, ``calibration_error``, ``precheck_auc``, ``precheck_brier``).

``calibration_gap`` (mean risk vs observed rate) misses a swap of *which* inputs are risky:
the mean risk stays equal to the observed rate. ``calibration_error`` is the gap per risk
segment (:func:`segment_calibration_error`: five equal-count segments by predicted risk,
weighted by size), so after a swap the high-risk segment fails rarely and the low-risk one
often, and it rises at once.

A pre-check whose task has not finished (or whose agent sent no task id) has no outcome
and is left out of every judgement, never counted as a success. A judged pre-check belongs
to the time its task started, not to when the API answered: the two are moments apart in a
deployment, but the demo pre-checks a simulated fleet in one burst whose tasks ran over hours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from retrylens.store import EventStore
from retrylens.store.sql import query_rows

#: Columns of ``prechecks`` in table order (``store.schema.TABLES['prechecks']``).
COLUMNS = ("precheck_id", "ts", "project", "agent", "task_id", "input_fingerprint", "risk", "model_version",
           "known_bad", "advice", "max_attempts", "explanation")
#: What a pre-check's figures for alert rules are called (:mod:`.alerts` lists them as rule metrics).
PRECHECK_MEASURES = ("calibration_gap", "calibration_error", "precheck_auc", "precheck_brier")
#: Risk segments of ``calibration_error`` (equal-count, by predicted risk).
CALIBRATION_SEGMENTS = 5
FAILED_OUTCOMES = ("failed", "handed_off")
APPLIED_PREFIX = "risk "  # how the SDK's applied advice starts on task_started (sdk/core/preflight.apply_advice)
MAX_ROWS = 200_000


@dataclass(frozen=True, kw_only=True)
class PrecheckRow:
    """One answered pre-check, as the API stores it."""

    precheck_id: str
    ts: datetime
    project: str
    agent: str
    task_id: str
    input_fingerprint: str
    risk: float
    model_version: str
    known_bad: bool
    advice: tuple[str, ...]
    max_attempts: int = 0
    explanation: dict[str, Any] | None = None

    def values(self) -> list[Any]:
        return [self.precheck_id, self.ts, self.project, self.agent, self.task_id, self.input_fingerprint,
                float(self.risk), self.model_version, bool(self.known_bad), list(self.advice),
                int(self.max_attempts), orjson.dumps(self.explanation or {}).decode()]


def write_prechecks(store: EventStore, rows: Sequence[PrecheckRow]) -> None:
    """Insert ``rows`` in one block (a repeated block collapses: the table replaces by id)."""
    if rows:
        store.client.insert(f"{store.database}.prechecks", [r.values() for r in rows], column_names=list(COLUMNS))


#: A pre-check's task, judged: its outcome, the advice note on ``task_started``, what it cost and
#: when it started (its first event: the moment its outcome belongs to).
_TASKS = (
    "SELECT project, task_id,"
    "   argMaxIf(toString(outcome), ts, outcome != '') AS outcome,"
    "   anyIf(decision_reason, kind = 'task_started') AS note,"
    "   sumIf(cost_usd, kind IN ('attempt_failed', 'attempt_succeeded')) AS cost_usd, min(ts) AS task_at"
    "   FROM [[db]].events FINAL"
    "   WHERE ({project:String} = '' OR project = {project:String})"
    "   AND task_id IN (SELECT task_id FROM [[db]].prechecks"
    "     WHERE ({project:String} = '' OR project = {project:String}) AND task_id != '' {window})"
    "   GROUP BY project, task_id"
)
#: Pre-checks of a window: answered in it, or whose task ran in it (a simulated fleet pre-checked
#: in one burst, as the demo does, has its answers at one instant and its tasks over hours).
_WINDOW = (
    " AND ((ts >= {start:DateTime64(3)} AND ts < {end:DateTime64(3)})"
    "   OR task_id IN (SELECT task_id FROM [[db]].events"
    "     WHERE ({project:String} = '' OR project = {project:String}) AND task_id != ''"
    "     AND ts >= {start:DateTime64(3)} AND ts < {end:DateTime64(3)}))"
)
_JOINED = (
    "SELECT p.precheck_id AS precheck_id, p.ts AS ts, p.project AS project, p.agent AS agent,"
    " p.task_id AS task_id, p.input_fingerprint AS input_fingerprint, p.risk AS risk,"
    " p.model_version AS model_version, p.known_bad AS known_bad, p.advice AS advice,"
    " p.max_attempts AS max_attempts, p.explanation AS explanation,"
    " t.outcome AS outcome, t.note AS note, t.cost_usd AS cost_usd, t.task_id != '' AS task_seen,"
    " t.task_at AS task_at, if(task_seen, t.task_at, p.ts) AS at"
    " FROM (SELECT * FROM [[db]].prechecks FINAL"
    "   WHERE ({project:String} = '' OR project = {project:String})"
    "   AND ({agent:String} = '' OR agent = {agent:String}) {window}"
    "   ORDER BY ts DESC LIMIT {limit:UInt32}) AS p"
    " LEFT JOIN ({tasks}) AS t"
    " ON p.project = t.project AND p.task_id = t.task_id"
    " {where_at}"
    " ORDER BY p.ts DESC, p.precheck_id"
)


def _joined_sql(bounded: bool) -> str:
    window = _WINDOW if bounded else ""
    where_at = "WHERE at >= {start:DateTime64(3)} AND at < {end:DateTime64(3)}" if bounded else ""
    return (_JOINED.replace("{tasks}", _TASKS).replace("{window}", window)
            .replace("{where_at}", where_at))


def joined_prechecks(store: EventStore, *, project: str | None = None, agent: str | None = None,
                     start: datetime | None = None, end: datetime | None = None,
                     limit: int = MAX_ROWS) -> list[dict[str, Any]]:
    """Pre-checks (newest answer first) with ``outcome`` ('' until the task ends), ``failed``
    (None until then), ``applied`` (None when no task was seen), ``cost_usd``, ``explanation``,
    ``task_at`` (when the task started, its first event; None until it reports) and ``at``.

    ``at`` is when a pre-check is judged: its task's start, else the answer's own ``ts``. In a
    deployment the two are moments apart; a simulated fleet pre-checked in one burst (the demo)
    answers every task at one instant while its tasks ran over hours, and their outcomes
    belong to those hours. ``start``/``end`` select by ``at``."""
    bounded = start is not None or end is not None
    params = {"project": project or "", "agent": agent or "", "limit": max(0, int(limit)),
              "start": start or datetime(1970, 1, 1, tzinfo=UTC), "end": end or datetime(2200, 1, 1, tzinfo=UTC)}
    rows = query_rows(store.client, store.sql(_joined_sql(bounded)), params)
    out = []
    for r in rows:
        seen = bool(r.pop("task_seen"))
        note = r.pop("note") or ""
        outcome = r["outcome"] or ""
        r["advice"] = list(r["advice"])
        r["explanation"] = orjson.loads(r["explanation"]) if r["explanation"] else {}
        r["failed"] = None if not outcome else outcome in FAILED_OUTCOMES
        r["applied"] = None if not seen else note.startswith(APPLIED_PREFIX)
        r["cost_usd"] = float(r["cost_usd"]) if seen else None
        r["task_at"] = r["task_at"] if seen else None
        out.append(r)
    return out


def recent_prechecks(store: EventStore, project: str | None, *, limit: int = 100) -> list[dict[str, Any]]:
    """The latest ``limit`` pre-checks of ``project`` with their outcomes (newest first)."""
    return joined_prechecks(store, project=project, limit=limit)


def auc(labels: Sequence[int], scores: Sequence[float]) -> float | None:
    """ROC-AUC by ranks (ties averaged); ``None`` without both classes."""
    n = len(labels)
    positives = sum(labels)
    if positives in (0, n):
        return None
    order = sorted(range(n), key=lambda i: scores[i])
    ranks = [0.0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    rank_sum = sum(r for r, y in zip(ranks, labels, strict=True) if y)
    return (rank_sum - positives * (positives + 1) / 2) / (positives * (n - positives))


def segment_calibration_error(labels: Sequence[int], risks: Sequence[float],
                              segments: int = CALIBRATION_SEGMENTS) -> float | None:
    """Mean over equal-count risk segments of |mean risk − observed rate|, weighted by size."""
    n = len(labels)
    if n < segments:
        return None
    order = sorted(range(n), key=lambda i: risks[i])
    total = 0.0
    for k in range(segments):
        part = order[k * n // segments:(k + 1) * n // segments]
        total += abs(sum(risks[i] for i in part) - sum(labels[i] for i in part))
    return total / n


def judge(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Figures of pre-checks with a known outcome: n, mean risk, observed rate, gaps, AUC, Brier."""
    known = [r for r in rows if r.get("failed") is not None]
    labels = [int(bool(r["failed"])) for r in known]
    risks = [float(r["risk"]) for r in known]
    if not known:
        return {"judged": 0, "mean_risk": None, "observed": None, "calibration_gap": None,
                "calibration_error": None, "precheck_auc": None, "precheck_brier": None}
    mean_risk, observed = sum(risks) / len(risks), sum(labels) / len(labels)
    return {"judged": len(known), "mean_risk": mean_risk, "observed": observed,
            "calibration_gap": abs(mean_risk - observed),
            "calibration_error": segment_calibration_error(labels, risks), "precheck_auc": auc(labels, risks),
            "precheck_brier": sum((p - y) ** 2 for p, y in zip(risks, labels, strict=True)) / len(known)}


#: Bucket sizes the monitor picks from (hours), and what it aims for: at most
#: ``MAX_BUCKETS`` over the judged span, each judging ``MIN_PER_BUCKET`` tasks on average.
BUCKET_LADDER_HOURS = (1, 2, 3, 6, 12, 24, 48, 168)
MAX_BUCKETS = 24
MIN_PER_BUCKET = 10


def _judged_at(row: dict[str, Any]) -> datetime:
    at = row["at"]
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def auto_bucket_hours(times: Sequence[datetime]) -> int:
    """The smallest ladder size giving at most ``MAX_BUCKETS`` buckets over ``times`` with
    ``MIN_PER_BUCKET`` of them per non-empty bucket on average: a trend with enough outcomes
    behind each point to mean something (a day when there is nothing to judge)."""
    if not times:
        return 24
    origin = datetime(1970, 1, 1, tzinfo=UTC)
    span = max(times) - min(times)
    for hours in BUCKET_LADDER_HOURS:
        size = timedelta(hours=hours)
        filled = len({(t - origin) // size for t in times})
        if span // size < MAX_BUCKETS and len(times) >= MIN_PER_BUCKET * filled:
            return hours
    return BUCKET_LADDER_HOURS[-1]


#: One project, every project (``None``) or these projects (an API key's).
Projects = str | Sequence[str] | None


def _window_rows(store: EventStore, project: Projects, *, days: int, now: datetime | None) -> list[dict[str, Any]]:
    """Pre-checks judged in the last ``days`` (by ``at``) of one project, every project or several."""
    now = now or datetime.now(UTC)
    start, end = now - timedelta(days=days), now + timedelta(minutes=1)
    if project is None or isinstance(project, str):
        return joined_prechecks(store, project=project, start=start, end=end)
    return [r for name in project for r in joined_prechecks(store, project=name, start=start, end=end)]


def calibration_over_time(store: EventStore, project: Projects, *, days: int = 30,
                          bucket_hours: int | None = None, now: datetime | None = None) -> list[dict[str, Any]]:
    """Per time bucket (oldest first): pre-checks, judged, mean risk vs observed, gap, AUC, Brier.

    A pre-check falls in the bucket of its judged time ``at`` (its task's start, see
    :func:`joined_prechecks`). ``bucket_hours`` ``None`` (or 0) picks the size from the judged
    pre-checks (:func:`auto_bucket_hours`); every row says the size used (``bucket_hours``)."""
    rows = _window_rows(store, project, days=days, now=now)
    judged = [_judged_at(r) for r in rows if r["failed"] is not None]
    hours = int(bucket_hours) if bucket_hours else auto_bucket_hours(judged or [_judged_at(r) for r in rows])
    size = timedelta(hours=max(1, hours))
    origin = datetime(1970, 1, 1, tzinfo=UTC)
    buckets: dict[datetime, list[dict[str, Any]]] = {}
    for r in rows:
        key = origin + size * ((_judged_at(r) - origin) // size)
        buckets.setdefault(key, []).append(r)
    return [{"bucket": key, "bucket_hours": max(1, hours), "prechecks": len(group), **judge(group)}
            for key, group in sorted(buckets.items())]


def advice_vs_outcome(store: EventStore, project: Projects, *, days: int = 30,
                      now: datetime | None = None) -> list[dict[str, Any]]:
    """Per advice kind ('none' for no advice) and followed or not: tasks, failure and hand-off
    rates, cost per task. Only pre-checks whose task ended count."""
    rows = _window_rows(store, project, days=days, now=now)
    groups: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for r in rows:
        if r["failed"] is None or r["applied"] is None:
            continue
        for kind in r["advice"] or ["none"]:
            groups.setdefault((kind, bool(r["applied"])), []).append(r)
    out = []
    for (kind, applied), group in sorted(groups.items()):
        n = len(group)
        out.append({"advice": kind, "followed": applied, "tasks": n,
                    "failure_rate": sum(bool(r["failed"]) for r in group) / n,
                    "handoff_rate": sum(r["outcome"] == "handed_off" for r in group) / n,
                    "mean_risk": sum(float(r["risk"]) for r in group) / n,
                    "cost_per_task": sum(float(r["cost_usd"] or 0.0) for r in group) / n})
    return out


def precheck_measures(store: EventStore, *, project: str | None, agent: str | None, start: datetime,
                      end: datetime, per: str = "") -> dict[str, dict[str, Any]]:
    """Window figures for alert rules, overall (``""``) or per agent; ``calls`` = judged pre-checks."""
    rows = joined_prechecks(store, project=project, agent=agent, start=start, end=end)
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["agent"] if per in ("agent", "agent_name") else "", []).append(r)
    out = {}
    for value, group in groups.items():
        figures = judge(group)
        out[value] = {**figures, "calls": figures["judged"]}
    return out
