"""Applies numbered migrations once each and records them in the database.

Re-running is safe: applied versions are skipped, and every statement is idempotent, so
a crash between a migration's statements and its record only means the statements run
again next time.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from datetime import UTC, datetime

from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.exceptions import ClickHouseError

from retrylens.config import Settings
from retrylens.errors import MigrationError

from .migrations.base import Migration, MigrationContext

_MODULE_NAME = re.compile(r"^m(\d{4})_\w+$")
#: Where the numbered migrations live; imported by name at discovery, so that this module
#: imports no migration (and not its own package's ``__init__``) when it is loaded.
MIGRATIONS_PACKAGE = "retrylens.store.migrations"
LEDGER = "schema_migrations"


def discover() -> list[Migration]:
    """Every ``mNNNN_*`` module's MIGRATION, ordered by version (numbers must be unique)."""
    migrations_package = importlib.import_module(MIGRATIONS_PACKAGE)
    found: dict[int, Migration] = {}
    for module_info in pkgutil.iter_modules(migrations_package.__path__):
        match = _MODULE_NAME.match(module_info.name)
        if not match:
            continue
        module = importlib.import_module(f"{migrations_package.__name__}.{module_info.name}")
        migration: Migration = module.MIGRATION
        if migration.version != int(match.group(1)):
            raise MigrationError(f"{module_info.name} declares version {migration.version}")
        if migration.version in found:
            raise MigrationError(f"two migrations are numbered {migration.version}")
        found[migration.version] = migration
    return [found[v] for v in sorted(found)]


def context_from(settings: Settings) -> MigrationContext:
    return MigrationContext(
        database=settings.clickhouse_database,
        cluster=settings.clickhouse_cluster,
        event_ttl_days=settings.event_ttl_days,
        bulky_ttl_days=settings.bulky_ttl_days,
        dedup_window=settings.dedup_window,
    )


class Migrator:
    def __init__(self, client: Client, ctx: MigrationContext) -> None:
        self._client = client
        self._ctx = ctx

    def _bootstrap(self) -> None:
        ctx = self._ctx
        self._run(f"CREATE DATABASE IF NOT EXISTS {ctx.db}{ctx.on_cluster}", "bootstrap")
        self._run(
            f"CREATE TABLE IF NOT EXISTS {ctx.table(LEDGER)}{ctx.on_cluster} "
            "(version UInt32, name String, applied_at DateTime64(3, 'UTC')) "
            f"ENGINE = {ctx.engine('ReplacingMergeTree', LEDGER)} ORDER BY version",
            "bootstrap",
        )

    def applied_versions(self) -> set[int]:
        self._bootstrap()
        rows = self._client.query(f"SELECT version FROM {self._ctx.table(LEDGER)} FINAL").result_rows
        return {int(row[0]) for row in rows}

    def pending(self) -> list[Migration]:
        applied = self.applied_versions()
        return [m for m in discover() if m.version not in applied]

    def apply(self) -> list[Migration]:
        """Apply every pending migration in order; returns those applied."""
        done = []
        for migration in self.pending():
            for statement in migration.forwards(self._ctx):
                self._run(statement, f"{migration.version:04d}_{migration.name}")
            self._client.insert(
                f"{self._ctx.database}.{LEDGER}",
                [[migration.version, migration.name, datetime.now(UTC)]],
                column_names=["version", "name", "applied_at"],
            )
            done.append(migration)
        return done

    def rollback(self, to_version: int) -> list[Migration]:
        """Undo applied migrations newer than ``to_version``, newest first."""
        applied = self.applied_versions()
        undone = []
        for migration in reversed(discover()):
            if migration.version <= to_version or migration.version not in applied:
                continue
            for statement in migration.backwards(self._ctx):
                self._run(statement, f"{migration.version:04d}_{migration.name} (backwards)")
            self._client.command(
                f"DELETE FROM {self._ctx.table(LEDGER)} WHERE version = {{v:UInt32}}",
                parameters={"v": migration.version},
            )
            undone.append(migration)
        return undone

    def _run(self, statement: str, label: str) -> None:
        try:
            self._client.command(statement)
        except ClickHouseError as exc:
            raise MigrationError(f"migration {label} failed: {exc}\nstatement:\n{statement}") from exc


def render_all(ctx: MigrationContext) -> list[str]:
    """Every forwards statement, for review or for applying by hand on a cluster."""
    return [statement for m in discover() for statement in m.forwards(ctx)]
