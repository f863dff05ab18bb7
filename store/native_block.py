"""Event rows → one ClickHouse ``Native`` block, encoded without a connection.

Encoding is pure CPU work, so it can run wherever there is a free core: in the
consumer itself, or on an ingest worker process while the consumer talks to Kafka and
ClickHouse. The column types come from :data:`~retrylens.store.event_table.EVENT_COLUMNS`,
the same list the table's DDL is built from; LowCardinality columns travel as plain
strings (ClickHouse converts them faster than Python builds their dictionaries).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clickhouse_connect.datatypes.registry import get_from_name
from clickhouse_connect.driver.insert import InsertContext
from clickhouse_connect.driver.transform import NativeTransform

from .event_table import EVENT_COLUMN_NAMES, INSERT_TYPE_NAMES

_TYPES = [get_from_name(name) for name in INSERT_TYPE_NAMES]
_NAMES = list(EVENT_COLUMN_NAMES)


def encode_native(rows: Sequence[Sequence[Any]]) -> bytes:
    """The rows (in :data:`EVENT_COLUMN_NAMES` order) as Native-format bytes."""
    if not rows:
        return b""
    context = InsertContext("events", _NAMES, _TYPES, data=list(zip(*rows, strict=True)), column_oriented=True)
    body = b"".join(NativeTransform.build_insert(context))
    # clickhouse-connect puts the HTTP statement line ("INSERT … FORMAT Native\n") first.
    return body[body.index(b"\n") + 1 :]
