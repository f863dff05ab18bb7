"""Recent tasks with what they came to: the list behind ``retrylens tasks``.

One row per task in the slice, newest last activity first: its agent, when it started and
last moved, how many attempts it took and how many failed, what it spent, and how it ended
(``outcome`` empty while it is still open). ``outcome`` and ``only_retried`` narrow it
further. Read from ``events`` (exact; ``FINAL`` collapses a re-sent event).
"""

from __future__ import annotations

from typing import Any

from retrylens.schemas.taxonomy import TaskOutcome
from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .definitions import ENDED, count
from .filters import Slice

#: How a task ended, or ``open`` while it has not.
OUTCOMES: tuple[str, ...] = (*(o.value for o in TaskOutcome), "open")


def recent_tasks(store: EventStore, where: Slice = Slice(), *, outcome: str | None = None,
                 only_retried: bool = False, limit: int = 20) -> list[dict[str, Any]]:
    """The newest tasks of ``where`` (see the module doc); ``outcome='open'`` keeps unfinished ones."""
    if outcome is not None and outcome not in OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; choose one of {', '.join(OUTCOMES)}")
    clause, params = where.where()
    having = []
    if outcome is not None:
        having.append("outcome = {outcome:String}")
        params["outcome"] = "" if outcome == "open" else outcome
    if only_retried:
        having.append("retries > 0")
    params["limit"] = max(0, int(limit))
    sql = store.sql(
        "SELECT project, task_id, any(agent_name) AS agent, min(ts) AS started, max(ts) AS last_seen,"
        f" uniqExactIf(attempt, {count('calls').condition}) AS attempts,"
        f" uniqExactIf(attempt, {count('failures').condition}) AS failures,"
        f" uniqExactIf(attempt, {count('retries').condition}) AS retries,"
        f" sumIf(cost_usd, {ENDED}) AS cost_usd,"
        " argMaxIf(toString(outcome), ts, outcome != '') AS outcome"
        f" FROM [[db]].events FINAL WHERE {clause} GROUP BY project, task_id"
        + (f" HAVING {' AND '.join(having)}" if having else "")
        + " ORDER BY last_seen DESC, task_id LIMIT {limit:UInt32}"
    )
    return query_rows(store.client, sql, params)
