"""The nearest past failures of inputs like this one: what an operator opens to judge a risk.

A risk score says "likely to fail"; the failed tasks whose inputs share this input's words
say how such tasks failed before (error type, failure group), whether an input is known
bad, and link to each task. Similarity is the overlap of the inputs' content keywords
(the ``kw:`` features every event carries, stop words left out, :mod:`.word_features`):
shared keywords over the union of both sets (Jaccard), a small bonus for the same agent.

A pre-check must not wait for ClickHouse, so :class:`SimilarFailures` holds one
project's recent failed tasks (:data:`MAX_TASKS`, newest first, one read per refresh)
with an inverted index keyword → array of task numbers; a lookup counts the shared
keywords of every task at once (``numpy.bincount`` over the query words' arrays) and
ranks only the tasks that pass the thresholds: tens of microseconds, where a Python loop
over the candidates cost 7 ms on a project whose few keywords each occur in hundreds of
failures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote_plus

import numpy as np
import orjson

from retrylens.store import EventStore
from retrylens.store.schema import normalised_message_sql
from retrylens.store.sql import query_rows

from .fingerprints import KNOWN_BAD_FAILURES
from .word_features import SCOPE_WORDS, is_stop_word

MAX_TASKS = 5_000
MIN_SHARED = 2
MIN_SIMILARITY = 0.15
SAME_AGENT_BONUS = 0.05
NEAREST = 3
SHORTLIST = 64

_FAILED_TASKS = (
    "SELECT task_id, any(agent_name) AS agent, anyIf(input_fingerprint, input_fingerprint != '') AS fp,"
    " argMinIf(input_features, ts, input_features != '') AS features,"
    " argMaxIf(toString(outcome), ts, outcome != '') AS final,"
    " argMaxIf(toString(error_type), ts, kind = 'attempt_failed') AS etype,"
    f" argMaxIf(cityHash64(toString(error_type), {normalised_message_sql()}), ts, kind = 'attempt_failed') AS gid,"
    " countIf(kind = 'attempt_failed') AS failed_attempts, max(ts) AS last_ts"
    " FROM [[db]].events FINAL WHERE project = {project:String}"
    " GROUP BY task_id HAVING final IN ('failed', 'handed_off') AND features != ''"
    " ORDER BY last_ts DESC, task_id LIMIT {limit:UInt32}"
)


def content_words(features: dict[str, Any]) -> frozenset[str]:
    """The input's keywords (``kw:`` features) without stop words and scope words.

    Scope words ("every", "all") are risk-model features (how open-ended a task is) but
    say nothing about what a task is about: "every country" and "every invoice" are not alike.
    """
    return frozenset(k[3:] for k, v in features.items()
                     if k.startswith("kw:") and v and not is_stop_word(k[3:]) and k[3:] not in SCOPE_WORDS)


@dataclass(frozen=True)
class FailedTask:
    task_id: str
    agent: str
    fingerprint: str
    words: frozenset[str]
    outcome: str
    error_type: str
    group_id: str
    last_seen: datetime | None


@dataclass
class SimilarFailures:
    """One project's recent failed tasks, searchable by shared keywords."""

    project: str
    tasks: list[FailedTask]
    by_word: dict[str, np.ndarray] = field(default_factory=dict)
    failed_tasks_per_input: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        listed: dict[str, list[int]] = {}
        for number, task in enumerate(self.tasks):
            for word in task.words:
                listed.setdefault(word, []).append(number)
            if task.fingerprint:
                self.failed_tasks_per_input[task.fingerprint] += 1
        self.by_word = {word: np.asarray(numbers, dtype=np.int64) for word, numbers in listed.items()}
        self._sizes = np.asarray([len(t.words) for t in self.tasks], dtype=np.float64)
        agents = {name: i for i, name in enumerate(sorted({t.agent for t in self.tasks}))}
        self._agent_ids = agents
        self._agents = np.asarray([agents[t.agent] for t in self.tasks], dtype=np.int64)
        self._fixed = [self._fixed_parts(task) for task in self.tasks]

    @classmethod
    def load(cls, store: EventStore, project: str, *, limit: int = MAX_TASKS) -> SimilarFailures:
        rows = query_rows(store.client, store.sql(_FAILED_TASKS), {"project": project, "limit": limit})
        return cls(project, [_task(row) for row in rows])

    def nearest(self, words: Iterable[str], *, agent: str = "", k: int = NEAREST) -> list[dict[str, Any]]:
        """Up to ``k`` failed tasks of the most similar inputs (one per input), nearest first."""
        mine = frozenset(w for w in words if not is_stop_word(w) and w not in SCOPE_WORDS)
        hits = [self.by_word[w] for w in mine if w in self.by_word]
        if not hits:
            return []
        shared = np.bincount(np.concatenate(hits), minlength=len(self.tasks)).astype(np.float64)
        similarity = shared / (len(mine) + self._sizes - shared)  # Jaccard: shared over the union
        passing = np.flatnonzero((shared >= min(MIN_SHARED, len(mine))) & (similarity >= MIN_SIMILARITY))
        if not len(passing):
            return []
        agent_id = self._agent_ids.get(agent, -1) if agent else -1
        score = similarity[passing] + SAME_AGENT_BONUS * (self._agents[passing] == agent_id)
        if len(passing) > SHORTLIST:  # rank a shortlist; inputs repeat, so keep room for duplicates
            best = np.argpartition(-score, SHORTLIST - 1)[:SHORTLIST]
            passing, score = passing[best], score[best]
        ranked = passing[np.lexsort((passing, -score))]  # best first, then the most recent task
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for number in ranked.tolist():
            task = self.tasks[number]
            key = task.fingerprint or task.task_id
            if key in seen:
                continue
            seen.add(key)
            out.append(self._entry(number, float(similarity[number]), sorted(mine & task.words)))
            if len(out) == k:
                break
        return out

    def _entry(self, number: int, similarity: float, shared: list[str]) -> dict[str, Any]:
        task, fixed = self.tasks[number], self._fixed[number]
        quoted = ", ".join(f"'{w}'" for w in shared[:5])
        words = (f"task {task.task_id} of {task.agent or 'an agent'} {fixed.how}; its input shares {quoted}"
                 f" ({similarity:.0%} alike)") + fixed.repeated
        return {
            "task_id": task.task_id, "agent": task.agent, "input_fingerprint": task.fingerprint,
            "similarity": round(similarity, 3), "shared_words": shared, "outcome": task.outcome,
            "error_type": task.error_type, "failure_group": task.group_id, "input_failed_tasks": fixed.failed,
            "known_bad": fixed.known_bad, "last_seen": fixed.last_seen, "words": words,
            "link": fixed.link, "group_link": fixed.group_link,
        }

    def _fixed_parts(self, task: FailedTask) -> _FixedParts:
        """What a task's entry says whatever the query, worked out for every task when the
        failures are loaded (on the index's background thread): the links' quoting and the
        date's formatting were half of a search's cost on the pre-check's path."""
        failed = self.failed_tasks_per_input.get(task.fingerprint, 1) if task.fingerprint else 1
        known_bad = failed >= KNOWN_BAD_FAILURES
        project = quote_plus(self.project)  # quote_plus as urlencode does it, at a fraction of its cost
        return _FixedParts(
            failed=failed, known_bad=known_bad,
            how=task.outcome.replace("_", " ") + (f" ({task.error_type})" if task.error_type else ""),
            repeated=(f"; that input failed {failed} recent tasks" + (" — known bad" if known_bad else ""))
            if failed > 1 else "",
            last_seen=task.last_seen.isoformat() if task.last_seen else None,
            link=f"task?project={project}&task_id={quote_plus(task.task_id)}",
            group_link=f"groups?project={project}&group={task.group_id}" if task.group_id else None,
        )


@dataclass(frozen=True)
class _FixedParts:
    """The parts of a task's entry in :meth:`SimilarFailures.nearest` that no query changes."""

    failed: int
    known_bad: bool
    how: str
    repeated: str
    last_seen: str | None
    link: str
    group_link: str | None


def _task(row: dict[str, Any]) -> FailedTask:
    try:
        features = orjson.loads(row["features"])
    except orjson.JSONDecodeError:
        features = {}
    gid = int(row["gid"] or 0)
    return FailedTask(
        task_id=str(row["task_id"]), agent=str(row["agent"] or ""), fingerprint=str(row["fp"] or ""),
        words=content_words(features) if isinstance(features, dict) else frozenset(),
        outcome=str(row["final"]), error_type=str(row["etype"] or "") if row["failed_attempts"] else "",
        group_id=f"{gid:016x}" if gid and row["failed_attempts"] else "", last_seen=row["last_ts"],
    )
