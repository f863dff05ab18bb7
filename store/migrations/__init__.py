"""Numbered schema migrations; each module ``mNNNN_<name>.py`` defines ``MIGRATION``.

Discovery is by module name (:func:`retrylens.store.migrator.discover`), so adding a
migration never means editing a shared list.

The rules, as for snuba's ``snuba_migrations``:

* **Self-contained.** A migration inlines every piece of DDL and SQL it runs — table
  definitions, measures, normalisers, histogram keys — and imports only the typed
  operations of :mod:`.base` (``Migration``, ``MigrationContext``). It imports no other
  migration, not the live schema (:mod:`retrylens.store.schema`) and no reader (analytics,
  api, …). Copies of an older migration's definitions are the point, not an accident: they
  say what that step did, and they stay put when a later migration changes the live ones.
* **Frozen once released.** A released migration's statements never change: a database
  migrated by old code must equal one migrated by new code. To change a table, measure or
  view, add the next migration (``m0011_<name>.py``), update :mod:`retrylens.store.schema`
  (the CURRENT schema that readers import) in the same commit, and record the new
  migration's SQL: ``python tests/fixtures/migration_sql/capture.py``, whose diff must only
  add the new migration.
* **Readers never import migrations.** Only the migrator does, by name.

``tests/foundation/test_migrations_frozen.py`` checks all three: each migration's statements
against the recorded ones, the imports (by AST), and the live schema against the tables a
real migrated store has.
"""
