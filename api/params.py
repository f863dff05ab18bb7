"""Query parameters shared by the read endpoints, validated before any SQL runs.

Filter values are bound as ClickHouse parameters by the analytics layer, so hostile text
is just a string that matches nothing; what is checked here is what the engine could not
take at all (times outside ``DateTime64``'s range, absurd limits), so that bad input is a
clear 422 and never a 500.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Any

from fastapi import Depends, Query
from fastapi.exceptions import RequestValidationError

from retrylens.analytics.filters import Slice

from .auth import project_access

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
MAX_FILTER_CHARS = 256

FilterText = Annotated[str | None, Query(max_length=MAX_FILTER_CHARS)]
Limit = Annotated[int, Query(ge=0, le=10_000, description="Rows to return.")]
Offset = Annotated[int, Query(ge=0, le=1_000_000, description="Rows to skip (pagination).")]


def invalid(where: tuple[str, ...], message: str) -> RequestValidationError:
    """A 422 in FastAPI's own error format, for checks a type annotation cannot express."""
    return RequestValidationError([{"loc": where, "msg": message, "type": "value_error"}])


def _utc(value: datetime | None, name: str) -> datetime | None:
    if value is None:
        return None
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        in_range = EARLIEST <= aware < LATEST
    except (OverflowError, ValueError):
        in_range = False
    if not in_range:
        raise invalid(("query", name), f"{name} must be between 1970-01-01 and 2200-01-01 (UTC)")
    return aware.astimezone(UTC)


def checked_date(value: date | None, name: str) -> date | None:
    if value is not None and not (date(1970, 1, 1) <= value < date(2149, 6, 6)):
        raise invalid(("query", name), f"{name} must be between 1970-01-01 and 2149-06-05")
    return value


def slice_params(
    project: str = Depends(project_access),
    agent: FilterText = None,
    phase: FilterText = None,
    error_type: FilterText = None,
    policy_version: FilterText = None,
    start: Annotated[datetime | None, Query(description="Inclusive, ISO-8601 (UTC if no offset).")] = None,
    end: Annotated[datetime | None, Query(description="Exclusive, ISO-8601 (UTC if no offset).")] = None,
) -> Slice:
    """The slice of one project the caller asked for."""
    s, e = _utc(start, "start"), _utc(end, "end")
    return Slice(project=project, agent=agent, phase=phase, error_type=error_type,
                 policy_version=policy_version, start=s, end=e)


def describe_slice(where: Slice) -> dict[str, Any]:
    return {k: v for k, v in {
        "project": where.project, "agent": where.agent, "phase": where.phase, "error_type": where.error_type,
        "policy_version": where.policy_version, "start": where.start, "end": where.end,
    }.items() if v is not None}
