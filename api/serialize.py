"""Analytics results → plain JSON values, the one conversion every read endpoint uses.

The analytics layer returns dataclasses, datetimes, UUIDs and numbers that may be NaN
(ClickHouse's answer for "no data"); JSON has no NaN, so it becomes ``null`` here rather
than a 500 from the encoder. Datetimes become ISO-8601 strings in UTC.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any

import orjson

#: Event columns stored as JSON text; a task's timeline returns them as objects.
JSON_COLUMNS = ("input_features", "context_snapshot", "side_effects")


def plain(value: Any) -> Any:
    """``value`` as JSON-ready dicts, lists, strings, numbers, booleans and ``None``."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in ("trend", "failure_rate", "task_failure_rate", "looping", "persistence", "cause"):
            if hasattr(type(value), name) and isinstance(getattr(type(value), name), property):
                data[name] = plain(getattr(value, name))
        return data
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Enum):
        return plain(value.value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return plain(float(value))
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if hasattr(value, "item"):  # numpy scalars
        return plain(value.item())
    return str(value)


def event_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """One stored event for a task timeline: JSON text columns decoded into objects."""
    out = plain(row)
    for name in JSON_COLUMNS:
        text = row.get(name)
        if isinstance(text, str) and text:
            try:
                out[name] = orjson.loads(text)
            except orjson.JSONDecodeError:
                out[name] = text
        else:
            out[name] = None if name == "context_snapshot" else ([] if name == "side_effects" else {})
    return out
