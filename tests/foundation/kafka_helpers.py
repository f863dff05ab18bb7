"""Helpers for tests against the real Kafka broker (no mocks of Kafka anywhere)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from factories import make_event
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kafka_drain import read_to_end

from retrylens.config import Settings
from retrylens.ingest.batch import Batch
from retrylens.ingest.consumer import IngestConsumer
from retrylens.ingest.group import ConsumerGroup
from retrylens.ingest.kafka_clients import ensure_topics, make_producer
from retrylens.store import EventStore

REPO = Path(__file__).resolve().parents[2]
KAFKA_SH = REPO / "infra" / "kafka" / "kafka.sh"
CLUSTER_SH = REPO / "infra" / "kafka" / "cluster.sh"


def _load_free_ports():  # noqa: ANN202 - a module object
    """``infra/free_ports.py``, the one search for free broker ports `.ci/run` uses too."""
    spec = importlib.util.spec_from_file_location("retrylens_infra_free_ports", REPO / "infra" / "free_ports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: A block of consecutive free loopback ports for a private broker or cluster.
free_port_block = _load_free_ports().free_port_block


def fast_payloads(n: int, *, tasks: int = 500) -> list[tuple[bytes, bytes]]:
    """``n`` distinct valid serialized events, built from one template (fast for 100k)."""
    template = orjson.loads(make_event(kind="attempt_started").to_json_bytes())
    out = []
    for i in range(n):
        task = f"task-{i % tasks}"
        template.update(event_id=str(uuid.uuid4()), task_id=task, correlation_id=f"{task}/{i}", attempt=i % 4)
        out.append((task.encode(), orjson.dumps(template)))
    return out


def produce(
    settings: Settings,
    records: list[tuple[bytes | None, bytes]],
    topic: str | None = None,
    *,
    partition: int | None = None,
) -> None:
    """Send ``records`` (key, value) and wait until every one is acknowledged; ``partition``:
    all of them to that partition instead of the key's."""
    ensure_topics(settings)
    producer = make_producer(settings, linger_ms=5)
    for key, value in records:
        producer.send(topic or settings.kafka_topic, key=key, value=value, partition=partition)
    producer.flush(timeout=120)
    producer.close()


def read_topic(settings: Settings, topic: str, *, timeout_s: float = 120.0) -> list:
    """Every message of ``topic`` from the beginning up to its end now (``kafka_drain.read_to_end``:
    call it once every writer is done)."""
    return read_to_end(settings, topic, timeout_s=timeout_s)


def committed_total(settings: Settings) -> int:
    """Sum of the ingest group's committed offsets on the event topic."""
    return sum(committed_offsets(settings).values())


def committed_offsets(settings: Settings) -> dict[int, int]:
    """The ingest group's committed offset per partition of the event topic (absent: none)."""
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers.split(","))
    try:
        offsets = admin.list_group_offsets(settings.kafka_group).get(settings.kafka_group, {})
    except Exception:  # noqa: BLE001 - the group may not exist yet
        offsets = {}
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == settings.kafka_topic and meta.offset >= 0}


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
    """Members of the ingest group that hold partitions, once it is stable (0 while it is
    still rebalancing). A member can be in a stable group with nothing assigned: the first
    assignment may be made before the leader knows the new topic's partitions."""
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers.split(","))
    try:
        group = admin.describe_groups([settings.kafka_group]).get(settings.kafka_group, {})
    except KafkaError:  # no coordinator yet (the offsets topic is still being created)
        return 0
    finally:
        admin.close()
    if group.get("group_state") != "Stable":
        return 0
    return sum(
        1
        for member in group.get("members", [])
        if any(topic["partitions"] for topic in (member.get("member_assignment") or {}).get("assigned_partitions", []))
    )


def end_offsets_total(settings: Settings) -> int:
    """Messages ever written to the event topic (sum of its partitions' end offsets)."""
    return sum(end_offsets(settings).values())


def end_offsets(settings: Settings) -> dict[int, int]:
    """Each partition's end offset on the event topic."""
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers.split(","))
    try:
        partitions = [TopicPartition(settings.kafka_topic, p) for p in consumer.partitions_for_topic(settings.kafka_topic)]
        return {tp.partition: end for tp, end in consumer.end_offsets(partitions).items()}
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


class StoredBeforeCommit:
    """A ``before_commit`` seam that records every batch whose valid rows are not all in the
    store when its offsets are about to be committed (then runs ``then``, e.g. a crash)."""

    def __init__(self, store: EventStore, problems: list[str], then: Callable[[Batch], None] | None = None) -> None:
        self.store = store
        self.problems = problems
        self.then = then

    def __call__(self, batch: Batch) -> None:
        valid: dict[int, int] = {}
        for _topic, partition, offsets, invalid, _refused in batch.verdicts:
            valid[partition] = valid.get(partition, 0) + len(offsets) - len(invalid)
        for (_topic, partition), (first, last) in batch.spans.items():
            stored = self.store.client.query(
                self.store.sql(
                    "SELECT count() FROM [[db]].events WHERE kafka_partition = {p:Int32} "
                    "AND kafka_offset BETWEEN {a:Int64} AND {b:Int64}"
                ),
                parameters={"p": partition, "a": first, "b": last},
            ).result_rows[0][0]
            if stored < valid.get(partition, 0):
                self.problems.append(
                    f"commit of p{partition} {first}-{last} ahead of the store ({stored} of {valid[partition]} rows)"
                )
        if self.then is not None:
            self.then(batch)


class CheckedMember:
    """One consumer-group member on its own thread; checks each batch is stored before its commit.

    Threads share the test's embedded store (chDB allows one engine per process), so
    several members are several group members as the broker sees them. For members
    started together use :class:`MemberGroup` (the production :class:`ConsumerGroup`).
    """

    def __init__(
        self,
        settings: Settings,
        store: EventStore,
        problems: list[str],
        *,
        idle_exit_s: float | None = 4,
        before_commit: Callable[[Batch], None] | None = None,
        consumer_config: dict[str, Any] | None = None,
    ) -> None:
        """``before_commit`` runs after the check (e.g. to crash the member there)."""
        self.idle_exit_s = idle_exit_s
        self.consumer = IngestConsumer(settings, store, before_commit=StoredBeforeCommit(store, problems, before_commit),
                                       consumer_config=consumer_config)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.consumer.run(idle_exit_s=self.idle_exit_s)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def start(self) -> CheckedMember:
        self.thread.start()
        return self


class MemberGroup:
    """The production :class:`ConsumerGroup` (members on threads sharing the store), every
    commit checked against the store, stopped once every message on the topic is committed
    (no idle exit: a pause in the stream is not its end)."""

    def __init__(
        self,
        settings: Settings,
        store: EventStore,
        count: int,
        *,
        before_commit: Callable[[Batch], None] | None = None,
        halt_together: bool = True,
    ) -> None:
        """``halt_together=False``: members fail alone, as separate processes would."""
        self.settings = settings
        self.problems: list[str] = []
        self.group = ConsumerGroup(
            settings, store, count, before_commit=StoredBeforeCommit(store, self.problems, before_commit),
            halt_together=halt_together,
        )

    def start(self, timeout_s: float = 60) -> MemberGroup:
        """Start every member and wait until the group is stable with all of them."""
        self.group.start()
        wait_for(lambda: stable_members(self.settings) == len(self.group.members), "the group did not form", timeout_s)
        return self

    def finish(self, settings: Settings | None = None, timeout_s: float = 120) -> None:
        """Wait until the group committed the whole topic, stop every member, fail on any
        member error or commit ahead of the store. ``settings``: e.g. surviving brokers only."""
        settings = settings or self.settings
        written = end_offsets_total(settings)
        wait_for(lambda: committed_total(settings) >= written, "the group did not catch up", timeout_s)
        self.group.stop()
        assert self.group.join(timeout_s=60), "a member did not stop"
        assert [e for e in self.group.errors if e] == []
        assert self.problems == []  # every commit came after its rows were in the store

    @property
    def errors(self) -> list[BaseException | None]:
        return self.group.errors

    @property
    def messages(self) -> list[int]:
        """Messages each member read."""
        return [m.stats.messages for m in self.group.members]


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
