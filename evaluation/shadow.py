"""Shadow comparison: what the candidate decided beside the live policy, read in ClickHouse.

Every decision event of a governor running a shadow candidate carries ``shadow=true``
and ``shadow_decision``. This module asks the store for the agreement matrix (live ×
candidate decision), agreement per slice (agent, phase, error type), and the cases where
they differ together with how the task really ended under the live policy. All filters
are bound query parameters; the slice column is picked from a fixed list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from retrylens.store import EventStore
from retrylens.store.sql import query_rows

SLICES = {"agent": "agent_name", "phase": "phase", "error_type": "error_type"}

_FILTER = """kind = {kind:String} AND shadow AND shadow_decision != ''
  AND ({project:String} = '' OR project = {project:String})
  AND ts >= {since:DateTime64(3)}"""

_MATRIX = """
SELECT decision AS live, shadow_decision AS candidate, count() AS n
FROM [[db]].events FINAL WHERE """ + _FILTER + """
GROUP BY live, candidate ORDER BY n DESC, live, candidate"""

_SLICE = """
SELECT {column} AS value, count() AS n, countIf(decision = shadow_decision) AS agree,
       countIf(decision != shadow_decision) AS differ
FROM [[db]].events FINAL WHERE """ + _FILTER + """
GROUP BY value ORDER BY n DESC, value"""

_DISAGREE = """
SELECT d.live AS live, d.candidate AS candidate, if(f.outcome = '', 'unfinished', f.outcome) AS live_outcome,
       count() AS n
FROM (SELECT project, task_id, decision AS live, shadow_decision AS candidate
      FROM [[db]].events FINAL WHERE """ + _FILTER + """ AND decision != shadow_decision) AS d
LEFT JOIN (SELECT project, task_id, any(outcome) AS outcome FROM [[db]].events AS e FINAL
           WHERE e.outcome != '' GROUP BY project, task_id) AS f
  ON d.project = f.project AND d.task_id = f.task_id
GROUP BY live, candidate, live_outcome ORDER BY n DESC, live, candidate, live_outcome"""

_EXAMPLES = """
SELECT d.project AS project, d.task_id AS task_id, d.attempt AS attempt, d.agent_name AS agent,
       d.phase AS phase, d.error_type AS error_type, d.decision AS live, d.shadow_decision AS candidate,
       d.decision_reason AS reason, if(f.outcome = '', 'unfinished', f.outcome) AS live_outcome
FROM (SELECT * FROM [[db]].events FINAL WHERE """ + _FILTER + """ AND decision != shadow_decision) AS d
LEFT JOIN (SELECT project, task_id, any(outcome) AS outcome FROM [[db]].events AS e FINAL
           WHERE e.outcome != '' GROUP BY project, task_id) AS f
  ON d.project = f.project AND d.task_id = f.task_id
ORDER BY d.ts DESC, d.task_id LIMIT {limit:UInt32}"""


@dataclass
class ShadowComparison:
    decisions: int
    agreement: float | None
    matrix: list[dict[str, Any]]
    slices: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"decisions": self.decisions, "agreement": self.agreement, "matrix": self.matrix,
                "slices": self.slices, "disagreements": self.disagreements, "examples": self.examples}


def compare_shadow(store: EventStore, *, project: str | None = None, since: datetime | None = None,
                   examples: int = 20) -> ShadowComparison:
    """Agreement of live and shadow decisions in the store (optionally one project, since a time)."""
    params = {"kind": "decision", "project": project or "", "since": since or datetime(1970, 1, 1),
              "limit": examples}
    matrix = query_rows(store.client, store.sql(_MATRIX), params)
    total = sum(int(r["n"]) for r in matrix)
    agree = sum(int(r["n"]) for r in matrix if r["live"] == r["candidate"])
    slices = {}
    for name, column in SLICES.items():
        rows = query_rows(store.client, store.sql(_SLICE.replace("{column}", column)), params)
        for row in rows:
            row["agreement"] = round(row["agree"] / row["n"], 4) if row["n"] else None
        slices[name] = rows
    return ShadowComparison(
        decisions=total, agreement=round(agree / total, 4) if total else None, matrix=matrix, slices=slices,
        disagreements=query_rows(store.client, store.sql(_DISAGREE), params),
        examples=[{k: str(v) if not isinstance(v, int | float) else v for k, v in row.items()}
                  for row in query_rows(store.client, store.sql(_EXAMPLES), params)],
    )
