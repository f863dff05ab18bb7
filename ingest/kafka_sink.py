"""Delivers emitter records to the event topic, keyed by task id for per-task order."""

from __future__ import annotations

import logging

from kafka import KafkaProducer

from retrylens.config import Settings

from .emitter import Record
from .kafka_clients import make_producer

log = logging.getLogger(__name__)


class KafkaSink:
    """A lazily (re)connected idempotent producer; a failure drops the producer.

    Dropping the producer on failure abandons its in-flight batches, which the emitter
    has spooled anyway, so a recovered broker does not receive every record twice.
    """

    def __init__(self, settings: Settings, *, flush_timeout_s: float = 10.0, max_block_ms: int = 2_000) -> None:
        self._settings = settings
        self._flush_timeout_s = flush_timeout_s
        self._max_block_ms = max_block_ms
        self._producer: KafkaProducer | None = None

    def _connected(self) -> KafkaProducer:
        if self._producer is None:
            self._producer = make_producer(
                self._settings,
                max_block_ms=self._max_block_ms,
                bootstrap_timeout_ms=self._max_block_ms,
                request_timeout_ms=5_000,
                delivery_timeout_ms=int(self._flush_timeout_s * 1000) + 5_000,
            )
        return self._producer

    def deliver(self, records: list[Record]) -> int:
        try:
            producer = self._connected()
            futures = [producer.send(self._settings.kafka_topic, key=key, value=value) for key, value in records]
            producer.flush(timeout=self._flush_timeout_s)
        except Exception as exc:  # noqa: BLE001 - any producer failure: report a partial delivery
            log.warning("Kafka delivery failed: %s", exc)
            self._reset()
            return 0
        delivered = 0
        for future in futures:
            if not future.succeeded():
                break
            delivered += 1
        if delivered < len(records):
            self._reset()
        return delivered

    def _reset(self) -> None:
        if self._producer is not None:
            try:
                self._producer.close(timeout=0)
            except Exception:  # noqa: BLE001
                log.debug("closing a failed producer raised", exc_info=True)
            self._producer = None

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(timeout=10)
            self._producer = None
