"""The policy a report compares against: the one that produced the history, not a default.

A candidate's changes ("``budget.max_retries 20 → 7``") and its differences only mean
something against the policy the log ran under. Every event names its
``policy_id@policy_version``; the policy store (``retry_policies``, what ``PUT
/v1/policies`` writes) holds the documents behind those names. Without ``--live`` the
report takes the stored revision the events name (the version most tasks ran under when
there are several); where the store holds none of them, it falls back to the policy the
caller gives (the environment's, or the SDK defaults) and says so. It also says when the
history ran under several versions, and when a ``--live`` policy is not the one the events
name.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from retrylens.sdk.core.policy import RetryPolicy, parse_policy
from retrylens.store import EventStore
from retrylens.store.sql import query_rows

from .history import History

_STORED = """
SELECT project, agent, revision, body FROM [[db]].retry_policies FINAL
WHERE ({project:String} = '' OR project = {project:String})
ORDER BY revision DESC
"""


@dataclass
class Baseline:
    """The live policy of a report, where it came from, and what the reader must know about it."""

    policy: RetryPolicy
    source: str                     # "--live", "policy store", or "fallback"
    history_policies: list[str]
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"policy": f"{self.policy.id}@{self.policy.version}", "source": self.source,
                "history_policies": self.history_policies, "warnings": self.warnings}


def tasks_by_policy(h: History) -> Counter[str]:
    """How many tasks ran under each ``id@version`` (a task's first attempt names it)."""
    return Counter(str(n) for n in (h.task_policies if h.task_policies is not None else ()))


def stored_policies(store: EventStore, project: str | None) -> list[RetryPolicy]:
    """Every stored revision (newest first) of ``project`` (all projects when none)."""
    rows = query_rows(store.client, store.sql(_STORED), {"project": project or ""})
    return [parse_policy(orjson.loads(r["body"]), source="policy store") for r in rows]


def resolve_baseline(h: History, *, given: RetryPolicy | None, fallback: RetryPolicy,
                     stored: list[RetryPolicy]) -> Baseline:
    """The live policy to compare with: ``given`` (``--live``), else the stored policy the
    events name, else ``fallback``; with a warning wherever the reader could be misled."""
    counts = tasks_by_policy(h)
    named = [name for name, _ in counts.most_common()] or list(h.policies)
    warnings = []
    if len(named) > 1:
        shares = ", ".join(f"{n} ({counts[n]} tasks)" for n in named) if counts else ", ".join(named)
        warnings.append(f"the history ran under {len(named)} policy versions: {shares}; the estimates mix them")
    if given is not None:
        name = f"{given.id}@{given.version}"
        if named and name not in named:
            warnings.append(f"the --live policy {name} is not the one the events name ({', '.join(named)}): the "
                            "changes and differences are against {name}, not the policy that produced the history"
                            .replace("{name}", name))
        return Baseline(given, "--live", named, warnings)
    by_name = {f"{p.id}@{p.version}": p for p in reversed(stored)}
    for name in named:
        if name in by_name:
            if len(named) > 1:
                warnings.append(f"compared against {name}, the version most tasks ran under")
            return Baseline(by_name[name], "policy store", named, warnings)
    fallback_name = f"{fallback.id}@{fallback.version}"
    if named and fallback_name not in named:
        warnings.append(f"the policy store holds none of the versions the events name ({', '.join(named)}); "
                        f"compared against {fallback_name} (the environment's policy or the SDK defaults) "
                        "instead, so a candidate's changes are described against that policy, not the one that "
                        "ran: pass --live with the policy that produced the history")
    return Baseline(fallback, "fallback", named, warnings)
