"""Known-bad references: an order, SKU or account that failed every task of an agent that named it.

A reference that does not exist or is blocked fails every task naming it with a permanent
error (a 404, a validation refusal) that no retry fixes, however the request is worded, so
the exact-input fingerprint sees only word-for-word repeats. The SDK puts the references an
input names on its events as hashed ``ref:`` features (:mod:`retrylens.sdk.text.refs`); the
advice book counts, per agent and reference, the finished tasks that made an attempt, how
many succeeded and the failure class each failed one ended on (its last failure: a class an
earlier retry got past did not stop it; a bad order that first fails a validation, retried,
and then is not found ended on a logic failure). Tasks the pre-check handed to a person before any
attempt are not counted: they say nothing about the reference.

**The rule.** An input naming a reference gets ``human_review`` before the first attempt when,
in this agent's history, no earlier task naming it succeeded and at least ``n`` of them ended on
a permanent failure class (:func:`~.failure_classes.persistence_of`) that this agent's retries
do not clearly fix (:meth:`~.advice_evidence.AgentEvidence.retries_fix`). A task that ended on
another class — transient (it ran out of attempts on a rate limit), or one this agent's retries
usually fix (it stopped on its own output before the lookup ran) — failed too, but says nothing
of the reference: it is not counted towards ``n`` and does not clear it. ``n`` is the
smallest number (at least :data:`MIN_REF_TASKS`) with ``p ** n <= ALPHA / m(n)``: ``p`` the
agent's task failure rate, ``m(n)`` its references named in at least ``n`` tasks (each one a
chance for a reference to fail every time by luck: Bonferroni over the references that could
reach the count at all, Tarone's refinement; a reference seen twice can never show ``n = 4``
failures, so it is no test at that count). So a reference of an agent that fails 15 % of its
tasks, with 13 references of that many tasks, needs 3 failed tasks; one of an agent that fails
half its tasks needs 9. Nothing about what a reference looks like is in the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .advice_evidence import AgentEvidence
from .failure_classes import persistence_of
from .filters import Slice

MIN_REF_TASKS = 2
ALPHA = 0.05
#: the book keeps at most this many known-bad references per agent (most tasks first)
MAX_BOOK_REFS = 256

_REFS = (
    "SELECT project, agent, sumMapIf([tasks], [toUInt64(1)], tasks >= {min:UInt32}) AS by_tasks,"
    " groupArrayIf((ref, tasks, ended), ok = 0 AND tasks >= {min:UInt32}) AS failed FROM ("
    "  SELECT project, agent, ref, count() AS tasks, countIf(ok) AS ok,"
    "   sumMap([last], [toUInt64(1)]) AS ended FROM ("
    "   SELECT project, any(agent_name) AS agent, task_id,"
    "    argMinIf(input_features, ts, input_features != '') AS f,"
    "    argMaxIf(toString(outcome), ts, outcome != '') AS out, out = 'succeeded' AS ok,"
    "    argMaxIf(toString(error_type), (attempt, ts), kind = 'attempt_failed') AS last,"
    "    countIf(kind IN ('attempt_failed', 'attempt_succeeded')) AS attempts"
    "   FROM [[db]].events FINAL WHERE {where} GROUP BY project, task_id"
    "   HAVING attempts > 0 AND out != '')"
    "  ARRAY JOIN arrayFilter(k -> startsWith(k, 'ref:'), JSONExtractKeys(f)) AS ref"
    "  GROUP BY project, agent, ref)"
    " GROUP BY project, agent"
)


def needed_tasks(failure_rate: float, refs_by_tasks: Mapping[int, int]) -> tuple[int, int] | None:
    """``(n, m(n))``: the smallest ``n >= MIN_REF_TASKS`` with ``failure_rate ** n <= ALPHA / m(n)``,
    ``m(n)`` the references named in at least ``n`` tasks (``refs_by_tasks``: task count →
    references with that count). ``None`` when no count rules chance out (an agent that fails
    every task, or no reference seen twice)."""
    if failure_rate >= 1.0 or not any(k >= MIN_REF_TASKS for k in refs_by_tasks):
        return None
    n = MIN_REF_TASKS
    while True:
        m = sum(refs for tasks, refs in refs_by_tasks.items() if tasks >= n)
        if m == 0 or failure_rate**n * m <= ALPHA:
            return n, m
        n += 1


@dataclass(frozen=True)
class RefEvidence:
    """One agent's references: its failure rate, how many it has of each task count, and those
    that never succeeded."""

    failure_rate: float = 1.0
    #: tasks naming a reference → how many references were named in that many (at least 2)
    refs_by_tasks: dict[int, int] = field(default_factory=dict)
    #: ref feature → (tasks naming it, none succeeded; how many ended on each failure class)
    failed: dict[str, tuple[int, dict[str, int]]] = field(default_factory=dict)

    @property
    def needed(self) -> tuple[int, int] | None:
        return needed_tasks(self.failure_rate, self.refs_by_tasks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "failure_rate": self.failure_rate,
            "refs_by_tasks": {str(k): v for k, v in self.refs_by_tasks.items()},
            "failed": {ref: [n, dict(ended)] for ref, (n, ended) in self.failed.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RefEvidence:
        return cls(
            float(data.get("failure_rate", 1.0)),
            {int(k): int(v) for k, v in (data.get("refs_by_tasks") or {}).items()},
            {
                str(ref): (int(v[0]), {str(c): int(k) for c, k in dict(v[1]).items()})
                for ref, v in (data.get("failed") or {}).items()
            },
        )


def ref_book(
    store: EventStore, where: Slice, agents: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per ``project/agent``: :class:`RefEvidence` as JSON, keeping only the references that failed
    often enough to pass the rule's count (at most :data:`MAX_BOOK_REFS`). ``agents``: the book's
    per-agent evidence (its ``tasks`` and ``succeeded`` give the failure rate)."""
    clause, params = where.where()
    out: dict[str, dict[str, Any]] = {}
    rows = query_rows(
        store.client, store.sql(_REFS.replace("{where}", clause)), {**params, "min": MIN_REF_TASKS}
    )
    for row in rows:
        key = f"{row['project']}/{row['agent']}"
        own = AgentEvidence.from_dict(dict(agents.get(key) or {}))
        rate = 1 - own.succeeded / own.tasks if own.tasks else 1.0
        by_tasks = {int(k): int(v) for k, v in zip(*row["by_tasks"], strict=True)}
        rule = needed_tasks(rate, by_tasks)
        failed = sorted(
            (
                (str(ref), int(n), {str(c) or "unclassified": int(k) for c, k in zip(*ended, strict=True)})
                for ref, n, ended in row["failed"]
            ),
            key=lambda item: (-item[1], item[0]),
        )
        keep = {
            ref: (n, ended)
            for ref, n, ended in failed
            if rule is not None and sum(_decisive(ended, own).values()) >= rule[0]
        }
        out[key] = RefEvidence(
            rate, by_tasks, dict(list(keep.items())[:MAX_BOOK_REFS])
        ).as_dict()
    return out


def known_bad_ref(
    refs: Mapping[str, str], evidence: RefEvidence, own: AgentEvidence, agent: str
) -> str | None:
    """The evidence in words when one of the input's references (``{ref feature: token}``) failed
    every earlier task of this agent under the module's rule, else ``None``."""
    rule = evidence.needed
    if rule is None:
        return None
    needed, tested = rule
    for ref, token in refs.items():
        tasks, ended = evidence.failed.get(ref, (0, {}))
        decisive = _decisive(ended, own)
        if sum(decisive.values()) < needed:
            continue
        endings = ", ".join(f"{k} on {c}" for c, k in sorted(ended.items(), key=lambda i: (-i[1], i[0])))
        return (
            f"names {token!r}, seen in {tasks} earlier {agent} tasks, none succeeded "
            f"(ended: {endings}; {', '.join(sorted(decisive))} not transient); "
            f"{_retries_words(own, sorted(decisive), agent)}; with {agent}'s task failure rate "
            f"{evidence.failure_rate:.0%} and {tested} of its references named in {needed}+ tasks, "
            f"{needed} such failures rule chance out ({evidence.failure_rate:.0%}^{needed} <= "
            f"{ALPHA:.0%} / {tested})"
        )
    return None


def _decisive(ended: Mapping[str, int], own: AgentEvidence) -> dict[str, int]:
    """The tasks that ended on each permanent class this agent's retries do not clearly fix
    (transient, unclassified and usually-fixed endings left out: they say nothing of the reference)."""
    return {
        c: k
        for c, k in ended.items()
        if persistence_of([c]) == "permanent" and not own.retries_fix([c])
    }


def _retries_words(own: AgentEvidence, classes: list[str], agent: str) -> str:
    parts = []
    for cls in classes:
        retried, recovered = own.classes.get(cls, (0, 0))
        if retried:
            parts.append(f"{recovered} of {retried} {agent} tasks retried after a {cls} failure succeeded")
    return "; ".join(parts) or f"no record of {agent}'s retries fixing {', '.join(classes)}"
