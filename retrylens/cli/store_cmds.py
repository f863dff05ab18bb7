"""Commands about the store and the schema: migrate, schema export, stats."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retrylens.schemas.export import SCHEMA_FILE, write_json_schema
from retrylens.store.migrator import context_from, render_all

from .common import ConfigOption, handle_errors, settings_from
from .road import store_operation

store_app = typer.Typer(help="Store schema and status.", no_args_is_help=True)
schema_app = typer.Typer(help="The retry-event schema.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
    app.add_typer(schema_app, name="schema")


@store_app.command("migrate")
@handle_errors
def migrate(
    config: Path | None = ConfigOption,
    dry_run: bool = typer.Option(False, help="Print the SQL instead of running it."),
) -> None:
    """Apply pending migrations (ON CLUSTER when a cluster is configured)."""
    settings = settings_from(config)
    if dry_run:
        typer.echo(";\n\n".join(render_all(context_from(settings))) + ";")
        return
    typer.echo(json.dumps(store_operation(settings, "store.migrate")))


@store_app.command("stats")
@handle_errors
def stats(config: Path | None = ConfigOption) -> None:
    """Distinct events and physical rows in the store."""
    typer.echo(json.dumps(store_operation(settings_from(config), "store.stats")))


@schema_app.command("export")
def export(out: Path = typer.Option(SCHEMA_FILE, help="Where to write the JSON Schema.")) -> None:
    """Write the retry-event JSON Schema (for agents in other languages)."""
    typer.echo(str(write_json_schema(out)))
