"""The ``store`` fixture's shortcut (a copy of a migrated template) equals running the migrations."""

from __future__ import annotations

import uuid

import pytest
from store_template import open_copied_store, schema_of

from retrylens.config import Settings
from retrylens.store import open_store
from retrylens.store.migrator import LEDGER

pytestmark = pytest.mark.clickhouse


def _own_database(settings: Settings) -> Settings:
    return settings.model_copy(update={"clickhouse_database": f"t_{uuid.uuid4().hex[:10]}"})


def test_a_copied_store_has_the_schema_and_ledger_of_a_migrated_one(settings: Settings) -> None:
    migrated = open_store(_own_database(settings))
    copied = open_copied_store(_own_database(settings))
    client = migrated.client

    def normalised(database: str) -> list[str]:
        return [statement.replace(f"{database}.", "<db>.") for statement in schema_of(client, database)]

    def ledger(database: str) -> list[tuple[int, str]]:
        return [(int(v), n) for v, n in client.query(f"SELECT version, name FROM {database}.{LEDGER} FINAL ORDER BY version").result_rows]

    first, second = migrated.ctx.database, copied.ctx.database
    try:
        assert len(normalised(first)) >= 20  # every table and view, not an empty read
        assert normalised(second) == normalised(first)
        assert ledger(second) == ledger(first) != []
    finally:
        for database in (first, second):
            client.command(f"DROP DATABASE IF EXISTS `{database}`")
