"""The ``retrylens serve`` process: it owns the store, runs ingestion beside the API, stops cleanly.

chDB lets one process open an embedded store, so on embedded defaults this process is the
store's owner: besides the API it drains every spool folder (``<spool_dir>/<name>``, where
agents on this machine spool their events, and ``http`` for events posted to
``/v1/events``) with a :class:`~retrylens.ingest.spool_ingestor.SpoolIngestor`, and when
Kafka is configured it also runs the :class:`~retrylens.ingest.consumer.IngestConsumer`
(nobody else may open the store to do it). With a ClickHouse server DSN it serves the API
only; consumers are separate processes.

SIGTERM or SIGINT stops uvicorn (in-flight requests finish), then the ingest threads:
the consumer commits its last batch and the spool ingestor drains what is left. Opening
a store another process owns fails at once with :class:`~retrylens.errors.StoreLockedError`.
While it runs, the owner of an embedded store announces its URL in ``<data_dir>/server.json``
(:mod:`.advert`) so that the CLI of the same data directory goes through its API.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import uvicorn

from retrylens.analytics.alert_delivery import Dispatcher
from retrylens.analytics.alert_outbox import Outbox
from retrylens.analytics.alerts import run_periodically
from retrylens.analytics.sealing import start_sealer
from retrylens.config import Settings
from retrylens.ingest.spool_ingestor import SpoolIngestor
from retrylens.store import EventStore, open_store

from . import offload
from .advert import reachable_url, remove_advert, write_advert
from .app import create_app
from .heap import freeze_startup_heap

log = logging.getLogger("retrylens.serve")


def _kafka_consumer(settings: Settings, store: EventStore) -> Any:
    """The Kafka consumer, imported only when Kafka is configured: kafka-python is heavy to
    import and warns on import, and an embedded server without Kafka never needs it."""
    from retrylens.ingest.consumer import IngestConsumer

    return IngestConsumer(settings, store)


class IngestThreads:
    """The ingestion a store-owning server runs beside its API (nothing with a ClickHouse server).

    It inserts on a store connection of its own (``open_store(apart=True)``), never on the
    API's: an embedded client runs one call at a time, so a tenant's read used to wait behind
    another tenant's insert (seconds each under an OTLP flood, 13 of 42 reads in one run). Its
    inserts run on engine threads below the API's priority; its own threads, which run Python,
    at the API's (:mod:`retrylens.ingest.priority`)."""

    def __init__(self, settings: Settings, store: EventStore, *, spool_interval_s: float = 0.5) -> None:
        self.settings = settings
        embedded = settings.is_embedded_store
        #: the store the ingest threads insert on: a connection of their own (embedded)
        self.store = open_store(settings, migrate=False, apart=True) if embedded else store
        self.spool = SpoolIngestor(settings, self.store) if embedded else None
        self.consumer = _kafka_consumer(settings, self.store) if embedded and settings.uses_kafka else None
        self._consumer_thread: threading.Thread | None = None
        self._spool_interval_s = spool_interval_s
        self.consumer_error: str | None = None

    def start(self) -> None:
        if self.spool is not None:
            self.spool.start(interval_s=self._spool_interval_s)
        if self.consumer is not None:
            self._consumer_thread = threading.Thread(target=self._consume, name="retrylens-consumer", daemon=True)
            self._consumer_thread.start()

    def _consume(self) -> None:
        assert self.consumer is not None
        try:
            self.consumer.run()
        except Exception as exc:  # noqa: BLE001 - report on /healthz; the API keeps serving
            self.consumer_error = str(exc)
            log.exception("the Kafka consumer stopped")

    def stop(self) -> None:
        """Stop the consumer (it commits its last batch), then drain the spools."""
        if self.consumer is not None:
            self.consumer.stop()
        if self._consumer_thread is not None:
            self._consumer_thread.join(timeout=30)
        if self.spool is not None:
            self.spool.stop()
        if self.settings.is_embedded_store:
            self.store.client.close()  # its own connection (the API's stays open)

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.spool is not None:
            out["spool_rows"] = self.spool.rows
            out["spool_dead_letters"] = self.spool.dead_letters
        if self.consumer is not None:
            alive = self._consumer_thread is not None and self._consumer_thread.is_alive()
            out["consumer"] = "running" if alive else f"stopped: {self.consumer_error or 'not started'}"
            out["consumer_rows"] = self.consumer.stats.rows
        return out


def start_maintenance(store: EventStore, settings: Settings) -> Callable[[], None]:
    """Seal closed rollup buckets, evaluate alert rules and post their pages; returns ``stop()``.

    Evaluation queues pages in the outbox of the data directory; the dispatcher posts them
    from threads of its own, so a slow receiver never holds up evaluation or another project.
    A sealing pass recomputes every bucket a flood's events touched (seconds of CPU a minute
    under one): its statements run on ``store``'s engine threads, below the API's priority when
    ``store`` is a store apart; the threads themselves run Python and stay at the API's
    (:mod:`retrylens.ingest.priority`)."""
    stop_sealer = start_sealer(store, interval_s=settings.maintenance_interval_s)
    outbox = Outbox.in_data_dir(settings.data_dir)
    dispatcher = Dispatcher(outbox, allowed_hosts=settings.alert_webhook_hosts,
                            timeout_s=settings.alert_delivery_timeout_s)
    stop_dispatch = dispatcher.start()
    stop_alerts = threading.Event()
    alerts = threading.Thread(
        target=run_periodically,
        kwargs={"store": store, "interval_s": settings.maintenance_interval_s, "stop": stop_alerts,
                "webhook_url": settings.alert_webhook_url, "outbox": outbox, "dashboard_url": settings.dashboard_url,
                "on_enqueue": dispatcher.wake},
        name="retrylens-alerts",
        daemon=True,
    )
    alerts.start()

    def stop() -> None:
        stop_alerts.set()
        stop_sealer()
        alerts.join(timeout=30)
        stop_dispatch()
        outbox.close()

    return stop


def serve(settings: Settings, *, host: str | None = None, port: int | None = None, log_level: str = "info") -> None:
    """Run the server until SIGTERM/SIGINT. Raises ``StoreLockedError`` if the store is taken.

    Every file the server makes holds some tenant's data (the embedded store's parts, the
    spool, models, dead letters), so it makes them readable by its own user only (umask 077)."""
    os.umask(0o077)
    worker = offload.warm_up()  # spawned beside the start-up below
    store = open_store(settings)
    ingest = IngestThreads(settings, store)
    app = create_app(settings, store, health=ingest.status)
    config = uvicorn.Config(app, host=host or settings.api_host, port=port or settings.api_port,
                            log_level=log_level, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    # uvicorn handles SIGTERM/SIGINT while it runs and then re-raises the signal to the
    # handler that was installed before it; make that one harmless so that the ingest
    # threads are stopped below and the process exits 0 after a clean shutdown.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)  # the re-raised signal of a shutdown already under way
    ingest.start()
    # sealing and alert evaluation insert and read too: on a connection apart from the API's reads
    stop_maintenance = start_maintenance(open_store(settings, migrate=False, apart=True), settings)
    if settings.is_embedded_store:
        write_advert(settings, reachable_url(settings, config.host, config.port))
    freeze_startup_heap()  # full collections must not walk the start-up heap while requests wait
    try:
        worker.result(timeout=120)
    except Exception:  # noqa: BLE001 - requests that need it start another one
        log.exception("the worker process did not start; heavy requests will start it")
    try:
        server.run()
    finally:
        remove_advert(settings)
        stop_maintenance()
        ingest.stop()
    if not server.started:
        raise OSError(f"the API could not listen on {config.host}:{config.port} (see the log above)")
