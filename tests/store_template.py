"""A migrated store per test for the price of a schema copy.

Every test that takes the ``store`` fixture needs a database of its own with every
migration applied. Running the ten migrations costs about 75 engine round trips (tables,
column additions, backfills of empty tables, views) and was a fifth of the suite's time.
So each worker process migrates one template database with the real migrator, once per
migration context, and each test's database is built from the template's own
``CREATE`` statements plus a copy of its migration ledger. The test's store is then opened
with :func:`~retrylens.store.open_store` as usual: the real migrator finds every migration
applied, exactly as when a deployed store is reopened.

``tests/foundation/test_store_template.py`` checks that a copy has the same tables, views,
engines and ledger as a freshly migrated store, so the shortcut cannot drift from the
migrations.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from clickhouse_connect.driver.client import Client

from retrylens.config import Settings
from retrylens.store import EventStore, open_store
from retrylens.store.client import connect
from retrylens.store.migrations.base import MigrationContext
from retrylens.store.migrator import LEDGER, context_from
from retrylens.store.sql import quote_identifier

# (dsn, context without its database) -> (template database, its CREATE statements)
_templates: dict[tuple[str, MigrationContext], tuple[str, list[str]]] = {}


def schema_of(client: Client, database: str) -> list[str]:
    """The ``CREATE`` statements of ``database``: tables first, then the views that read them."""
    rows = client.query(
        "SELECT engine = 'MaterializedView' AS is_view, name, create_table_query FROM system.tables "
        "WHERE database = {db:String}",
        parameters={"db": database},
    ).result_rows
    return [statement for _, _, statement in sorted(rows)]


def _retarget(statement: str, source: str, target: str) -> str:
    out = statement.replace(f"`{source}`.", f"`{target}`.").replace(f"{source}.", f"{target}.")
    assert source not in out, f"the copy would still refer to the template database: {out}"
    return out


def _template(settings: Settings) -> tuple[str, list[str]]:
    key = (settings.effective_dsn, replace(context_from(settings), database=""))
    if key not in _templates:
        name = f"template_{uuid.uuid4().hex[:10]}"
        template = open_store(settings.model_copy(update={"clickhouse_database": name}))
        _templates[key] = (name, schema_of(template.client, name))
    return _templates[key]


def open_copied_store(settings: Settings) -> EventStore:
    """``open_store(settings)`` on a new database built from this process's migrated template."""
    if not settings.is_embedded_store or settings.clickhouse_cluster:
        return open_store(settings)
    source, statements = _template(settings)
    target = settings.clickhouse_database
    client = connect(settings)
    client.command(f"CREATE DATABASE {quote_identifier(target)}")
    for statement in statements:
        client.command(_retarget(statement, source, target))
    client.command(
        f"INSERT INTO {quote_identifier(target)}.{quote_identifier(LEDGER)} "
        f"SELECT * FROM {quote_identifier(source)}.{quote_identifier(LEDGER)}"
    )
    return open_store(settings)
