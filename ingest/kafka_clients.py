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

PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "enable_idempotence": True,
    "compression_type": "lz4",
    "linger_ms": 20,
    "batch_size": 256 * 1024,
    "max_in_flight_requests_per_connection": 5,
}


def make_producer(settings: Settings, **overrides: Any) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=settings.kafka_bootstrap_servers.split(","),
        client_id="retrylens-producer",
        **{**PRODUCER_DEFAULTS, **overrides},
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
    }
    config.update(overrides)
    return KafkaConsumer(**config)


def ensure_topics(settings: Settings) -> None:
    """Create the event and dead-letter topics if they do not exist yet."""
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers.split(","))
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
