"""Kafka clients configured the way RetryLens needs them, in one place.

Producers are idempotent with ``acks=all`` and lz4 compression; consumers never
auto-commit (offsets are committed only after a durable insert). Topic creation is
idempotent so any process may call :func:`ensure_topics` on start.

Every client tries to connect for ``kafka_bootstrap_timeout_s``. kafka-python reports a
refused SASL login only as "Unable to bootstrap" (the broker closes the socket), so when
the broker's port answers but the client could not bootstrap with TLS/SASL configured,
the error names the credentials as the likely cause instead.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, TypeVar

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaTimeoutError, TopicAlreadyExistsError

from retrylens.config import Settings
from retrylens.errors import ConfigError
from retrylens.sdk.transport import kafka as agent_kafka
from retrylens.sdk.transport.kafka import PRODUCER_DEFAULTS
from retrylens.sdk.transport.settings import KAFKA_SECURITY_FIELDS

from .binding import parse_project_topics

C = TypeVar("C")

__all__ = ["PRODUCER_DEFAULTS", "connect", "ensure_topics", "make_consumer", "make_producer", "security"]


def security(settings: Settings) -> dict[str, str]:
    """kafka-python TLS/SASL options of ``settings`` (the same for every client)."""
    return agent_kafka.security_options({name: getattr(settings, name) for name in KAFKA_SECURITY_FIELDS})


def _bootstrap_ms(settings: Settings) -> int:
    return int(settings.kafka_bootstrap_timeout_s * 1000)


def connect(settings: Settings, what: str, factory: Callable[..., C], **config: Any) -> C:
    """``factory(**config)``; a bootstrap that fails although a broker port answers
    becomes a :class:`ConfigError` naming the security settings (``what`` = the client)."""
    try:
        return factory(**config)
    except KafkaTimeoutError as exc:  # kafka-python 3: "Unable to bootstrap from ..."
        if not settings.kafka_security_protocol or not _any_port_answers(settings.kafka_bootstrap_servers):
            raise
        user = f" as user {settings.kafka_sasl_username!r}" if settings.kafka_sasl_username else ""
        mechanism = f" with {settings.kafka_sasl_mechanism}" if settings.kafka_sasl_mechanism else ""
        raise ConfigError(
            f"Kafka {what} could not connect to {settings.kafka_bootstrap_servers} "
            f"(security protocol {settings.kafka_security_protocol}{mechanism}{user}) within "
            f"{settings.kafka_bootstrap_timeout_s:g}s although the broker accepts connections: most likely "
            "the broker refused the login (wrong user or password, mechanism not enabled on that "
            "listener, or a TLS mismatch); the broker log names the reason"
        ) from exc


def _any_port_answers(bootstrap_servers: str) -> bool:
    for server in bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=2):
                return True
        except (OSError, ValueError):
            continue
    return False


def make_producer(settings: Settings, **overrides: Any) -> KafkaProducer:
    """The agent's producer configuration, for the server's own producers (DLQ, replay)."""
    return connect(
        settings,
        "producer",
        agent_kafka.make_producer,
        bootstrap_servers=settings.kafka_bootstrap_servers,
        security={name: getattr(settings, name) for name in KAFKA_SECURITY_FIELDS},
        **{"bootstrap_timeout_ms": _bootstrap_ms(settings), **overrides},
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
        # kafka-python backs off up to 30 s between attempts to reach a lost broker, so
        # after an outage the group came back up to 30 s after the broker did (measured).
        "reconnect_backoff_max_ms": 2_000,
        # A member assigned nothing because the group's leader did not yet know a new topic's
        # partitions ("No partition metadata for topic") gets them at the next metadata refresh,
        # which triggers a rebalance: kafka-python's default refresh of 5 min left such a group
        # idle (three loaded CI runs: no assignment within 120 s on a topic created just before).
        "metadata_max_age_ms": 10_000,
        "bootstrap_timeout_ms": _bootstrap_ms(settings),
        **security(settings),
    }
    config.update(overrides)
    return connect(settings, "consumer", KafkaConsumer, **config)


def ensure_topics(settings: Settings) -> None:
    """Create the event topics (the bound ones too) and the dead-letter topic if missing."""
    admin = connect(
        settings,
        "admin client",
        KafkaAdminClient,
        bootstrap_servers=settings.kafka_bootstrap_servers.split(","),
        bootstrap_timeout_ms=_bootstrap_ms(settings),
        **security(settings),
    )
    binding = parse_project_topics(
        settings.project_topics, event_topic=settings.kafka_topic, dlq_topic=settings.kafka_dlq_topic
    )
    event_topics = [settings.kafka_topic] if binding is None else list(binding.topics)
    try:
        wanted = [
            *(NewTopic(topic, settings.kafka_topic_partitions, settings.kafka_replication_factor) for topic in event_topics),
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
