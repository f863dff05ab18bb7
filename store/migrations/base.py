"""Typed pieces that migrations are built from, single-server or cluster.

A migration states *what* it creates; :class:`MigrationContext` decides *how* for the
deployment: plain ``ReplacingMergeTree`` on one server or chDB, ``Replicated*`` engines
``ON CLUSTER`` plus a ``Distributed`` table on a cluster. Every statement is idempotent
(``IF NOT EXISTS`` / ``IF EXISTS``) so a half-applied migration can simply run again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from retrylens.store.sql import quote_identifier


@dataclass(frozen=True, kw_only=True)
class MigrationContext:
    database: str
    cluster: str = ""
    event_ttl_days: int = 395
    bulky_ttl_days: int = 30
    dedup_window: int = 10_000

    @property
    def db(self) -> str:
        return quote_identifier(self.database)

    @property
    def on_cluster(self) -> str:
        return f" ON CLUSTER {quote_identifier(self.cluster)}" if self.cluster else ""

    def storage_name(self, table: str) -> str:
        """The table that holds the data: ``<table>_local`` on a cluster, else ``<table>``."""
        return f"{table}_local" if self.cluster else table

    def table(self, table: str) -> str:
        """Fully-qualified name that queries and inserts use."""
        return f"{self.db}.{quote_identifier(table)}"

    def engine(self, family: str, physical_table: str, args: str = "") -> str:
        """``family`` (e.g. ``ReplacingMergeTree``) for ``physical_table``, replicated on a cluster."""
        if not self.cluster:
            return f"{family}({args})"
        path = f"'/clickhouse/tables/{{shard}}/{self.database}/{physical_table}', '{{replica}}'"
        return f"Replicated{family}({path}{', ' + args if args else ''})"

    def dedup_setting(self) -> str:
        name = "replicated_deduplication_window" if self.cluster else "non_replicated_deduplication_window"
        return f"{name} = {int(self.dedup_window)}"

    def distributed(self, table: str, sharding_key: str) -> list[str]:
        """On a cluster, the ``Distributed`` table named ``table`` over ``<table>_local``."""
        if not self.cluster:
            return []
        return [
            f"CREATE TABLE IF NOT EXISTS {self.table(table)}{self.on_cluster} AS "
            f"{self.table(self.storage_name(table))} ENGINE = Distributed("
            f"{quote_identifier(self.cluster)}, {self.db}, {quote_identifier(self.storage_name(table))}, "
            f"{sharding_key})"
        ]

    def drop(self, table: str) -> list[str]:
        names = [table, self.storage_name(table)] if self.cluster else [table]
        return [f"DROP TABLE IF EXISTS {self.table(name)}{self.on_cluster} SYNC" for name in names]


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    forwards: Callable[[MigrationContext], list[str]]
    backwards: Callable[[MigrationContext], list[str]]
