"""Delivers emitter records to the event topic, keyed by task id for per-task order.

kafka-python is imported here only, and this module only when a broker is configured,
so an agent in embedded (spool) mode never loads it. The producer is idempotent with
``acks=all`` and lz4 compression; the server's dead-letter producer uses the same
configuration (:func:`make_producer`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .emitter import Record

if TYPE_CHECKING:
    from kafka import KafkaProducer

    from .settings import EmitterSettings

log = logging.getLogger(__name__)

PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "enable_idempotence": True,
    "compression_type": "lz4",
    "linger_ms": 20,
    "batch_size": 256 * 1024,
    "max_in_flight_requests_per_connection": 5,
}

#: RetryLens setting name → kafka-python client option.
SECURITY_OPTIONS = {
    "kafka_security_protocol": "security_protocol",
    "kafka_sasl_mechanism": "sasl_mechanism",
    "kafka_sasl_username": "sasl_plain_username",
    "kafka_sasl_password": "sasl_plain_password",
    "kafka_ssl_cafile": "ssl_cafile",
    "kafka_ssl_certfile": "ssl_certfile",
    "kafka_ssl_keyfile": "ssl_keyfile",
}


def security_options(security: Mapping[str, str]) -> dict[str, str]:
    """kafka-python keyword arguments for the TLS/SASL settings that are set."""
    return {SECURITY_OPTIONS[name]: value for name, value in security.items() if value}


def make_producer(bootstrap_servers: str, security: Mapping[str, str], **overrides: Any) -> KafkaProducer:
    """An idempotent producer for ``bootstrap_servers`` (comma-separated)."""
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=bootstrap_servers.split(","),
        client_id="retrylens-producer",
        **{**PRODUCER_DEFAULTS, **security_options(security), **overrides},
    )


class KafkaSink:
    """A lazily (re)connected idempotent producer; a failure drops the producer.

    Dropping the producer on failure abandons its in-flight batches, which the emitter
    has spooled anyway, so a recovered broker does not receive every record twice.
    """

    def __init__(
        self, settings: EmitterSettings | Any, *, flush_timeout_s: float = 10.0, max_block_ms: int = 2_000
    ) -> None:
        from .settings import as_emitter_settings

        self._settings = as_emitter_settings(settings)
        self._flush_timeout_s = flush_timeout_s
        self._max_block_ms = max_block_ms
        self._producer: KafkaProducer | None = None

    def _connected(self) -> KafkaProducer:
        if self._producer is None:
            self._producer = make_producer(
                self._settings.kafka_bootstrap_servers,
                self._settings.kafka_security,
                max_block_ms=self._max_block_ms,
                bootstrap_timeout_ms=self._max_block_ms,
                request_timeout_ms=5_000,
                delivery_timeout_ms=int(self._flush_timeout_s * 1000) + 5_000,
            )
        return self._producer

    def deliver(self, records: list[Record]) -> int:
        try:
            producer = self._connected()
            topic = self._settings.kafka_topic
            futures = [producer.send(topic, key=key, value=value) for key, value in records]
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
