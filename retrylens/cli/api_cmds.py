"""``retrylens serve``: the API server process (owner of an embedded store)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import typer

from .common import ConfigOption, console, handle_errors, settings_from


def register(app: typer.Typer) -> None:
    """Add this area's commands to ``app``."""
    app.command()(serve)


@handle_errors
def serve(
    host: str | None = typer.Option(None, "--host", help="Bind address (default: api_host setting)."),
    port: int | None = typer.Option(None, "--port", min=1, max=65535, help="Port (default: api_port setting)."),
    config: Path | None = ConfigOption,
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve the API (pre-check, reads, HTTP ingest, policies); on an embedded store, also ingest."""
    # Settings first: a bad configuration is refused before the server stack (seconds of
    # imports) is loaded.
    settings = settings_from(config, api_host=host, api_port=port)
    from retrylens.api.server import serve as run

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run(settings, log_level=log_level)
    except OSError as exc:
        console.print(f"[red]error:[/red] {exc}")
        sys.exit(1)
