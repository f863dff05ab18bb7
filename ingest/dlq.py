"""The dead-letter topic: invalid messages with why and where they came from.

A dead letter keeps the original key and bytes untouched, so after a fix
:func:`replay_dead_letters` can feed it back into the event topic as it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka import KafkaProducer

from retrylens.config import Settings

from . import metrics
from .kafka_clients import make_consumer, make_producer
from .processor import InvalidMessage

REPLAYED_HEADER = "retrylens-replayed-from"


def dead_letter_headers(invalid: InvalidMessage) -> list[tuple[str, bytes]]:
    return [
        ("reason", invalid.reason.value.encode()),
        ("detail", invalid.detail.encode("utf-8", "replace")),
        ("source_topic", invalid.source.topic.encode()),
        ("source_partition", str(invalid.source.partition).encode()),
        ("source_offset", str(invalid.source.offset).encode()),
        ("failed_at_ms", str(int(time.time() * 1000)).encode()),
    ]


class DeadLetterPublisher:
    """Sends invalid messages to the DLQ topic; :meth:`flush` before committing offsets."""

    def __init__(self, producer: KafkaProducer, topic: str) -> None:
        self._producer = producer
        self._topic = topic

    def publish(self, invalid: InvalidMessage, *, key: bytes | None, value: bytes | None) -> None:
        self._producer.send(self._topic, key=key, value=value or b"", headers=dead_letter_headers(invalid))
        metrics.DEAD_LETTERS.labels(invalid.reason.value).inc()

    def flush(self, timeout_s: float = 30.0) -> None:
        self._producer.flush(timeout=timeout_s)

    def close(self) -> None:
        self._producer.close(timeout=10)


@dataclass(frozen=True)
class ReplayResult:
    replayed: int
    skipped: int


def replay_dead_letters(
    settings: Settings,
    *,
    reason: str | None = None,
    max_messages: int | None = None,
    idle_timeout_s: float = 5.0,
) -> ReplayResult:
    """Re-send dead letters (optionally only one ``reason``) to the event topic.

    Progress is kept by the ``<group>-dlq-replay`` consumer group, so each dead letter is
    replayed once; a letter that is still invalid simply returns to the DLQ.
    """
    consumer = make_consumer(settings, group_id=f"{settings.kafka_group}-dlq-replay")
    consumer.subscribe([settings.kafka_dlq_topic])
    producer = make_producer(settings)
    replayed = skipped = 0
    last_seen = time.monotonic()
    try:
        while max_messages is None or replayed + skipped < max_messages:
            records = consumer.poll(timeout_ms=500)
            if not records:
                if time.monotonic() - last_seen > idle_timeout_s:
                    break
                continue
            last_seen = time.monotonic()
            for messages in records.values():
                for message in messages:
                    headers = dict(message.headers or [])
                    if reason is not None and headers.get("reason", b"").decode() != reason:
                        skipped += 1
                        continue
                    origin = f"{message.topic}:{message.partition}:{message.offset}".encode()
                    producer.send(
                        settings.kafka_topic,
                        key=message.key,
                        value=message.value,
                        headers=[(REPLAYED_HEADER, origin)],
                    )
                    replayed += 1
            producer.flush(timeout=30)
            consumer.commit()
    finally:
        producer.close(timeout=10)
        consumer.close(autocommit=False)
    return ReplayResult(replayed=replayed, skipped=skipped)
