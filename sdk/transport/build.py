"""Wiring: the emitter an agent process should use under the current settings.

    from retrylens.sdk.transport import build_emitter
    emitter = build_emitter()          # reads RETRYLENS_* / KAFKA_BOOTSTRAP_SERVERS

Kafka (with the spool as fallback) when ``KAFKA_BOOTSTRAP_SERVERS`` is set, else the
spool alone, which the store-owning process ingests (embedded mode).
"""

from __future__ import annotations

import os
from typing import Any

from retrylens.errors import SpoolLockedError

from .emitter import Emitter
from .settings import EmitterSettings, as_emitter_settings
from .spool import Spool

#: Spool folders whose names start with this are a Kafka-mode emitter's fallback, replayed
#: to Kafka by that emitter alone; the store owner's spool ingestor never reads them.
KAFKA_FALLBACK_PREFIX = "kafka-"


def open_spool(settings: EmitterSettings | Any, name: str = "default") -> Spool:
    """This process's spool folder; a second process on the same name gets its own."""
    root = as_emitter_settings(settings).effective_spool_dir
    try:
        return Spool(root / name)
    except SpoolLockedError:
        return Spool(root / f"{name}-{os.getpid()}")


def build_emitter(settings: EmitterSettings | Any | None = None, *, name: str = "default") -> Emitter:
    """An emitter for ``settings`` (agent settings, the server's settings, or the environment)."""
    settings = as_emitter_settings(settings)
    # A Kafka-mode spool is only a fallback that this process replays to Kafka itself; its
    # name keeps the store owner's spool ingestor from also reading it.
    spool = open_spool(settings, f"{KAFKA_FALLBACK_PREFIX}{name}" if settings.uses_kafka else name)
    sink = None
    if settings.uses_kafka:
        from .kafka import KafkaSink  # kafka-python loads only when a broker is configured

        sink = KafkaSink(settings)
    return Emitter(sink=sink, spool=spool, queue_size=settings.emit_queue_size)
