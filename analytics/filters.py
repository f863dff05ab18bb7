"""The slice every analytics query accepts, turned into a WHERE clause with bound values.

A :class:`Slice` names the dimensions operators filter by (project, agent, phase, error
type, policy version, time range). Its values never enter SQL text: :meth:`Slice.where`
returns a clause made of ``{name:Type}`` slots and the matching parameter dict, so a
filter value such as ``x' OR 1=1 --`` is just a string that matches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

#: The slice dimensions, their ``events`` column and the rollup column of the same name.
DIMENSIONS: tuple[str, ...] = ("project", "agent_name", "phase", "error_type", "policy_version")


class Bucket(StrEnum):
    """Time-bucket sizes for trends. The rollups' finest level is 5 minutes, so every size is
    exact (p95s within 1 %, see :mod:`.histogram`); hourly and daily levels serve the larger ones."""

    FIVE_MINUTES = "5m"
    HOUR = "1h"
    DAY = "1d"
    WEEK = "1w"

    @property
    def seconds(self) -> int:
        return {"5m": 300, "1h": 3600, "1d": 86_400, "1w": 604_800}[self.value]


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


@dataclass(frozen=True, kw_only=True)
class Slice:
    """Which events a query covers; ``None`` means "any". ``start`` inclusive, ``end`` exclusive.

    ``agent`` filters ``agent_name``. Naive datetimes are taken as UTC. ``projects`` keeps the
    rows of any of those projects (the fleet a key may read; empty keeps none).
    """

    project: str | None = None
    projects: tuple[str, ...] | None = None
    agent: str | None = None
    phase: str | None = None
    error_type: str | None = None
    policy_version: str | None = None
    start: datetime | None = None
    end: datetime | None = None

    def __post_init__(self) -> None:
        if self.projects is not None:
            object.__setattr__(self, "projects", tuple(sorted(set(self.projects))))
        object.__setattr__(self, "start", _utc(self.start))
        object.__setattr__(self, "end", _utc(self.end))

    def with_(self, **changes: Any) -> Slice:
        return replace(self, **changes)

    def values(self) -> dict[str, str | None]:
        """Dimension column → filter value."""
        return {
            "project": self.project,
            "agent_name": self.agent,
            "phase": self.phase,
            "error_type": self.error_type,
            "policy_version": self.policy_version,
        }

    def where(self, *, time_column: str = "ts", prefix: str = "f_") -> tuple[str, dict[str, Any]]:
        """``(clause, parameters)``; the clause is ``1`` when nothing is filtered.

        ``time_column`` is the column compared with ``start``/``end`` (``bucket`` on rollups).
        """
        parts: list[str] = []
        params: dict[str, Any] = {}
        for column, value in self.values().items():
            if value is not None:
                parts.append(f"{column} = {{{prefix}{column}:String}}")
                params[f"{prefix}{column}"] = value
        if self.projects is not None:
            parts.append(f"project IN {{{prefix}projects:Array(String)}}")
            params[f"{prefix}projects"] = list(self.projects)
        if self.start is not None:
            parts.append(f"{time_column} >= {{{prefix}start:DateTime64(3, 'UTC')}}")
            params[f"{prefix}start"] = self.start
        if self.end is not None:
            parts.append(f"{time_column} < {{{prefix}end:DateTime64(3, 'UTC')}}")
            params[f"{prefix}end"] = self.end
        return (" AND ".join(parts) or "1"), params


def bucket_of(value: str | Bucket) -> Bucket:
    """A :class:`Bucket` from its name; anything else is a ``ValueError`` naming the choices."""
    try:
        return Bucket(value)
    except ValueError:
        choices = ", ".join(b.value for b in Bucket)
        raise ValueError(f"unknown time bucket {value!r}; choose one of {choices}") from None


def dimension_of(value: str) -> str:
    """A slice dimension by name (``agent`` is accepted for ``agent_name``)."""
    name = "agent_name" if value == "agent" else value
    if name not in DIMENSIONS:
        raise ValueError(f"unknown dimension {value!r}; choose one of {', '.join(DIMENSIONS)}")
    return name
