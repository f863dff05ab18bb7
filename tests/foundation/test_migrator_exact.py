"""The migrator on planted migrations, in a real store (chDB): order, ledger, partial rollback.

The store tests run the project's own migrations all forwards and all back. These plant three
small numbered migrations (each creates one table, its backwards drops it) in a package of
their own, so that what the migrator applies, records, skips and undoes is seen migration by
migration (mutation target ``migrator``): a rollback to a middle version, a version missing
from the ledger, a failing statement named with its migration, and the numbering checks.
"""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrylens.errors import MigrationError
from retrylens.store import EventStore, migrator
from retrylens.store.migrations.base import MigrationContext
from retrylens.store.migrator import LEDGER, Migrator, discover

_MODULE = """
from retrylens.store.migrations.base import Migration

def forwards(ctx):
    return [{forwards!r}.format(t=ctx.table("t_{name}"))]

def backwards(ctx):
    return [f"DROP TABLE IF EXISTS {{ctx.table('t_{name}')}}"]

MIGRATION = Migration({version}, "{name}", forwards, backwards)
"""
_CREATE = "CREATE TABLE IF NOT EXISTS {t} (x UInt8) ENGINE = MergeTree ORDER BY x"


def _plant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, modules: dict[str, tuple[int, str]]) -> None:
    """A package of migrations ``{module name: (declared version, forwards statement)}``."""
    package = f"planted_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    for module, (version, forwards) in modules.items():
        name = module.partition("_")[2] or module
        (folder / f"{module}.py").write_text(textwrap.dedent(_MODULE.format(forwards=forwards, name=name, version=version)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(migrator, "MIGRATIONS_PACKAGE", package)


THREE = {"m0002_two": (2, _CREATE), "m0001_one": (1, _CREATE), "m0003_three": (3, _CREATE), "notes": (9, _CREATE)}


@pytest.fixture
def planted(store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Migrator]:
    _plant(tmp_path, monkeypatch, THREE)
    database = f"planted_{uuid.uuid4().hex[:8]}"
    yield Migrator(store.client, MigrationContext(database=database))
    store.client.command(f"DROP DATABASE IF EXISTS {database}")


def _tables(m: Migrator) -> list[str]:
    rows = m._client.query(f"SELECT name FROM system.tables WHERE database = '{m._ctx.database}' ORDER BY name")
    return [row[0] for row in rows.result_rows]


def _ledger(m: Migrator) -> list[tuple[int, str]]:
    rows = m._client.query(f"SELECT version, name FROM {m._ctx.table(LEDGER)} FINAL ORDER BY version")
    return [(int(v), n) for v, n in rows.result_rows]


def test_discovery_orders_by_number_and_skips_modules_that_are_not_numbered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant(tmp_path, monkeypatch, {**THREE, "m0300_late": (300, _CREATE)})  # past CPython's cached ints
    assert [(m.version, m.name) for m in discover()] == [(1, "one"), (2, "two"), (3, "three"), (300, "late")]


def test_a_module_numbered_unlike_its_migration_or_a_number_used_twice_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant(tmp_path / "a", monkeypatch, {"m0001_one": (1, _CREATE), "m0002_two": (3, _CREATE)})
    with pytest.raises(MigrationError, match="m0002_two declares version 3"):
        discover()
    _plant(tmp_path / "c", monkeypatch, {"m0001_one": (1, _CREATE), "m0003_three": (2, _CREATE)})
    with pytest.raises(MigrationError, match="m0003_three declares version 2"):
        discover()
    _plant(tmp_path / "b", monkeypatch, {"m0001_one": (1, _CREATE), "m0001_again": (1, _CREATE)})
    with pytest.raises(MigrationError, match="two migrations are numbered 1"):
        discover()


def test_each_migration_is_applied_once_in_order_and_recorded(planted: Migrator) -> None:
    assert planted.applied_versions() == set() and _tables(planted) == [LEDGER]  # a new database, bootstrapped
    assert [m.version for m in planted.pending()] == [1, 2, 3]
    assert [m.version for m in planted.apply()] == [1, 2, 3]
    assert _ledger(planted) == [(1, "one"), (2, "two"), (3, "three")]
    assert _tables(planted) == [LEDGER, "t_one", "t_three", "t_two"]
    assert planted.apply() == [] and planted.pending() == []


def test_a_rollback_undoes_only_newer_applied_versions_newest_first(planted: Migrator) -> None:
    planted.apply()
    assert [m.version for m in planted.rollback(2)] == [3]
    assert planted.applied_versions() == {1, 2} and _tables(planted) == [LEDGER, "t_one", "t_two"]
    planted._client.command(f"DELETE FROM {planted._ctx.table(LEDGER)} WHERE version = 2")  # 2 not applied
    assert [m.version for m in planted.rollback(0)] == [1]
    assert _tables(planted) == [LEDGER, "t_two"]  # its backwards never ran
    assert [m.version for m in planted.apply()] == [1, 2, 3] and planted.applied_versions() == {1, 2, 3}


def test_a_failing_statement_names_its_migration_and_is_not_recorded(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant(tmp_path, monkeypatch, {"m0001_one": (1, _CREATE), "m0002_two": (2, "CREATE TABLE {t} (x Nope) ENGINE = Log")})
    m = Migrator(store.client, MigrationContext(database=f"planted_{uuid.uuid4().hex[:8]}"))
    try:
        with pytest.raises(MigrationError, match=r"migration 0002_two failed: .*\nstatement:\nCREATE TABLE"):
            m.apply()
        assert _ledger(m) == [(1, "one")]
    finally:
        store.client.command(f"DROP DATABASE IF EXISTS {m._ctx.database}")
