"""Where events live: ClickHouse (embedded chDB or a server), schema and exact reads."""

from .client import connect
from .events import EventStore, open_store

__all__ = ["EventStore", "connect", "open_store"]
