"""The dead-letter topic: invalid messages with why and where they came from.

A dead letter keeps the original key and bytes untouched, so after a fix
:func:`replay_dead_letters` can feed it back into the event topic as it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from retrylens.config import Settings

from . import metrics
from .binding import parse_project_topics
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
    #: Letters of another reason: set aside at the DLQ's end, replayable later.
    skipped: int


def replay_dead_letters(
    settings: Settings,
    *,
    reason: str | None = None,
    max_messages: int | None = None,
    idle_timeout_s: float = 5.0,
) -> ReplayResult:
    """Re-send dead letters (optionally only one ``reason``) to the topic they came from.

    A letter goes back to its ``source_topic`` when that is a topic the consumer reads (a
    tenant's bound topic keeps its letters: on the shared topic the binding would refuse
    them again); a letter from anywhere else (written to the DLQ by hand, or read before
    the binding changed) goes to ``kafka_topic``, so a header can never steer a replay to
    a topic the consumer does not own.

    Progress is kept by the ``<group>-dlq-replay`` consumer group, so each dead letter is
    replayed once; a letter that is still invalid simply returns to the DLQ. Committing
    past a letter of another ``reason`` would lose it for every later replay, so such a
    letter is first re-published to the DLQ as it was (key, bytes, headers): it waits at
    the end of the topic for a replay of its own reason. The run stops at the end offsets
    the DLQ had when it started, so it never reads the letters it set aside itself.
    """
    binding = parse_project_topics(
        settings.project_topics, event_topic=settings.kafka_topic, dlq_topic=settings.kafka_dlq_topic
    )
    consumed = frozenset((settings.kafka_topic,) if binding is None else binding.topics)
    consumer = make_consumer(settings, group_id=f"{settings.kafka_group}-dlq-replay")
    consumer.subscribe([settings.kafka_dlq_topic])
    producer = make_producer(settings)
    replayed = skipped = 0
    last_seen = time.monotonic()
    end_offsets: dict[TopicPartition, int] = {}
    try:
        while max_messages is None or replayed + skipped < max_messages:
            records = consumer.poll(timeout_ms=500)
            for tp in consumer.assignment() - end_offsets.keys():
                end_offsets[tp] = consumer.end_offsets([tp])[tp]
            if not records:
                if _reached(consumer, end_offsets):
                    break
                if time.monotonic() - last_seen > idle_timeout_s:
                    break
                continue
            last_seen = time.monotonic()
            commit: dict[TopicPartition, OffsetAndMetadata] = {}
            for tp, messages in records.items():
                end = end_offsets.get(tp)
                for message in messages:
                    if end is not None and message.offset >= end:
                        consumer.seek(tp, message.offset)  # set aside by this run: not ours
                        break
                    headers = list(message.headers or [])
                    if reason is not None and dict(headers).get("reason", b"").decode() != reason:
                        producer.send(settings.kafka_dlq_topic, key=message.key, value=message.value, headers=headers)
                        skipped += 1
                    else:
                        origin = f"{message.topic}:{message.partition}:{message.offset}".encode()
                        source = dict(headers).get("source_topic", b"").decode("utf-8", "replace")
                        producer.send(
                            source if source in consumed else settings.kafka_topic,
                            key=message.key,
                            value=message.value,
                            headers=[(REPLAYED_HEADER, origin)],
                        )
                        replayed += 1
                    commit[tp] = OffsetAndMetadata(message.offset + 1, "", -1)
            producer.flush(timeout=30)
            if commit:
                consumer.commit(commit)
            if _reached(consumer, end_offsets):
                break
    finally:
        producer.close(timeout=10)
        consumer.close(autocommit=False)
    return ReplayResult(replayed=replayed, skipped=skipped)


def _reached(consumer: KafkaConsumer, end_offsets: dict[TopicPartition, int]) -> bool:
    """Whether every assigned partition has been read up to its end offset at the start."""
    assignment = consumer.assignment()
    return bool(assignment) and all(
        tp in end_offsets and consumer.position(tp) >= end_offsets[tp] for tp in assignment
    )
