"""Failure groups, like an issue tracker's: one group per normalised error message.

Messages are normalised in ClickHouse (timestamps, URLs, e-mails, UUIDs, quoted values,
paths, hex ids and numbers become placeholders; see :mod:`retrylens.store.schema`), and a group id is
the hash of (error type, normalised message). Rate-limit and quota failures are flagged
as noise so that the bug list is not buried under throttling. Everything reads the
``failure_groups_daily`` rollup, except each group's class (transient or permanent, caused
by a dependency or by the input; :mod:`.failure_classes`), which also reads how many
dependencies the group's inputs failed on from the events.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from retrylens.store import EventStore
from retrylens.store.schema import normalised_message_sql
from retrylens.store.sql import query_rows, query_scalar

from .failure_classes import Cause, Persistence, cause_of, persistence_of


@dataclass(frozen=True)
class FailureGroup:
    project: str
    group_id: str
    error_type: str
    pattern: str
    example_message: str
    is_noise: bool
    failures: int
    tasks: int
    first_seen: datetime
    last_seen: datetime
    example_tasks: list[str]
    #: Failures in the recent window and in the window before it; ``trend`` compares them.
    recent_failures: int = 0
    previous_failures: int = 0
    daily: list[tuple[date, int]] = field(default_factory=list)
    #: Most distinct dependencies one of the group's inputs failed on (with this failure).
    dependencies_per_input: int = 0

    @property
    def persistence(self) -> Persistence:
        """``transient`` (a retry can fix it) or ``permanent``, from the error type."""
        return persistence_of([self.error_type])

    @property
    def cause(self) -> Cause:
        """``dependency`` or ``input``: the history (one input failing on several
        dependencies → input), else the error type."""
        return cause_of([self.error_type], dependencies_per_input=self.dependencies_per_input)

    @property
    def trend(self) -> str:
        """``new``, ``rising``, ``falling``, ``steady`` or ``quiet``."""
        if self.recent_failures and not self.previous_failures:
            return "new"
        if not self.recent_failures:
            return "quiet"
        ratio = self.recent_failures / self.previous_failures
        return "rising" if ratio >= 1.5 else "falling" if ratio <= 0.67 else "steady"


def normalise_message(store: EventStore, message: str) -> str:
    """The normalised form of ``message`` (the same SQL the rollup uses)."""
    sql = f"SELECT {normalised_message_sql('{m:String}')}"
    return str(query_scalar(store.client, sql, {"m": message}))


#: Which projects a read covers: one project, a set of them (a key's projects), or ``None`` for all.
Projects = str | Collection[str] | None


def _scope(projects: Projects) -> dict[str, Any]:
    """Query parameters of the ``_IN_SCOPE`` condition for ``projects``."""
    if projects is None:
        return {"all_projects": 1, "projects": []}
    return {"all_projects": 0, "projects": [projects] if isinstance(projects, str) else sorted(projects)}


_IN_SCOPE = "({all_projects:UInt8} = 1 OR project IN {projects:Array(String)})"
#: A group per project: the same message in two projects is two groups (each with its own tasks).
_Key = tuple[str, int]


def failure_groups(
    store: EventStore,
    project: Projects,
    *,
    include_noise: bool = False,
    error_type: str | None = None,
    since: date | None = None,
    now: datetime | None = None,
    trend_days: int = 1,
    limit: int = 50,
    offset: int = 0,
) -> list[FailureGroup]:
    """Groups of ``project``, most failures first; noise only when ``include_noise``.

    ``project`` may be a set of projects or ``None`` (every project, ``retrylens groups`` without
    ``--project`` and the dashboard's "All projects"); a group stays within its project.
    ``trend_days`` sizes the two windows compared for the trend, ending at ``now``.
    """
    now = (now or datetime.now(UTC)).astimezone(UTC)
    recent_start = (now - timedelta(days=trend_days)).date()
    previous_start = (now - timedelta(days=2 * trend_days)).date()
    params: dict[str, Any] = {
        **_scope(project),
        "since": since or date(1970, 1, 1),
        "noise": 1 if include_noise else 0,
        "et": error_type or "",
        "recent": recent_start,
        "previous": previous_start,
        "limit": max(0, int(limit)),
        "offset": max(0, int(offset)),
    }
    sql = store.sql(
        "SELECT project, group_id, any(error_type) AS etype, any(pattern) AS pat, max(is_noise) AS noise,"
        " anyMerge(example_message) AS example, uniqExactMerge(failures) AS n_failures,"
        " uniqExactMerge(tasks) AS n_tasks,"
        " min(first_seen) AS first, max(last_seen) AS last,"
        " uniqExactMergeIf(failures, day >= {recent:Date}) AS recent_n,"
        " uniqExactMergeIf(failures, day >= {previous:Date} AND day < {recent:Date}) AS previous_n"
        " FROM [[db]].failure_groups_daily"
        f" WHERE {_IN_SCOPE} AND day >= {{since:Date}}"
        " GROUP BY project, group_id"
        " HAVING (noise = 0 OR {noise:UInt8} = 1) AND ({et:String} = '' OR etype = {et:String})"
        " ORDER BY n_failures DESC, project, group_id LIMIT {limit:UInt32} OFFSET {offset:UInt32}"
    )
    rows = query_rows(store.client, sql, params)
    keys = [(row["project"], int(row["group_id"])) for row in rows]
    daily = _daily(store, keys, params["since"])
    examples = _example_tasks(store, keys, params["since"])
    spread = _dependencies_per_input(store, keys, params["since"])
    groups = []
    for row, key in zip(rows, keys, strict=True):
        groups.append(
            FailureGroup(
                project=row["project"],
                group_id=f"{int(row['group_id']):016x}",
                error_type=row["etype"],
                pattern=row["pat"],
                example_message=row["example"],
                is_noise=bool(row["noise"]),
                failures=int(row["n_failures"]),
                tasks=int(row["n_tasks"]),
                first_seen=row["first"],
                last_seen=row["last"],
                example_tasks=examples.get(key, []),
                recent_failures=int(row["recent_n"]),
                previous_failures=int(row["previous_n"]),
                daily=daily.get(key, []),
                dependencies_per_input=spread.get(key, 0),
            )
        )
    return groups


def _keyed(keys: list[_Key], since: date) -> dict[str, Any]:
    """Parameters naming the groups ``keys`` (their projects and ids) since ``since``."""
    return {"projects": sorted({p for p, _ in keys}), "keys": list(keys), "since": since}


#: The (project, group id) pairs asked for; ``project IN`` first so the primary key prunes parts.
_IN_KEYS = "project IN {projects:Array(String)} AND (project, group_id) IN {keys:Array(Tuple(String, UInt64))}"


def _example_tasks(store: EventStore, keys: list[_Key], since: date) -> dict[_Key, list[str]]:
    """Up to five tasks per group, the most recently failing first (ties by task id).

    Read from the events themselves, in a defined order: the rollup's sampled examples
    (``groupUniqArray``) depend on how parts were merged, so two reads could differ.
    """
    if not keys:
        return {}
    sql = store.sql(
        "SELECT project, group_id, task_id FROM ("
        f" SELECT project, cityHash64(toString(error_type), {normalised_message_sql()}) AS group_id,"
        "  task_id, max(ts) AS last_failed"
        " FROM [[db]].events"
        " WHERE project IN {projects:Array(String)} AND kind = 'attempt_failed' AND toDate(ts) >= {since:Date}"
        f" GROUP BY project, group_id, task_id HAVING {_IN_KEYS})"
        " ORDER BY project, group_id, last_failed DESC, task_id LIMIT 5 BY project, group_id"
    )
    out: dict[_Key, list[str]] = {}
    for row in query_rows(store.client, sql, _keyed(keys, since)):
        out.setdefault((row["project"], int(row["group_id"])), []).append(row["task_id"])
    return out


def _dependencies_per_input(store: EventStore, keys: list[_Key], since: date) -> dict[_Key, int]:
    """Per group: the most distinct dependencies that one input fingerprint failed on."""
    if not keys:
        return {}
    sql = store.sql(
        "SELECT project, group_id, max(deps) AS spread FROM ("
        f" SELECT project, cityHash64(toString(error_type), {normalised_message_sql()}) AS group_id,"
        "  input_fingerprint, uniqExactIf(dependency, dependency != '') AS deps"
        " FROM [[db]].events"
        " WHERE project IN {projects:Array(String)} AND kind = 'attempt_failed' AND toDate(ts) >= {since:Date}"
        "  AND input_fingerprint != ''"
        f" GROUP BY project, group_id, input_fingerprint HAVING {_IN_KEYS})"
        " GROUP BY project, group_id"
    )
    rows = query_rows(store.client, sql, _keyed(keys, since))
    return {(row["project"], int(row["group_id"])): int(row["spread"]) for row in rows}


def _daily(store: EventStore, keys: list[_Key], since: date) -> dict[_Key, list[tuple[date, int]]]:
    if not keys:
        return {}
    sql = store.sql(
        "SELECT project, group_id, day, uniqExactMerge(failures) AS n FROM [[db]].failure_groups_daily"
        f" WHERE {_IN_KEYS} AND day >= {{since:Date}}"
        " GROUP BY project, group_id, day ORDER BY project, group_id, day"
    )
    out: dict[_Key, list[tuple[date, int]]] = {}
    for row in query_rows(store.client, sql, _keyed(keys, since)):
        out.setdefault((row["project"], int(row["group_id"])), []).append((row["day"], int(row["n"])))
    return out
