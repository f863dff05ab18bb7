"""Wiring: the emitter an agent process should use under the current settings."""

from __future__ import annotations

import os

from retrylens.config import Settings

from .emitter import Emitter
from .kafka_sink import KafkaSink
from .spool import Spool, SpoolLockedError
from .spool_ingestor import KAFKA_FALLBACK_PREFIX


def open_spool(settings: Settings, name: str = "default") -> Spool:
    """This process's spool folder; a second process on the same name gets its own."""
    root = settings.effective_spool_dir
    try:
        return Spool(root / name)
    except SpoolLockedError:
        return Spool(root / f"{name}-{os.getpid()}")


def build_emitter(settings: Settings, *, name: str = "default") -> Emitter:
    """Kafka (spool as fallback) when ``KAFKA_BOOTSTRAP_SERVERS`` is set, else spool only."""
    # A Kafka-mode spool is only a fallback that this process replays to Kafka itself; its
    # name keeps the store owner's SpoolIngestor from also reading it.
    spool = open_spool(settings, f"{KAFKA_FALLBACK_PREFIX}{name}" if settings.uses_kafka else name)
    sink = KafkaSink(settings) if settings.uses_kafka else None
    return Emitter(sink=sink, spool=spool, queue_size=settings.emit_queue_size)
