"""Commands that move events: consume, dlq replay, ingest-spool."""

from __future__ import annotations

import json
import logging
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from prometheus_client import start_http_server

from retrylens.ingest.spool_ingestor import SpoolIngestor
from retrylens.store import open_store

if TYPE_CHECKING:
    from retrylens.ingest.group import ConsumerGroup

from .common import ConfigOption, console, handle_errors, settings_from
from .road import owning_server

#: How often a server's spool ingestor drains (see :class:`retrylens.api.server.IngestThreads`).
SPOOL_INTERVAL_S = 0.5

dlq_app = typer.Typer(help="Dead-letter queue operations.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command()(consume)
    app.command("ingest-spool")(ingest_spool)
    app.add_typer(dlq_app, name="dlq")


@handle_errors
def consume(
    config: Path | None = ConfigOption,
    idle_exit: float | None = typer.Option(None, min=0.1, help="Exit after this many idle seconds."),
    max_messages: int | None = typer.Option(None, min=1, help="Exit after about this many messages (all members)."),
    metrics_port: int | None = typer.Option(None, min=0, max=65535, help="Prometheus port (0 = off)."),
    batch_max_rows: int | None = typer.Option(None, min=1, help="Rows per insert."),
    stats: float | None = typer.Option(
        None, min=0.5, help="Every this many seconds, print to stderr whether ingest keeps up (lag, throughput)."
    ),
    members: int | None = typer.Option(
        None, min=1, max=64, help="Consumer-group members, as threads sharing this process's store (ingest_members)."
    ),
) -> None:
    """Consume retry events from Kafka into ClickHouse (one or more consumer-group members).

    SIGTERM/SIGINT: every member finishes its batch, commits and leaves. If a member fails
    (e.g. a burst of invalid messages), all stop without committing their open batches and
    the exit code is non-zero."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_from(config, metrics_port=metrics_port, batch_max_rows=batch_max_rows, ingest_members=members)
    if not settings.uses_kafka:
        console.print("[red]error:[/red] KAFKA_BOOTSTRAP_SERVERS is not set; embedded mode uses `retrylens ingest-spool`")
        raise typer.Exit(2)
    server = owning_server(settings)
    if server is not None:
        console.print(f"[red]error:[/red] the RetryLens server at {server} owns this embedded store and consumes "
                      "the topic into it itself; to run more consumers, point RETRYLENS_CLICKHOUSE_DSN at a "
                      "ClickHouse server")
        raise typer.Exit(2)
    if settings.metrics_port:
        start_http_server(settings.metrics_port)
    from retrylens.ingest.group import (
        ConsumerGroup,  # kafka-python: imported by the Kafka commands only
    )
    from retrylens.ingest.heap import settle_startup_heap

    group = ConsumerGroup(settings, open_store(settings))
    group.install_signal_handlers()
    settle_startup_heap()  # the loop's collections then skip what start-up built (ingest/heap.py)
    done = threading.Event()
    if stats:
        threading.Thread(target=_report_status, args=(group, stats, done), daemon=True).start()
    try:
        result = group.run(idle_exit_s=idle_exit, max_messages=max_messages)
    finally:
        done.set()
    typer.echo(json.dumps({**result.__dict__, "members": group.member_stats()}))


def _report_status(group: ConsumerGroup, every_s: float, done: threading.Event) -> None:
    """One JSON line per interval: throughput, lag and its trend, and the verdict (the
    members' figures combined, each member's own under ``members``)."""
    while not done.wait(every_s):
        # One write per line: members log to stderr from their own threads meanwhile.
        sys.stderr.write(json.dumps({"status": group.status_snapshot()}) + "\n")
        sys.stderr.flush()


@handle_errors
def ingest_spool(config: Path | None = ConfigOption) -> None:
    """Embedded mode: ingest every spooled event into the store, then exit."""
    settings = settings_from(config)
    server = owning_server(settings)
    if server is not None:
        console.print(f"the RetryLens server at {server} owns this store and ingests the spool itself "
                      f"(every {SPOOL_INTERVAL_S:g} s): nothing to do here")
        typer.echo(json.dumps({"rows": 0, "dead_letters": 0, "ingested_by": server}))
        return
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
    from retrylens.ingest.dlq import (
        replay_dead_letters,  # kafka-python: imported by the Kafka commands only
    )

    result = replay_dead_letters(settings, reason=reason, max_messages=max_messages, idle_timeout_s=idle_timeout)
    typer.echo(json.dumps(result.__dict__))
