"""Helpers for tests against the real Kafka broker (no mocks of Kafka anywhere)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson
from factories import make_event
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from retrylens.config import Settings
from retrylens.ingest.batch import Batch
from retrylens.ingest.consumer import IngestConsumer
from retrylens.ingest.kafka_clients import ensure_topics, make_producer
from retrylens.store import EventStore

REPO = Path(__file__).resolve().parents[2]
KAFKA_SH = REPO / "infra" / "kafka" / "kafka.sh"
CLUSTER_SH = REPO / "infra" / "kafka" / "cluster.sh"


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
        bootstrap_servers=settings.kafka_bootstrap_servers.split(","),
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
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers.split(","))
    try:
        offsets = admin.list_group_offsets(settings.kafka_group).get(settings.kafka_group, {})
    except Exception:  # noqa: BLE001 - the group may not exist yet
        offsets = {}
    finally:
        admin.close()
    return sum(meta.offset for tp, meta in offsets.items() if tp.topic == settings.kafka_topic and meta.offset > 0)


def committed_offset(settings: Settings, partition: int = 0) -> int | None:
    consumer = KafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers.split(","),
        group_id=settings.kafka_group,
        enable_auto_commit=False,
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


def stable_members(settings: Settings) -> int:
    """Members of the ingest group once it is stable (0 while it is still rebalancing)."""
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers.split(","))
    try:
        group = admin.describe_groups([settings.kafka_group]).get(settings.kafka_group, {})
    except KafkaError:  # no coordinator yet (the offsets topic is still being created)
        return 0
    finally:
        admin.close()
    return len(group.get("members", [])) if group.get("group_state") == "Stable" else 0


def end_offsets_total(settings: Settings) -> int:
    """Messages ever written to the event topic (sum of its partitions' end offsets)."""
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers.split(","))
    try:
        partitions = [TopicPartition(settings.kafka_topic, p) for p in consumer.partitions_for_topic(settings.kafka_topic)]
        return sum(consumer.end_offsets(partitions).values())
    finally:
        consumer.close()


class LocalCluster:
    """A private multi-node KRaft cluster (``infra/kafka/cluster.sh``) whose nodes a test may kill."""

    def __init__(self, home: Path, port: int, nodes: int = 3) -> None:
        self.nodes = nodes
        self.port = port
        self.env = {
            **os.environ,
            "KAFKA_CLUSTER_HOME": str(home),
            "KAFKA_CLUSTER_PORT": str(port),
            "KAFKA_NODES": str(nodes),
            "KAFKA_LIB_DIR": str(Path(os.environ.get("KAFKA_HOME", REPO / ".kafka")) / "lib"),
        }

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port + i}" for i in range(self.nodes))

    def run(self, *args: str) -> None:
        result = subprocess.run(
            ["bash", str(CLUSTER_SH), *args], env=self.env, capture_output=True, text=True, timeout=240
        )
        assert result.returncode == 0, f"cluster.sh {' '.join(args)} failed:\n{result.stderr[-4000:]}"

    def partitions(self, topic: str, bootstrap: str | None = None) -> list[dict]:
        """The topic's partitions as the cluster describes them (leader_id, isr_nodes, ...)."""
        admin = KafkaAdminClient(bootstrap_servers=(bootstrap or self.bootstrap).split(","))
        try:
            return admin.describe_topics([topic])[0]["partitions"]
        finally:
            admin.close()

    def leaders(self, topic: str, bootstrap: str | None = None) -> dict[int, int]:
        """Partition → leader node id; empty while the cluster cannot answer (mid-failover)."""
        try:
            return {p["partition_index"]: p["leader_id"] for p in self.partitions(topic, bootstrap)}
        except KafkaError:
            return {}


class CheckedMember:
    """One consumer-group member on its own thread; checks each batch is stored before its commit.

    Threads share the test's embedded store (chDB allows one engine per process), so
    several members are several group members as the broker sees them.
    """

    def __init__(
        self,
        settings: Settings,
        store: EventStore,
        problems: list[str],
        *,
        idle_exit_s: float | None = 4,
        before_commit: Callable[[Batch], None] | None = None,
    ) -> None:
        """``before_commit`` runs after the check (e.g. to crash the member there)."""
        self.store = store
        self.problems = problems
        self.idle_exit_s = idle_exit_s
        self.before_commit = before_commit
        self.consumer = IngestConsumer(settings, store, before_commit=self._check)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.consumer.run(idle_exit_s=self.idle_exit_s)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _check(self, batch: Batch) -> None:
        for (_topic, partition), (first, last) in batch.spans.items():
            stored = self.store.client.query(
                self.store.sql(
                    "SELECT count() FROM [[db]].events WHERE kafka_partition = {p:Int32} "
                    "AND kafka_offset BETWEEN {a:Int64} AND {b:Int64}"
                ),
                parameters={"p": partition, "a": first, "b": last},
            ).result_rows[0][0]
            if stored < last - first + 1:
                self.problems.append(f"commit of p{partition} {first}-{last} ahead of the store ({stored} rows)")
        if self.before_commit is not None:
            self.before_commit(batch)

    def start(self) -> CheckedMember:
        self.thread.start()
        return self


class MemberGroup:
    """Several checked members of the ingest group, started together, stopped once every
    message on the topic is committed (no idle exit: a pause in the stream is not its end)."""

    def __init__(
        self, settings: Settings, store: EventStore, count: int, *, before_commit: Callable[[Batch], None] | None = None
    ) -> None:
        self.settings = settings
        self.problems: list[str] = []
        self.members = [
            CheckedMember(settings, store, self.problems, idle_exit_s=None, before_commit=before_commit)
            for _ in range(count)
        ]

    def start(self, timeout_s: float = 60) -> MemberGroup:
        """Start every member and wait until the group is stable with all of them."""
        for member in self.members:
            member.start()
        wait_for(lambda: stable_members(self.settings) == len(self.members), "the group did not form", timeout_s)
        return self

    def finish(self, settings: Settings | None = None, timeout_s: float = 120) -> None:
        """Wait until the group committed the whole topic, stop every member, fail on any
        member error or commit ahead of the store. ``settings``: e.g. surviving brokers only."""
        settings = settings or self.settings
        written = end_offsets_total(settings)
        wait_for(lambda: committed_total(settings) >= written, "the group did not catch up", timeout_s)
        for member in self.members:
            member.consumer.stop()
        for member in self.members:
            member.thread.join(timeout=60)
        assert not any(m.thread.is_alive() for m in self.members), "a member did not stop"
        assert [m.error for m in self.members if m.error] == []
        assert self.problems == []  # every commit came after its rows were in the store

    @property
    def messages(self) -> list[int]:
        """Messages each member read."""
        return [m.consumer.stats.messages for m in self.members]


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
