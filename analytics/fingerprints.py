"""Input-fingerprint intelligence: how often a given task input has failed, and how.

Answers come from the ``fingerprint_daily`` rollup, keyed by (project, fingerprint, day),
so one lookup reads a handful of rows by primary key — fast enough for the governor's
"the same input failed ≥ 3 times → hand off" rule and for the risk API's known-bad flag.
Only events that carry ``input_fingerprint`` are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .failure_classes import Cause, Persistence, cause_of, persistence_of

#: The governor's rule: an input that failed this many attempts is not retried again.
KNOWN_BAD_FAILURES = 3


@dataclass(frozen=True)
class FingerprintStats:
    """Failure history of one input fingerprint (zeros when never seen)."""

    project: str
    fingerprint: str
    attempts: int = 0
    failures: int = 0
    tasks: int = 0
    tasks_failed: int = 0
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    #: Error types of its failed attempts, most recently seen first.
    recent_error_types: list[str] = field(default_factory=list)
    #: Distinct dependencies its failed attempts called (several: the input is at fault).
    failed_dependencies: int = 0

    @property
    def persistence(self) -> Persistence:
        """``transient`` when every failure class it hit is transient, else ``permanent``."""
        return persistence_of(self.recent_error_types)

    @property
    def cause(self) -> Cause:
        """``input`` when it failed on several dependencies or with an input-class error,
        ``dependency`` when only dependency-class errors hit it (:mod:`.failure_classes`)."""
        return cause_of(self.recent_error_types, dependencies_per_input=self.failed_dependencies)

    @property
    def failure_rate(self) -> float | None:
        """Failed attempts / attempts."""
        return self.failures / self.attempts if self.attempts else None

    @property
    def task_failure_rate(self) -> float | None:
        return self.tasks_failed / self.tasks if self.tasks else None

    def known_bad(self, threshold: int = KNOWN_BAD_FAILURES) -> bool:
        return self.failures >= threshold


_SELECT = (
    "SELECT project, input_fingerprint, uniqExactMerge(attempts) AS n_attempts,"
    " uniqExactMerge(failures) AS n_failures, uniqExactMerge(tasks) AS n_tasks,"
    " uniqExactMerge(tasks_failed) AS n_tasks_failed, min(first_seen) AS first, max(last_seen) AS last,"
    " maxMapMerge(error_last_seen) AS errors"
    " FROM [[db]].fingerprint_daily"
)


#: Beyond this many fingerprints, their failed dependencies are read for the whole project
#: rather than bound as an ``IN`` list: binding and parsing a list of thousands of strings
#: cost more CPU than the project's grouped read (the pre-check index's refresh: 2,241
#: fingerprints, 12.7 ms vs 3.6 ms of CPU), and the answer per fingerprint is the same.
IN_LIST_MAX = 200


def _failed_dependencies(store: EventStore, project: str, fingerprints: list[str]) -> dict[str, int]:
    """Distinct dependencies the failed attempts of each of ``fingerprints`` called (absent: none)."""
    if not fingerprints:
        return {}
    where = "" if len(fingerprints) > IN_LIST_MAX else " AND input_fingerprint IN {fps:Array(String)}"
    sql = store.sql(
        "SELECT input_fingerprint, uniqExactIf(dependency, dependency != '') AS deps FROM [[db]].events"
        " WHERE project = {project:String} AND input_fingerprint != ''" + where +
        " AND kind = 'attempt_failed' GROUP BY input_fingerprint"
    )
    params: dict[str, Any] = {"project": project} if not where else {"project": project, "fps": fingerprints}
    return {row["input_fingerprint"]: int(row["deps"]) for row in query_rows(store.client, sql, params)}


def _with_dependencies(store: EventStore, project: str, rows: list[dict[str, Any]]) -> list[FingerprintStats]:
    """Rollup rows as stats, each with its failed dependencies (one read for all of them).

    Built once per row: the pre-check index rebuilds thousands of these every few seconds on
    a background thread that holds the GIL meanwhile, so no second copy per row."""
    spread = _failed_dependencies(store, project, [row["input_fingerprint"] for row in rows if row["n_failures"]])
    return [_stats(row, spread.get(row["input_fingerprint"], 0)) for row in rows]


def _stats(row: dict[str, Any], failed_dependencies: int = 0) -> FingerprintStats:
    names, seen = row["errors"]
    recent = [name for name, _ in sorted(zip(names, seen, strict=True), key=lambda p: p[1], reverse=True)]
    return FingerprintStats(
        project=row["project"],
        fingerprint=row["input_fingerprint"],
        attempts=int(row["n_attempts"]),
        failures=int(row["n_failures"]),
        tasks=int(row["n_tasks"]),
        tasks_failed=int(row["n_tasks_failed"]),
        first_seen=row["first"],
        last_seen=row["last"],
        recent_error_types=recent,
        failed_dependencies=failed_dependencies,
    )


def fingerprint_stats(
    store: EventStore, project: str, fingerprint: str, *, since: date | None = None, classify: bool = True
) -> FingerprintStats:
    """History of one fingerprint in ``project`` (optionally only days from ``since``);
    ``classify=False`` skips the read of its failed dependencies (the rollup alone)."""
    params: dict[str, Any] = {"project": project, "fp": fingerprint, "since": since or date(1970, 1, 1)}
    sql = store.sql(
        _SELECT + " WHERE project = {project:String} AND input_fingerprint = {fp:String}"
        " AND day >= {since:Date} GROUP BY project, input_fingerprint"
    )
    rows = query_rows(store.client, sql, params)
    if not rows:
        return FingerprintStats(project=project, fingerprint=fingerprint)
    if not classify:
        return _stats(rows[0])
    return _with_dependencies(store, project, rows[:1])[0]


def fingerprint_failures(store: EventStore, project: str, fingerprint: str) -> int:
    """Failed attempts of this input so far: the number the "failed ≥ 3 times" rule reads."""
    return fingerprint_stats(store, project, fingerprint, classify=False).failures


def top_failing_fingerprints(
    store: EventStore, project: str, *, since: date | None = None, min_failures: int = 1, limit: int = 50
) -> list[FingerprintStats]:
    """Fingerprints of ``project`` with the most failed attempts (the lookup page's list)."""
    params: dict[str, Any] = {
        "project": project,
        "since": since or date(1970, 1, 1),
        "min": max(0, int(min_failures)),
        "limit": max(0, int(limit)),
    }
    sql = store.sql(
        _SELECT + " WHERE project = {project:String} AND day >= {since:Date}"
        " GROUP BY project, input_fingerprint HAVING n_failures >= {min:UInt64}"
        " ORDER BY n_failures DESC, input_fingerprint LIMIT {limit:UInt32}"
    )
    return _with_dependencies(store, project, query_rows(store.client, sql, params))
