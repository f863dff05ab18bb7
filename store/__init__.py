"""Where events live: ClickHouse (embedded chDB or a server), schema and exact reads.

The names below load on first use: the ingest workers and the row encoders import
submodules of this package (``event_table``, ``event_lines``) and must not pay for chDB,
pyarrow and clickhouse-connect, which only the processes that open a store need.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import connect
    from .events import EventStore, open_store

_LAZY = {"connect": ".client", "EventStore": ".events", "open_store": ".events"}

__all__ = ["EventStore", "connect", "open_store"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
