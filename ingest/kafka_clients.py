"""Kafka clients configured the way RetryLens needs them, in one place.

Producers are idempotent with ``acks=all`` and lz4 compression; consumers never
auto-commit (offsets are committed only after a durable insert). Topic creation is
idempotent so any process may call :func:`ensure_topics` on start.
"""

from __future__ import annotations

from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from retrylens.config import Settings
from retrylens.sdk.transport import kafka as agent_kafka
from retrylens.sdk.transport.kafka import PRODUCER_DEFAULTS
from retrylens.sdk.transport.settings import KAFKA_SECURITY_FIELDS

__all__ = ["PRODUCER_DEFAULTS", "ensure_topics", "make_consumer", "make_producer", "security"]


def security(settings: Settings) -> dict[str, str]:
    """kafka-python TLS/SASL options of ``settings`` (the same for every client)."""
    return agent_kafka.security_options({name: getattr(settings, name) for name in KAFKA_SECURITY_FIELDS})


def make_producer(settings: Settings, **overrides: Any) -> KafkaProducer:
    """The agent's producer configuration, for the server's own producers (DLQ, replay)."""
    return agent_kafka.make_producer(
        settings.kafka_bootstrap_servers,
        {name: getattr(settings, name) for name in KAFKA_SECURITY_FIELDS},
        **overrides,
    )


def make_consumer(settings: Settings, *, group_id: str, **overrides: Any) -> KafkaConsumer:
    """An unsubscribed consumer; callers subscribe with their rebalance listener."""
    config: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap_servers.split(","),
        "group_id": group_id,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "max_poll_records": min(settings.batch_max_rows, 10_000),
        "fetch_max_bytes": 64 * 1024 * 1024,
        "max_partition_fetch_bytes": 8 * 1024 * 1024,
        "client_id": f"retrylens-{group_id}",
        "session_timeout_ms": 10_000,
        "heartbeat_interval_ms": 2_000,
        **security(settings),
    }
    config.update(overrides)
    return KafkaConsumer(**config)


def ensure_topics(settings: Settings) -> None:
    """Create the event and dead-letter topics if they do not exist yet."""
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers.split(","), **security(settings))
    try:
        wanted = [
            NewTopic(settings.kafka_topic, settings.kafka_topic_partitions, settings.kafka_replication_factor),
            NewTopic(settings.kafka_dlq_topic, 1, settings.kafka_replication_factor),
        ]
        existing = set(admin.list_topics())
        missing = [topic for topic in wanted if topic.name not in existing]
        if missing:
            try:
                admin.create_topics(missing)
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()
