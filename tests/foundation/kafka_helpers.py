"""Helpers for tests against the real Kafka broker (no mocks of Kafka anywhere)."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import orjson
from factories import make_event
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

from retrylens.config import Settings
from retrylens.ingest.kafka_clients import ensure_topics, make_producer

REPO = Path(__file__).resolve().parents[2]
KAFKA_SH = REPO / "infra" / "kafka" / "kafka.sh"


def fast_payloads(n: int, *, tasks: int = 500) -> list[tuple[bytes, bytes]]:
    """``n`` distinct valid serialized events, built from one template (fast for 100k)."""
    template = orjson.loads(make_event(kind="attempt_started").to_json_bytes())
    out = []
    for i in range(n):
        task = f"task-{i % tasks}"
        template.update(event_id=str(uuid.uuid4()), task_id=task, correlation_id=f"{task}/{i}", attempt=i % 4)
        out.append((task.encode(), orjson.dumps(template)))
    return out


def produce(settings: Settings, records: list[tuple[bytes | None, bytes]], topic: str | None = None) -> None:
    ensure_topics(settings)
    producer = make_producer(settings, linger_ms=5)
    for key, value in records:
        producer.send(topic or settings.kafka_topic, key=key, value=value)
    producer.flush(timeout=120)
    producer.close()


def read_topic(settings: Settings, topic: str, *, idle_s: float = 3.0, timeout_s: float = 120.0) -> list:
    """Every message of ``topic`` from the beginning (own throwaway group)."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=settings.kafka_bootstrap_servers,
        group_id=f"reader-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    messages = []
    deadline = time.monotonic() + timeout_s
    last = time.monotonic()
    try:
        while time.monotonic() < deadline and time.monotonic() - last < idle_s:
            batch = consumer.poll(timeout_ms=500)
            for records in batch.values():
                messages.extend(records)
                last = time.monotonic()
    finally:
        consumer.close()
    return messages


def committed_total(settings: Settings) -> int:
    """Sum of the ingest group's committed offsets on the event topic."""
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    try:
        offsets = admin.list_group_offsets(settings.kafka_group).get(settings.kafka_group, {})
    except Exception:  # noqa: BLE001 - the group may not exist yet
        offsets = {}
    finally:
        admin.close()
    return sum(meta.offset for tp, meta in offsets.items() if tp.topic == settings.kafka_topic and meta.offset > 0)


def committed_offset(settings: Settings, partition: int = 0) -> int | None:
    consumer = KafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers, group_id=settings.kafka_group, enable_auto_commit=False
    )
    try:
        return consumer.committed(TopicPartition(settings.kafka_topic, partition))
    finally:
        consumer.close()


def cli_env(settings: Settings) -> dict[str, str]:
    """Environment that points a ``retrylens`` subprocess at ``settings``."""
    return {
        **os.environ,
        "RETRYLENS_DATA_DIR": str(settings.data_dir),
        "KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
        "RETRYLENS_KAFKA_TOPIC": settings.kafka_topic,
        "RETRYLENS_KAFKA_DLQ_TOPIC": settings.kafka_dlq_topic,
        "RETRYLENS_KAFKA_GROUP": settings.kafka_group,
        "RETRYLENS_KAFKA_TOPIC_PARTITIONS": str(settings.kafka_topic_partitions),
        "RETRYLENS_BATCH_MAX_ROWS": "2000",
        "RETRYLENS_BATCH_MAX_SECONDS": "0.5",
    }


class LocalBroker:
    """A second, private broker (own ports and data) that a test may stop and start."""

    def __init__(self, home: Path, port: int, controller_port: int) -> None:
        self.home = home
        self.port = port
        self.env = {
            **os.environ,
            "KAFKA_HOME": str(home),
            "KAFKA_PORT": str(port),
            "KAFKA_CONTROLLER_PORT": str(controller_port),
            "KAFKA_HEAP_OPTS": "-Xms256m -Xmx384m",
        }
        shared_lib = Path(os.environ.get("KAFKA_HOME", REPO / ".kafka")) / "lib"
        home.mkdir(parents=True, exist_ok=True)
        if shared_lib.exists() and not (home / "lib").exists():
            (home / "lib").symlink_to(shared_lib)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def run(self, command: str) -> None:
        subprocess.run(["bash", str(KAFKA_SH), command], env=self.env, check=True, capture_output=True, timeout=180)
