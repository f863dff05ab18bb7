"""Released migrations are frozen; readers take the live schema from one module.

Why: a database migrated by old code must equal one migrated by new code, so a released
migration's SQL may never change (snuba's rule for its migrations), and a migration that
imported definitions from another migration or from the live schema would change whenever
those did. These tests hold every migration to the SQL recorded before the migrations were
made self-contained (``tests/fixtures/migration_sql/statements.json``), check the imports
that would let a migration drift, and hold the live schema module to the tables the
migrations build.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path

import pytest
from import_graph import cycles, import_graph
from source_trees import trees

from retrylens.analytics.rollups import open_select as live_open_select
from retrylens.store import EventStore, schema
from retrylens.store.migrations.base import MigrationContext
from retrylens.store.migrator import LEDGER, discover

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "migration_sql"
_spec = importlib.util.spec_from_file_location("migration_sql_capture", FIXTURES / "capture.py")
assert _spec is not None and _spec.loader is not None
_capture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_capture)
#: the deployments the fixture was recorded for
CONTEXTS: dict[str, MigrationContext] = _capture.CONTEXTS

RECORDED: dict[str, dict[str, dict[str, list[str]]]] = json.loads((FIXTURES / "statements.json").read_text())


def test_every_migration_is_recorded_and_every_recorded_migration_still_exists() -> None:
    names = [f"{m.version:04d}_{m.name}" for m in discover()]
    for label in CONTEXTS:
        assert sorted(RECORDED[label]) == names, "a released migration was renamed or removed, or a new one is not recorded"


@pytest.mark.parametrize("label", sorted(CONTEXTS))
@pytest.mark.parametrize("migration", discover(), ids=lambda m: f"{m.version:04d}_{m.name}")
def test_migration_emits_exactly_the_recorded_statements(label, migration) -> None:
    ctx = CONTEXTS[label]
    recorded = RECORDED[label][f"{migration.version:04d}_{migration.name}"]
    assert migration.forwards(ctx) == recorded["forwards"]
    assert migration.backwards(ctx) == recorded["backwards"]


# ---------------------------------------------------------------------------------------------
# Imports, by AST: what would let a migration drift, or a reader depend on one.

#: import name of each top-level source folder (pyproject's package-dir)
PACKAGE_DIRS: dict[str, str] = {
    "retrylens": "retrylens", "retrylens.schemas": "schemas", "retrylens.ingest": "ingest",
    "retrylens.store": "store", "retrylens.analytics": "analytics", "retrylens.sdk": "sdk",
    "retrylens.simulation": "simulation", "retrylens.api": "api", "retrylens.dashboard": "dashboard",
    "retrylens.evaluation": "evaluation",
}
MIGRATIONS_PACKAGE = "retrylens.store.migrations"
READER_PACKAGES = ("retrylens.analytics", "retrylens.api", "retrylens.dashboard", "retrylens.evaluation",
                   "retrylens.ingest", "retrylens.sdk", "retrylens.simulation", "retrylens.cli")
MIGRATION_MODULE = re.compile(rf"^{re.escape(MIGRATIONS_PACKAGE)}\.m\d{{4}}_\w+$")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join((package, *parts))
            found.setdefault(name, path)
    return found


MODULES = _modules()


def _imports(name: str, *, top_level_only: bool = False) -> set[str]:
    """Modules ``name`` imports. ``from X import y`` imports ``X`` (it runs ``X``'s ``__init__`` and
    reads its namespace: ``from . import y`` in a submodule imports its own package) and also
    ``X.y`` when that is a module."""
    path = MODULES[name]
    tree = trees(MODULES.values())[path]  # all at once: one child interpreter
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes: list[ast.AST] = []
    if top_level_only:
        pending: list[ast.AST] = list(tree.body)
        while pending:
            node = pending.pop()
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, (ast.If, ast.Try)):
                pending.extend(ast.iter_child_nodes(node))
            nodes.append(node)
    else:
        nodes = list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in MODULES)
    return found


MIGRATION_FILES = sorted(n for n in MODULES if MIGRATION_MODULE.match(n))


def test_the_migration_modules_are_found() -> None:
    assert [n.rpartition(".")[2] for n in MIGRATION_FILES] == [
        f"m{m.version:04d}_{m.name}" for m in discover()
    ]


@pytest.mark.parametrize("name", MIGRATION_FILES)
def test_a_migration_imports_only_the_typed_operations(name: str) -> None:
    ours = {i for i in _imports(name) if i.startswith("retrylens")}
    assert ours <= {f"{MIGRATIONS_PACKAGE}.base"}, f"{name} imports {sorted(ours)}: inline what it needs"


def test_the_migration_base_and_package_import_no_migration_schema_or_reader() -> None:
    for name in (MIGRATIONS_PACKAGE, f"{MIGRATIONS_PACKAGE}.base"):
        ours = {i for i in _imports(name) if i.startswith("retrylens")}
        assert ours <= {"retrylens.store.sql"}, f"{name} imports {sorted(ours)}"


def test_nothing_but_the_migrator_imports_a_migration() -> None:
    offenders = {
        name: sorted(i for i in _imports(name) if MIGRATION_MODULE.match(i))
        for name in MODULES
        if not name.startswith(f"{MIGRATIONS_PACKAGE}.") and name != "retrylens.store.migrator"
    }
    assert {n: i for n, i in offenders.items() if i} == {}


def test_readers_take_the_schema_from_the_live_module() -> None:
    """The readers named in the brief of issue 11 import the schema module (and nothing of the migrations)."""
    readers = ["failure_groups", "rollups", "seal_sql", "seal_publish", "sealing", "rollup_query", "histogram"]
    for reader in readers:
        imported = _imports(f"retrylens.analytics.{reader}")
        assert "retrylens.store.schema" in imported, reader
        assert not any(i.startswith(MIGRATIONS_PACKAGE) for i in imported), reader
    assert all(not n.startswith(READER_PACKAGES) or not any(
        i.startswith(MIGRATIONS_PACKAGE + ".m") for i in _imports(n)) for n in MODULES)


def test_the_store_package_has_no_import_cycle() -> None:
    """``retrylens.store`` may re-export from its submodules; none may import it back."""
    assert cycles(import_graph("retrylens.store")) == []


# ---------------------------------------------------------------------------------------------
# The live schema against a real migrated store.


def _normalised_type(kind: str) -> str:
    # system.columns names the aggregate function's state version (``AggregateFunction(1, maxMap, …)``)
    return re.sub(r"AggregateFunction\(\d+, ", "AggregateFunction(", kind)


@pytest.mark.clickhouse
def test_the_live_schema_states_every_table_the_migrations_build(store: EventStore) -> None:
    rows = store.client.query(
        "SELECT name, engine FROM system.tables WHERE database = {db:String}", parameters={"db": store.database}
    ).result_rows
    views = {name for name, engine in rows if engine == "MaterializedView"}
    tables = {name for name, engine in rows if engine != "MaterializedView"}
    assert tables == set(schema.TABLES)
    assert views == set(schema.VIEWS)
    assert schema.MIGRATIONS_LEDGER == LEDGER
    for name, table in schema.TABLES.items():
        columns = store.client.query(
            "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {t:String} ORDER BY position",
            parameters={"db": store.database, "t": name},
        ).result_rows
        assert [(n, _normalised_type(k)) for n, k in columns] == list(table.columns), name
        ddl = store.client.query(f"SHOW CREATE TABLE `{store.database}`.`{name}`").result_rows[0][0]
        lines = ddl.splitlines()
        assert f"ENGINE = {table.engine}" in lines, (name, ddl)
        assert f"ORDER BY {table.order_by}" in lines, (name, ddl)
        partition = [line for line in lines if line.startswith("PARTITION BY")]
        assert partition == ([f"PARTITION BY {table.partition_by}"] if table.partition_by else []), name
    for view, target in schema.VIEWS.items():
        ddl = store.client.query(f"SHOW CREATE TABLE `{store.database}`.`{view}`").result_rows[0][0]
        assert f" TO {store.database}.{target}" in ddl.splitlines()[0], ddl


def _newest_view_statement(ctx: MigrationContext, view: str) -> str:
    prefix = f"CREATE MATERIALIZED VIEW IF NOT EXISTS {ctx.table(view)}"
    return [s for m in discover() for s in m.forwards(ctx) if s.startswith(prefix)][-1]


@pytest.mark.parametrize("label", sorted(CONTEXTS))
def test_the_live_selects_are_what_the_newest_migration_made_the_views_compute(label: str) -> None:
    ctx = CONTEXTS[label]
    events = ctx.table(ctx.storage_name(schema.EVENTS))
    live = {
        schema.OPEN_VIEW: live_open_select(events),
        schema.FINGERPRINT_DAILY_VIEW: schema.fingerprint_select(events),
        schema.FAILURE_GROUPS_DAILY_VIEW: schema.groups_select(events),
    }
    for view, select in live.items():
        statement = _newest_view_statement(ctx, view)
        assert statement.endswith(f"\nAS {select}"), view
        assert f" TO {ctx.table(ctx.storage_name(schema.VIEWS[view]))}\n" in statement, view
