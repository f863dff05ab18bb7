"""Failure patterns in plain words: which inputs fail more often than the rest.

Items are the task's keywords (``kw:``), keyword pairs, tools named (``tool:``), the agent
and an input-size band, read from the ``input_features`` agents put on their events. For
each item, over finished tasks: support (tasks with it), failures among them, and lift
(their failure rate / the overall failure rate). Counting happens in ClickHouse
(``arrayJoin`` of the items of each task). A pair is reported only when it beats both of
its keywords alone, so "A and B" means the combination, not just A.

The target is "the task failed or was handed off", or with ``phase`` "the task had a
failed attempt in that phase" (e.g. planning loops).
"""

from __future__ import annotations

from dataclasses import dataclass

from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .filters import Slice

SIZE_BANDS = "multiIf(n_chars < 200, 'short', n_chars <= 1000, 'medium', 'long')"
_SIZE_WORDS = {"short": "short inputs (< 200 characters)", "medium": "medium inputs (200–1000 characters)",
               "long": "long inputs (> 1000 characters)"}


@dataclass(frozen=True)
class Pattern:
    item: str
    support: int
    failures: int
    failure_rate: float
    lift: float
    description: str


def _describe(item: str, lift: float, failures: int, support: int, phase: str | None) -> str:
    if "&" in item:
        a, b = (part.removeprefix("kw:") for part in item.split("&", 1))
        subject = f"inputs mentioning both '{a}' and '{b}'"
    elif item.startswith("kw:"):
        subject = f"inputs mentioning '{item[3:]}'"
    elif item.startswith("tool:"):
        subject = f"inputs naming the tool '{item[5:]}'"
    elif item.startswith("agent="):
        subject = f"tasks of agent '{item[6:]}'"
    else:
        subject = _SIZE_WORDS.get(item.removeprefix("size="), item)
    verb = f"fail in {phase}" if phase else "fail or need a human"
    return f"{subject} {verb} {lift:.1f}× more often than average ({failures} of {support} tasks)"


def failure_patterns(
    store: EventStore, where: Slice = Slice(), *, phase: str | None = None, min_support: int = 10,
    min_lift: float = 1.2, limit: int = 20,
) -> list[Pattern]:
    """Items most associated with failure, highest lift first."""
    clause, params = where.where()
    params.update({"phase": phase or "", "min_support": max(1, int(min_support))})
    target = (
        "max(kind = 'attempt_failed' AND phase = {phase:String})" if phase
        else "argMaxIf(toString(outcome), ts, outcome != '') IN ('failed', 'handed_off')"
    )
    sql = store.sql(
        "WITH tasks AS ("
        "  SELECT argMinIf(input_features, ts, input_features != '') AS f, any(agent_name) AS agent,"
        f"  toUInt8({target}) AS failed,"
        "   countIf(outcome != '') AS finished"  # task_finished, or a compact first-try success
        f"  FROM [[db]].events FINAL WHERE {clause} GROUP BY project, task_id HAVING finished > 0 AND f != ''),"
        " items AS ("
        "  SELECT failed, arraySort(arrayFilter(k -> startsWith(k, 'kw:'), JSONExtractKeys(f))) AS kws,"
        "   arrayFilter(k -> startsWith(k, 'tool:'), JSONExtractKeys(f)) AS tools,"
        "   JSONExtractUInt(f, 'n_chars') AS n_chars,"
        "   arrayConcat(kws, tools, [concat('agent=', agent), concat('size=', " + SIZE_BANDS + ")],"
        "     arrayFlatten(arrayMap(i -> arrayMap(j -> concat(kws[i], '&', kws[j]),"
        "       range(i + 1, length(kws) + 1)), range(1, length(kws) + 1)))) AS all_items"
        "  FROM tasks)"
        " SELECT item, count() AS support, sum(failed) AS n_failed,"
        "  (SELECT count() FROM tasks) AS total, (SELECT sum(failed) FROM tasks) AS total_failed"
        " FROM items ARRAY JOIN all_items AS item"
        " GROUP BY item HAVING support >= {min_support:UInt32}"
    )
    rows = query_rows(store.client, sql, params)
    if not rows or not rows[0]["total_failed"]:
        return []
    base = rows[0]["total_failed"] / rows[0]["total"]
    rate = {r["item"]: r["n_failed"] / r["support"] for r in rows}
    found = []
    for r in rows:
        item, lift = r["item"], rate[r["item"]] / base
        if lift < min_lift:
            continue
        if "&" in item and any(rate.get(part, 0.0) >= rate[item] for part in item.split("&", 1)):
            continue
        found.append(Pattern(item, int(r["support"]), int(r["n_failed"]), rate[item], lift,
                             _describe(item, lift, int(r["n_failed"]), int(r["support"]), phase)))
    found.sort(key=lambda p: (-p.lift, -p.support, p.item))
    return found[: max(0, int(limit))]
