"""Commands that move events: consume, dlq replay, ingest-spool."""

from __future__ import annotations

import json
import logging
import sys
import threading
from pathlib import Path

import typer
from prometheus_client import start_http_server

from retrylens.ingest.consumer import IngestConsumer
from retrylens.ingest.dlq import replay_dead_letters
from retrylens.ingest.spool_ingestor import SpoolIngestor
from retrylens.store import open_store

from .common import ConfigOption, console, handle_errors, settings_from

dlq_app = typer.Typer(help="Dead-letter queue operations.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command()(consume)
    app.command("ingest-spool")(ingest_spool)
    app.add_typer(dlq_app, name="dlq")


@handle_errors
def consume(
    config: Path | None = ConfigOption,
    idle_exit: float | None = typer.Option(None, min=0.1, help="Exit after this many idle seconds."),
    max_messages: int | None = typer.Option(None, min=1, help="Exit after this many messages."),
    metrics_port: int | None = typer.Option(None, min=0, max=65535, help="Prometheus port (0 = off)."),
    batch_max_rows: int | None = typer.Option(None, min=1, help="Rows per insert."),
    stats: float | None = typer.Option(
        None, min=0.5, help="Every this many seconds, print to stderr whether ingest keeps up (lag, throughput)."
    ),
) -> None:
    """Consume retry events from Kafka into ClickHouse (one consumer-group member)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_from(config, metrics_port=metrics_port, batch_max_rows=batch_max_rows)
    if not settings.uses_kafka:
        console.print("[red]error:[/red] KAFKA_BOOTSTRAP_SERVERS is not set; embedded mode uses `retrylens ingest-spool`")
        raise typer.Exit(2)
    if settings.metrics_port:
        start_http_server(settings.metrics_port)
    consumer = IngestConsumer(settings, open_store(settings))
    consumer.install_signal_handlers()
    done = threading.Event()
    if stats:
        threading.Thread(target=_report_status, args=(consumer, stats, done), daemon=True).start()
    try:
        result = consumer.run(idle_exit_s=idle_exit, max_messages=max_messages)
    finally:
        done.set()
    typer.echo(json.dumps(result.__dict__))


def _report_status(consumer: IngestConsumer, every_s: float, done: threading.Event) -> None:
    """One JSON line per interval: throughput, lag and its trend, and the verdict."""
    while not done.wait(every_s):
        print(json.dumps({"status": consumer.status.snapshot()}), file=sys.stderr, flush=True)


@handle_errors
def ingest_spool(config: Path | None = ConfigOption) -> None:
    """Embedded mode: ingest every spooled event into the store, then exit."""
    settings = settings_from(config)
    ingestor = SpoolIngestor(settings, open_store(settings))
    rows = ingestor.drain()
    typer.echo(json.dumps({"rows": rows, "dead_letters": ingestor.dead_letters}))


@dlq_app.command("replay")
@handle_errors
def dlq_replay(
    config: Path | None = ConfigOption,
    reason: str | None = typer.Option(None, help="Only dead letters with this reason."),
    max_messages: int | None = typer.Option(None, min=1, help="Stop after about this many."),
    idle_timeout: float = typer.Option(5.0, min=0.1, help="Stop after this many idle seconds."),
) -> None:
    """Re-feed dead letters into the event topic after a fix."""
    settings = settings_from(config)
    if not settings.uses_kafka:
        console.print("[red]error:[/red] KAFKA_BOOTSTRAP_SERVERS is not set")
        raise typer.Exit(2)
    result = replay_dead_letters(settings, reason=reason, max_messages=max_messages, idle_timeout_s=idle_timeout)
    typer.echo(json.dumps(result.__dict__))
