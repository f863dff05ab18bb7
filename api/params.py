"""Query parameters shared by the read endpoints, validated before any SQL runs.

Filter values are bound as ClickHouse parameters by the analytics layer, so hostile text
is just a string that matches nothing; what is checked here is what the engine could not
take at all (times outside ``DateTime64``'s range, absurd limits), so that bad input is a
clear 422 and never a 500. Every check is in the declared parameter (range, length,
pattern), so the OpenAPI document states exactly what is accepted.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Any

from fastapi import Depends, Query
from pydantic import TypeAdapter

from retrylens.analytics.filters import Slice

from .auth import project_access
from .iso_patterns import DATE_PATTERN, DATETIME_PATTERN

MAX_FILTER_CHARS = 256
_DATETIME = TypeAdapter(datetime)

FilterText = Annotated[str | None, Query(max_length=MAX_FILTER_CHARS)]
Limit = Annotated[int, Query(ge=0, le=10_000, description="Rows to return.")]
Offset = Annotated[int, Query(ge=0, le=1_000_000, description="Rows to skip (pagination).")]
#: a date-time query value; the pattern states its whole grammar and range (see :mod:`.iso_patterns`)
TimeText = Annotated[str | None, Query(
    pattern=DATETIME_PATTERN,
    description="ISO-8601 `YYYY-MM-DD[Thh:mm[:ss[.fraction]][Z|±hh:mm]]`, years 1970-2199; "
    "UTC if no offset, midnight if no time.",
    examples=["2026-01-31T12:00:00Z"])]
#: a calendar-day query value, 1970-01-01 to 2149-06-05 (ClickHouse ``Date``)
Since = Annotated[str | None, Query(
    pattern=DATE_PATTERN, json_schema_extra={"format": "date"},
    description="First day included, `YYYY-MM-DD` from 1970-01-01 to 2149-06-05.", examples=["2026-01-31"])]


def parse_time(text: str | None) -> datetime | None:
    """A :data:`TimeText` value as an aware UTC datetime (no offset means UTC).

    The pattern admitted only real dates of 1970-2199, so the instant lies within a day
    of that range, well inside what ``DateTime64`` holds.
    """
    if text is None:
        return None
    value = _DATETIME.validate_python(text)
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC)


def parse_date(text: str | None) -> date | None:
    """A :data:`Since` value (the pattern admitted only real days in range)."""
    return None if text is None else date.fromisoformat(text)


def slice_params(
    project: str = Depends(project_access),
    agent: FilterText = None,
    phase: FilterText = None,
    error_type: FilterText = None,
    policy_version: FilterText = None,
    start: TimeText = None,
    end: TimeText = None,
) -> Slice:
    """The slice of one project the caller asked for (``start`` inclusive, ``end`` exclusive)."""
    return Slice(project=project, agent=agent, phase=phase, error_type=error_type,
                 policy_version=policy_version, start=parse_time(start), end=parse_time(end))


def describe_slice(where: Slice) -> dict[str, Any]:
    return {k: v for k, v in {
        "project": where.project, "agent": where.agent, "phase": where.phase, "error_type": where.error_type,
        "policy_version": where.policy_version, "start": where.start, "end": where.end,
    }.items() if v is not None}
