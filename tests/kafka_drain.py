"""Reading and consuming Kafka topics in tests up to where they end, not until the clock says so.

A test that has produced and flushed everything knows where each topic ends: its end
offsets at that moment. Reading up to them (or running a consumer until its group has
committed up to them) proves what an idle wait proved (every message that is there, and
the consumer's stats and the store as they are once all of it is committed) without the
2-5 s of silence an idle wait spends after the last message, in every such test.

Use these only once every writer is done (producers flushed, consumers returned): a
message written later is not waited for.
"""

from __future__ import annotations

import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaError

from retrylens.config import Settings
from retrylens.ingest.binding import parse_project_topics
from retrylens.ingest.consumer import ConsumeStats, IngestConsumer
from retrylens.ingest.kafka_clients import ensure_topics, security


def _client_options(settings: Settings) -> dict:
    return {"bootstrap_servers": settings.kafka_bootstrap_servers.split(","), **security(settings)}


def topic_ends(settings: Settings, topics: list[str]) -> dict[TopicPartition, int]:
    """Each partition's end offset now (a topic that does not exist has none)."""
    consumer = KafkaConsumer(**_client_options(settings))
    try:
        partitions = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        return dict(consumer.end_offsets(partitions)) if partitions else {}
    finally:
        consumer.close()


def read_to_end(settings: Settings, topic: str, *, timeout_s: float = 120.0) -> list[ConsumerRecord]:
    """Every message of ``topic`` from its beginning to its end offsets as they are now
    (no consumer group: the partitions are assigned, nothing is committed)."""
    consumer = KafkaConsumer(enable_auto_commit=False, **_client_options(settings))
    messages: list[ConsumerRecord] = []
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            return messages
        ends = consumer.end_offsets(partitions)
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, f"{topic} not read to its end {ends} within {timeout_s}s"
            for records in consumer.poll(timeout_ms=500).values():
                messages.extend(records)
    finally:
        consumer.close()
    return messages


def consumed_topics(settings: Settings) -> list[str]:
    """The topics an :class:`IngestConsumer` of ``settings`` reads (the binding's, or the event topic)."""
    binding = parse_project_topics(
        settings.project_topics, event_topic=settings.kafka_topic, dlq_topic=settings.kafka_dlq_topic
    )
    return [settings.kafka_topic] if binding is None else list(binding.topics)


def _committed_up_to(admin: KafkaAdminClient, group: str, ends: dict[TopicPartition, int]) -> bool:
    try:
        offsets = admin.list_group_offsets(group).get(group, {})
    except KafkaError:  # no coordinator yet (a fresh broker creates its offsets topic first)
        return False
    return all(max(0, offsets[tp].offset if tp in offsets else 0) >= end for tp, end in ends.items())


def consume_to_end(
    settings: Settings, consumer: IngestConsumer, *, timeout_s: float = 120.0
) -> ConsumeStats:
    """Run ``consumer`` (built on ``settings``) until its group has committed every message
    its topics hold now, then stop it as :meth:`IngestConsumer.stop` does (the same road as
    an idle exit: the loop ends, the chain is joined, the consumer closes). An error the
    run raises is raised here; a run that does not get there within ``timeout_s`` fails."""
    ensure_topics(settings)
    ends = topic_ends(settings, consumed_topics(settings))
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["stats"] = consumer.run()
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread below
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="retrylens-test-consume", daemon=True)
    thread.start()
    admin = KafkaAdminClient(**_client_options(settings))
    deadline = time.monotonic() + timeout_s
    try:
        while thread.is_alive() and not _committed_up_to(admin, settings.kafka_group, ends):
            assert time.monotonic() < deadline, (
                f"the consumer did not commit up to {ends} within {timeout_s}s "
                f"(read {consumer.stats.messages} messages; {consumer.activity()})"
            )
            time.sleep(0.1)
    finally:
        admin.close()
        consumer.stop()
        thread.join(timeout=60)
    assert not thread.is_alive(), "the consumer did not stop"
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["stats"]  # type: ignore[return-value]
