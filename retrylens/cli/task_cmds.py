"""``retrylens tasks``: the recent tasks of a store, with filters, through the running server like every store command."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from .common import ConfigOption, handle_errors, settings_from
from .road import store_operation
from .views import tasks_table


def register(app: typer.Typer) -> None:
    """Add this area's commands to ``app``."""
    app.command()(tasks)


@handle_errors
def tasks(
    project: str | None = typer.Option(None, "--project", help="Only this project (default: all)."),
    agent: str | None = typer.Option(None, "--agent", help="Only this agent."),
    phase: str | None = typer.Option(None, "--phase", help="Only tasks with events in this phase."),
    error_type: str | None = typer.Option(None, "--error-type", help="Only tasks that failed with this error type."),
    hours: float | None = typer.Option(None, "--hours", min=0.01, help="Only the last N hours."),
    outcome: str | None = typer.Option(None, "--outcome",
                                       help="succeeded, failed, handed_off, cancelled, or open (not finished)."),
    retried: bool = typer.Option(False, "--retried", help="Only tasks with at least one retry."),
    limit: int = typer.Option(20, "--limit", min=1, max=10_000, help="How many, newest first."),
    config: Path | None = ConfigOption,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON array."),
) -> None:
    """Recent tasks, newest first: agent, attempts, failures, cost and how each ended."""
    rows = store_operation(settings_from(config), "tasks", project=project, agent=agent, phase=phase,
                           error_type=error_type, hours=hours, outcome=outcome, only_retried=retried, limit=limit)
    if as_json:
        typer.echo(json.dumps(rows, default=str))
        return
    Console(soft_wrap=False).print(tasks_table(rows))
