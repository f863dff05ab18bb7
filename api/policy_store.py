"""Versioned retry policies and kill switches in the store (tables of migration 0004).

A PUT never overwrites: it adds the next revision for (project, agent), validated by
:func:`retrylens.sdk.core.policy.parse_policy` — the very function agents use — so nothing an
agent would reject can be stored (strictly, as the OpenAPI document states it:
:mod:`.policy_body`). What an agent polls is the **effective** policy: its
own latest revision, else the project's default (agent ``''``), with the kill switches of
the project and of the agent applied. Its ETag is a hash of the served JSON, so any
change (new revision, switch flipped) is a new ETag and nothing else is.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from retrylens.sdk.core.policy import KillSwitch, RetryPolicy
from retrylens.store import EventStore
from retrylens.store.sql import query_rows, query_scalar

from .policy_body import validate_body

PROJECT_DEFAULT = ""


@dataclass(frozen=True)
class PolicyRecord:
    project: str
    agent: str
    revision: int
    policy: RetryPolicy
    created_at: datetime | None

    def summary(self) -> dict[str, Any]:
        return {"project": self.project, "agent": self.agent or None, "revision": self.revision,
                "policy_id": self.policy.id, "policy_version": self.policy.version,
                "created_at": self.created_at.isoformat() if self.created_at else None}

    def as_dict(self) -> dict[str, Any]:
        return {**self.summary(), "policy": canonical(self.policy.model_dump(mode="json"))}


@dataclass(frozen=True)
class KillState:
    project: bool
    agents: frozenset[str]
    reasons: dict[str, str]

    def as_dict(self) -> dict[str, Any]:
        return {"project": self.project, "agents": sorted(self.agents), "reasons": self.reasons}


@dataclass(frozen=True)
class EffectivePolicy:
    body: dict[str, Any]
    etag: str
    revision: int | None
    source: str  # "agent", "project" or "kill_switch"


def canonical(value: Any) -> Any:
    """Sets serialise as lists in hash order; sort them so the JSON (and its ETag) is stable."""
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [canonical(v) for v in value]
        return sorted(items) if all(isinstance(v, str) for v in items) else items
    return value


class PolicyStore:
    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._lock = threading.Lock()

    def put(self, project: str, agent: str, data: Any) -> PolicyRecord:
        """Validate and store the next revision; raises ``PolicyError`` naming the bad field.

        A policy without a ``version`` gets its revision number as version, so events
        carry a version that points back to the stored revision.
        """
        policy = validate_body(data, source=f"policy {project}/{agent or '*'}")
        explicit_version = isinstance(data, dict) and "version" in (data.get("policy", data) or {})
        with self._lock:
            revision = int(query_scalar(
                self.store.client,
                self.store.sql("SELECT max(revision) FROM [[db]].retry_policies "
                               "WHERE project = {p:String} AND agent = {a:String}"),
                {"p": project, "a": agent}) or 0) + 1
            if not explicit_version:
                policy = policy.model_copy(update={"version": str(revision)})
            self.store.client.insert(
                f"{self.store.database}.retry_policies",
                [[project, agent, revision, orjson.dumps(policy.model_dump(mode="json")).decode()]],
                column_names=["project", "agent", "revision", "body"],
            )
        return PolicyRecord(project, agent, revision, policy, None)

    def _records(self, project: str, agent: str | None, *, limit: int, latest_only: bool) -> list[PolicyRecord]:
        where = "project = {p:String}" + (" AND agent = {a:String}" if agent is not None else "")
        if latest_only:
            sql = ("SELECT project, agent, max(revision) AS rev, argMax(body, revision) AS doc,"
                   " argMax(created_at, revision) AS created FROM [[db]].retry_policies FINAL"
                   f" WHERE {where} GROUP BY project, agent ORDER BY agent LIMIT {{n:UInt32}}")
        else:
            sql = ("SELECT project, agent, revision AS rev, body AS doc, created_at AS created"
                   f" FROM [[db]].retry_policies FINAL WHERE {where}"
                   " ORDER BY agent, revision DESC LIMIT {n:UInt32}")
        rows = query_rows(self.store.client, self.store.sql(sql), {"p": project, "a": agent or "", "n": limit})
        return [PolicyRecord(r["project"], r["agent"], int(r["rev"]),
                             RetryPolicy.model_validate(orjson.loads(r["doc"])), r["created"]) for r in rows]

    def latest(self, project: str, agent: str) -> PolicyRecord | None:
        found = self._records(project, agent, limit=1, latest_only=True)
        return found[0] if found else None

    def history(self, project: str, agent: str, *, limit: int = 50) -> list[PolicyRecord]:
        return self._records(project, agent, limit=limit, latest_only=False)

    def current(self, project: str) -> list[PolicyRecord]:
        """The latest revision of the project default and of every agent."""
        return self._records(project, None, limit=10_000, latest_only=True)

    def set_kill(self, project: str, agent: str, enabled: bool, reason: str = "") -> KillState:
        self.store.client.insert(
            f"{self.store.database}.kill_switches",
            [[project, agent, enabled, reason, time.time_ns()]],
            column_names=["project", "agent", "enabled", "reason", "revision"],
        )
        return self.kill_state(project)

    def kill_state(self, project: str) -> KillState:
        rows = query_rows(
            self.store.client,
            self.store.sql("SELECT agent, enabled, reason FROM [[db]].kill_switches FINAL "
                           "WHERE project = {p:String} AND enabled"),
            {"p": project},
        )
        agents = frozenset(r["agent"] for r in rows if r["agent"] != PROJECT_DEFAULT)
        return KillState(any(r["agent"] == PROJECT_DEFAULT for r in rows), agents,
                         {(r["agent"] or "*"): r["reason"] for r in rows})

    def effective(self, project: str, agent: str) -> EffectivePolicy | None:
        """What the agent should run now; ``None`` when nothing is configured for it."""
        record = self.latest(project, agent)
        source = "agent"
        if record is None:
            record = self.latest(project, PROJECT_DEFAULT)
            source = "project"
        kill = self.kill_state(project)
        killed = kill.project or agent in kill.agents
        if record is None and not killed:
            return None
        policy = record.policy if record is not None else RetryPolicy()
        if killed:
            switch = KillSwitch(project=policy.kill_switch.project or kill.project,
                                agents=policy.kill_switch.agents | ({agent} if agent in kill.agents else set()))
            policy = policy.model_copy(update={"kill_switch": switch, "version": f"{policy.version[:59]}+kill"})
            source = source if record is not None else "kill_switch"
        body = canonical(policy.model_dump(mode="json"))
        digest = hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()[:20]
        return EffectivePolicy(body, f'"{digest}"', record.revision if record else None, source)
