"""The advice book: each agent's evidence read from the store once per training (saved with the
model, so a pre-check reads it from memory), and each advice kind's measured effect.

The SQL lives here; what the counts mean is :mod:`.advice_evidence`'s, what to do with them
:mod:`.advice`'s.
"""

from __future__ import annotations

from typing import Any

from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .advice_effects import advice_effects
from .advice_effects import retired as retired_kinds
from .advice_evidence import OUTPUT_FAILURES, AgentEvidence
from .advice_segments import Segments
from .filters import Slice
from .known_bad_refs import ref_book

#: per task, ``[(attempt, cost)]`` of its attempts: what a cap or a simplified mode would change
_COSTS = (
    "SELECT project, task_id, groupArrayIf((toUInt32(attempt), cost_usd),"
    "   kind IN ('attempt_failed', 'attempt_succeeded')) AS costs"
    " FROM [[db]].events FINAL WHERE {where} GROUP BY project, task_id"
)
_RETRIES = (
    "SELECT d.project AS project, d.agent_name AS agent, d.decision = 'degrade_precision' AS relaxed,"
    " d.task_id IN {high:Array(String)} AS high, count() AS n, countIf(a.kind = 'attempt_succeeded') AS ok,"
    " sum(arraySum(x -> if(x.1 > d.attempt, x.2, 0), c.costs)) AS spent,"
    " sum(pow(arraySum(x -> if(x.1 > d.attempt, x.2, 0), c.costs), 2)) AS spent_sq"
    " FROM (SELECT project, agent_name, task_id, toUInt32(attempt) AS attempt, toString(decision) AS decision"
    "   FROM [[db]].events FINAL"
    "   WHERE kind = 'decision' AND toString(error_type) IN {output:Array(String)} AND {where}"
    "   AND decision NOT IN ('give_up', 'handoff_human', 'cancel_chain', 'none', '')) AS d"
    " INNER JOIN (SELECT project, task_id, toUInt32(attempt) AS attempt, kind FROM [[db]].events FINAL"
    "   WHERE kind IN ('attempt_succeeded', 'attempt_failed') AND {where}) AS a"
    " ON d.project = a.project AND d.task_id = a.task_id AND a.attempt = d.attempt + 1"
    " INNER JOIN (" + _COSTS + ") AS c ON d.project = c.project AND d.task_id = c.task_id"
    " GROUP BY project, agent, relaxed, high"
)
_RECOVERY = (
    "SELECT project, agent, high, failed, count() AS reached, countIf(ok) AS recovered,"
    " sum(arraySum(x -> if(x.1 > failed, x.2, 0), costs)) AS spent,"
    " sum(pow(arraySum(x -> if(x.1 > failed, x.2, 0), costs), 2)) AS spent_sq FROM ("
    "  SELECT project, any(agent_name) AS agent, task_id IN {high:Array(String)} AS high,"
    "   uniqExactIf(attempt, kind = 'attempt_failed') AS fails,"
    "   argMaxIf(toString(outcome), ts, outcome != '') = 'succeeded' AS ok,"
    "   groupArrayIf((toUInt32(attempt), cost_usd), kind IN ('attempt_failed', 'attempt_succeeded')) AS costs"
    "  FROM [[db]].events FINAL WHERE {where} GROUP BY project, task_id HAVING fails > 0)"
    " ARRAY JOIN range(1, toUInt32(least(fails, 6)) + 1) AS failed"
    " GROUP BY project, agent, high, failed"
)

_CLASSES = (
    "SELECT f.project AS project, f.agent AS agent, f.cls AS cls, f.task_id IN {high:Array(String)} AS high,"
    " count() AS retried, countIf(t.ok) AS recovered,"
    " sum(arraySum(x -> if(x.1 > f.first, x.2, 0), t.costs)) AS spent,"
    " sum(pow(arraySum(x -> if(x.1 > f.first, x.2, 0), t.costs), 2)) AS spent_sq"
    " FROM (SELECT project, any(agent_name) AS agent, task_id, toString(error_type) AS cls,"
    "   toUInt32(min(attempt)) AS first"
    "   FROM [[db]].events FINAL WHERE kind = 'attempt_failed' AND {where} GROUP BY project, task_id, cls) AS f"
    " INNER JOIN (SELECT project, task_id, max(attempt) AS last,"
    "   argMaxIf(toString(outcome), ts, outcome != '') = 'succeeded' AS ok,"
    "   groupArrayIf((toUInt32(attempt), cost_usd), kind IN ('attempt_failed', 'attempt_succeeded')) AS costs"
    "   FROM [[db]].events FINAL WHERE {where} GROUP BY project, task_id) AS t"
    " ON f.project = t.project AND f.task_id = t.task_id"
    " WHERE t.last > f.first GROUP BY project, agent, cls, high"
)
#: per agent: tasks, of which succeeded, and their spend (the price of one success); and the tasks
#: whose first attempt failed on the output (what a simplified mode from the start acts on)
_SPEND = (
    "SELECT project, agent, high, count() AS tasks, countIf(ok) AS succeeded, sum(spent) AS spent,"
    " countIf(first_out) AS first_failed FROM ("
    "  SELECT project, any(agent_name) AS agent, task_id IN {high:Array(String)} AS high,"
    "   argMaxIf(toString(outcome), ts, outcome != '') = 'succeeded' AS ok,"
    "   countIf(kind = 'attempt_failed' AND attempt = 1"
    "    AND toString(error_type) IN {output:Array(String)}) > 0 AS first_out,"
    "   sumIf(cost_usd, kind IN ('attempt_failed', 'attempt_succeeded')) AS spent"
    "  FROM [[db]].events FINAL WHERE {where} GROUP BY project, task_id)"
    " GROUP BY project, agent, high"
)


def build_advice_book(store: EventStore, where: Slice = Slice(), segments: Segments | None = None) -> dict[str, Any]:
    """Per ``project/agent``: the evidence :func:`advise` reads (JSON-able, saved with the model),
    and each advice kind's measured effect on stored pre-checks with the kinds retired for it.

    ``segments`` (:func:`~.advice_segments.risk_segments`, from the model just trained): each
    segmented agent's record is also kept apart for its high-risk tasks and for the rest
    (``segments``: ``{key: {"bar", "high", "rest"}}``), read in the same queries."""
    clause, params = where.where()
    segments = segments or Segments({}, {})
    params = {**params, "high": segments.high_ids()}
    evidence: dict[str, dict[str, Any]] = {}
    parts: dict[str, dict[str, Any]] = {
        key: {"bar": bar, "high": AgentEvidence().as_dict(), "rest": AgentEvidence().as_dict()}
        for key, bar in segments.bars.items()
    }

    def of(row: dict[str, Any]) -> list[dict[str, Any]]:
        """The records a row adds to: the agent's pooled one, and its segment's where it has segments."""
        key = f"{row['project']}/{row['agent']}"
        pooled = evidence.setdefault(key, AgentEvidence().as_dict())
        return [pooled] if key not in parts else [pooled, parts[key]["high" if row["high"] else "rest"]]

    def add(record: dict[str, Any], field: str, name: str, values: list[float]) -> None:
        old = record[field].get(name) or [0] * len(values)
        record[field][name] = [a + b for a, b in zip(old, values, strict=True)]

    for row in query_rows(store.client, store.sql(_RETRIES.replace("{where}", clause)),
                          {**params, "output": list(OUTPUT_FAILURES)}):
        for e in of(row):
            prefix = "relaxed" if row["relaxed"] else "other"
            e[f"{prefix}_n"] += int(row["n"])
            e[f"{prefix}_ok"] += int(row["ok"])
            total, squares = e[f"{prefix}_spent"] or (0.0, 0.0)
            e[f"{prefix}_spent"] = [total + float(row["spent"]), squares + float(row["spent_sq"])]
    for row in query_rows(store.client, store.sql(_RECOVERY.replace("{where}", clause)), params):
        # "failed k times and later succeeded" needs a task that failed more than k times or succeeded after k
        for e in of(row):
            add(e, "recovery", str(int(row["failed"])), [int(row["reached"]), int(row["recovered"])])
            add(e, "recovery_spent", str(int(row["failed"])), [float(row["spent"]), float(row["spent_sq"])])
    for row in query_rows(store.client, store.sql(_CLASSES.replace("{where}", clause)), params):
        for e in of(row):
            add(e, "classes", str(row["cls"]), [int(row["retried"]), int(row["recovered"])])
            add(e, "classes_spent", str(row["cls"]), [float(row["spent"]), float(row["spent_sq"])])
    for row in query_rows(store.client, store.sql(_SPEND.replace("{where}", clause)),
                          {**params, "output": list(OUTPUT_FAILURES)}):
        for e in of(row):
            e["tasks"] += int(row["tasks"])
            e["succeeded"] += int(row["succeeded"])
            e["spent"] += float(row["spent"])
            e["first_failed"] = (e["first_failed"] or 0) + int(row["first_failed"])
    # what each kind did where it was given vs withheld (stored pre-checks): kinds that do not help retire
    effects = advice_effects(store, project=where.project, start=where.start, end=where.end)
    # version 4: references that failed every task naming them (:mod:`.known_bad_refs`);
    # version 5: each agent's record also per risk segment (:mod:`.advice_segments`)
    return {
        "version": 5,
        "agents": evidence,
        "segments": parts,
        "refs": ref_book(store, where, evidence),
        "effects": effects,
        "retired": retired_kinds(effects),
    }


def book_for_projects(book: dict[str, Any], projects: frozenset[str] | None) -> dict[str, Any]:
    """What of ``book`` a caller reading ``projects`` may see (``None``: every project, the local token).

    The book is built over every project at training, one entry per ``project/agent`` (a project
    name holds no ``/``): a project key sees its projects' entries only. The measured effects are
    pooled over every project's pre-checks, so they are left out for it; the kinds retired by them
    stay, since they decide what this key's own pre-checks are told."""
    if projects is None:
        return book

    def own(entries: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in entries.items() if key.split("/", 1)[0] in projects}

    scoped = {**book, "agents": own(book.get("agents") or {}), "refs": own(book.get("refs") or {}),
              "segments": own(book.get("segments") or {})}
    scoped.pop("effects", None)
    return scoped
