"""SQL text with identifiers filled in and values bound by the server.

Values from users (filters, ids, free text) never enter SQL text: they travel as
ClickHouse query parameters (``{name:Type}``). The only things substituted into the text
are identifiers that come from validated settings, through :func:`render`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from clickhouse_connect.driver.client import Client

if TYPE_CHECKING:  # pandas is imported by clickhouse-connect when a frame is asked for
    import pandas as pd

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_IDENT_SLOT = re.compile(r"\[\[(\w+)\]\]")


def quote_identifier(name: str) -> str:
    if not _IDENTIFIER.match(name):
        raise ValueError(f"not a safe SQL identifier: {name!r}")
    return f"`{name}`"


def render(template: str, **identifiers: str) -> str:
    """Fill ``[[name]]`` slots with quoted identifiers (``[[db]]`` → ```retrylens```).

    ``[[...]]`` keeps identifier slots visibly apart from ``{param:Type}`` value slots.
    """

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in identifiers:
            raise KeyError(f"no identifier given for [[{key}]]")
        return quote_identifier(identifiers[key])

    return _IDENT_SLOT.sub(fill, template)


def query_rows(client: Client, sql: str, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    result = client.query(sql, parameters=dict(parameters or {}))
    return [dict(zip(result.column_names, row, strict=True)) for row in result.result_rows]


def query_df(client: Client, sql: str, parameters: Mapping[str, Any] | None = None) -> pd.DataFrame:
    return client.query_df(sql, parameters=dict(parameters or {}))


def query_scalar(client: Client, sql: str, parameters: Mapping[str, Any] | None = None) -> Any:
    rows = client.query(sql, parameters=dict(parameters or {})).result_rows
    return rows[0][0] if rows else None
