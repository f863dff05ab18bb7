"""Kafka → ClickHouse against the real broker and engine: nothing lost, nothing twice."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
from factories import make_events, payload
from kafka_helpers import (
    LocalBroker,
    MemberGroup,
    cli_env,
    committed_offset,
    committed_total,
    end_offsets_total,
    fast_payloads,
    produce,
    read_topic,
)
from prometheus_client import REGISTRY

from retrylens.config import Settings
from retrylens.errors import InvalidBurstError
from retrylens.ingest.batch import Batch
from retrylens.ingest.consumer import IngestConsumer
from retrylens.ingest.dlq import REPLAYED_HEADER, replay_dead_letters
from retrylens.ingest.kafka_clients import ensure_topics
from retrylens.ingest.processor import InvalidReason
from retrylens.schemas import MAX_EVENT_BYTES, RetryEvent
from retrylens.sdk.transport.emitter import Emitter
from retrylens.sdk.transport.kafka import KafkaSink
from retrylens.sdk.transport.spool import Spool
from retrylens.store import EventStore

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]


def _store_stats(settings: Settings) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "retrylens", "store", "stats"], env=cli_env(settings), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("members", "events"), [(1, 100_000), (3, 20_000)], ids=["one-member-100k", "three-members-20k"]
)
def test_events_emitted_through_kafka_are_stored_exactly_once(
    kafka_settings: Settings, store: EventStore, members: int, events: int
) -> None:
    """One member reads 100k emitted events after the fact; three members (a stable group
    before the first emit, 20k events to keep the suite short) read them as they arrive."""
    ensure_topics(kafka_settings)
    emitted = make_events(events, tasks=2_000)
    group = MemberGroup(kafka_settings, store, members).start() if members > 1 else None
    emitter = Emitter(sink=KafkaSink(kafka_settings), spool=Spool(kafka_settings.effective_spool_dir / "t"))
    for event in emitted:
        assert emitter.emit(event)
    assert emitter.flush(120)
    emitter.close()
    if group is None:
        stats = IngestConsumer(kafka_settings, store).run(idle_exit_s=3)
        assert (stats.messages >= events, stats.dead_letters) == (True, 0)
    else:
        group.finish()
        assert all(group.messages), f"a member read nothing: {group.messages}"
        assert sum(group.messages) >= events
    assert store.count_distinct_events() == events
    assert store.event_ids() == {str(e.event_id) for e in emitted}
    assert committed_total(kafka_settings) == end_offsets_total(kafka_settings)


def test_consumer_killed_mid_stream_and_restarted_stores_each_event_once(kafka_settings: Settings) -> None:
    produce(kafka_settings, fast_payloads(100_000))
    env = cli_env(kafka_settings)
    consumer = subprocess.Popen([sys.executable, "-m", "retrylens", "consume"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while committed_total(kafka_settings) < 20_000:
            assert consumer.poll() is None, consumer.stderr.read().decode() if consumer.stderr else ""
            assert time.monotonic() < deadline, "consumer made no progress"
            time.sleep(0.2)
    finally:
        consumer.send_signal(signal.SIGKILL)
        consumer.wait()
    assert committed_total(kafka_settings) < 100_000, "killed too late to prove anything"
    restarted = subprocess.run(
        [sys.executable, "-m", "retrylens", "consume", "--idle-exit", "3"], env=env, capture_output=True, text=True, timeout=300
    )
    assert restarted.returncode == 0, restarted.stderr
    assert _store_stats(kafka_settings)["events"] == 100_000


class CrashBeforeCommit(Exception):
    pass


def _crash(batch: Batch) -> None:
    raise CrashBeforeCommit


WORKERS = pytest.mark.parametrize("workers", [0, 1], ids=["inline", "ingest-worker"])


@WORKERS
def test_batch_reinserted_after_a_crash_before_commit_is_deduplicated(
    kafka_settings: Settings, store: EventStore, workers: int
) -> None:
    settings = kafka_settings.model_copy(
        update={
            "kafka_topic_partitions": 1,
            "batch_max_rows": 300,
            "batch_max_seconds": 30.0,
            "ingest_workers": workers,
        }
    )
    produce(settings, fast_payloads(300))

    with pytest.raises(CrashBeforeCommit):
        IngestConsumer(settings, store, before_commit=_crash).run(idle_exit_s=5)
    assert store.count_rows() == 300
    assert committed_offset(settings) is None

    stats = IngestConsumer(settings, store).run(idle_exit_s=3)
    assert stats.rows == 300  # the batch was written again …
    assert store.count_rows() == 300  # … and ClickHouse dropped it by its token
    assert committed_offset(settings) == 300


def test_batches_of_members_that_all_crashed_before_commit_are_stored_once_by_a_new_group(
    kafka_settings: Settings, store: EventStore
) -> None:
    """Three members each insert a batch and crash before committing it; three new members
    replay every partition from the start. Their batches need not line up with the crashed
    ones (partitions move between members), so the copies that slip past the insert token
    collapse by ``event_id`` (exact reads use FINAL)."""
    settings = kafka_settings.model_copy(
        update={"kafka_topic_partitions": 3, "batch_max_rows": 200, "batch_max_seconds": 0.5}
    )
    ensure_topics(settings)
    crashed = MemberGroup(settings, store, 3, before_commit=_crash).start()
    produce(settings, fast_payloads(1_500))
    for member in crashed.members:
        member.thread.join(timeout=120)
    assert [type(m.error) for m in crashed.members] == [CrashBeforeCommit] * 3
    assert 0 < store.count_rows() < 1_500
    assert committed_total(settings) == 0

    replay = MemberGroup(settings, store, 3).start()
    replay.finish()
    assert committed_total(settings) == 1_500
    assert store.count_distinct_events() == 1_500
    assert store.count_rows() >= 1_500


def _malformed(i: int) -> tuple[bytes, InvalidReason]:
    """The i-th malformed payload (each unique) and the reason it must be dead-lettered with."""
    kind = i % 8
    if kind == 0:
        return f'{{"broken": {i}'.encode(), InvalidReason.BAD_JSON
    if kind == 1:
        return payload(attempt=f"n{i}"), InvalidReason.INVALID_FIELDS
    if kind == 2:
        body = orjson.loads(payload(decision_reason=f"r{i}"))
        del body["task_id"]
        return orjson.dumps(body), InvalidReason.INVALID_FIELDS
    if kind == 3:
        return payload(decision_reason=f"r{i}", input_features={"x": "y" * (MAX_EVENT_BYTES + 10)}), InvalidReason.OVERSIZED
    if kind == 4:
        return payload(schema_version=99, decision_reason=f"r{i}"), InvalidReason.UNKNOWN_SCHEMA_VERSION
    if kind == 5:
        return b"\xff\xfe" + str(i).encode() + b"\xc3\x28", InvalidReason.NOT_UTF8
    if kind == 6:
        return f"[{i}]".encode(), InvalidReason.NOT_AN_OBJECT
    return payload(project="", decision_reason=f"r{i}"), InvalidReason.INVALID_FIELDS


@WORKERS
def test_malformed_messages_go_to_the_dlq_with_reasons_and_valid_ones_are_stored(
    kafka_settings: Settings, store: EventStore, workers: int
) -> None:
    kafka_settings = kafka_settings.model_copy(update={"ingest_workers": workers})
    valid = fast_payloads(4_000)
    expected_reason = {}
    records: list[tuple[bytes | None, bytes]] = []
    for i, record in enumerate(valid):
        records.append(record)
        if i % 4 == 3:
            bad, reason = _malformed(i // 4)
            expected_reason[bad] = reason
            records.append((f"task-{i}".encode(), bad))
    assert len(expected_reason) == 1_000
    produce(kafka_settings, records)
    dead_before = REGISTRY.get_sample_value("retrylens_ingest_dead_letters_total", {"reason": "bad_json"}) or 0

    stats = IngestConsumer(kafka_settings, store).run(idle_exit_s=3)

    assert stats.dead_letters == 1_000
    assert store.count_distinct_events() == 4_000
    letters = read_topic(kafka_settings, kafka_settings.kafka_dlq_topic)
    assert len(letters) == 1_000
    for letter in letters:
        headers = dict(letter.headers)
        assert headers["reason"].decode() == expected_reason[letter.value].value
        assert headers["detail"]
        assert headers["source_topic"].decode() == kafka_settings.kafka_topic
        assert int(headers["source_offset"]) >= 0
    dead_after = REGISTRY.get_sample_value("retrylens_ingest_dead_letters_total", {"reason": "bad_json"})
    assert dead_after - dead_before == 125


@WORKERS
def test_a_burst_of_invalid_messages_stops_the_consumer_without_draining_the_topic(
    kafka_settings: Settings, store: EventStore, workers: int
) -> None:
    settings = kafka_settings.model_copy(
        update={"kafka_topic_partitions": 1, "dlq_max_consecutive": 200, "ingest_workers": workers}
    )
    produce(settings, fast_payloads(50) + [(b"k", b"{oops %d" % i) for i in range(400)])
    with pytest.raises(InvalidBurstError, match="200 consecutive invalid"):
        IngestConsumer(settings, store).run(idle_exit_s=5)
    assert committed_offset(settings) is None
    assert read_topic(settings, settings.kafka_dlq_topic, idle_s=2) == []


def test_dead_letters_are_replayed_into_the_event_topic(kafka_settings: Settings, store: EventStore) -> None:
    bad = [(b"k%d" % i, payload(schema_version=7, decision_reason=str(i))) for i in range(20)]
    produce(kafka_settings, fast_payloads(30) + bad)
    IngestConsumer(kafka_settings, store).run(idle_exit_s=3)
    result = replay_dead_letters(kafka_settings, idle_timeout_s=3)
    assert result.replayed == 20
    replayed = [m for m in read_topic(kafka_settings, kafka_settings.kafka_topic) if m.headers]
    assert sorted(m.value for m in replayed) == sorted(v for _, v in bad)
    assert all(dict(m.headers)[REPLAYED_HEADER].startswith(kafka_settings.kafka_dlq_topic.encode()) for m in replayed)
    assert replay_dead_letters(kafka_settings, idle_timeout_s=2).replayed == 0  # each letter once


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_sigterm_finishes_the_batch_commits_and_exits_cleanly_and_stats_say_it_keeps_up(
    kafka_settings: Settings,
) -> None:
    env = cli_env(kafka_settings)
    produce(kafka_settings, fast_payloads(5_000))
    port = _free_port()
    consumer = subprocess.Popen(
        [sys.executable, "-m", "retrylens", "consume", "--metrics-port", str(port), "--stats", "0.5"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while committed_total(kafka_settings) < 5_000:
            assert consumer.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        exposed = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        assert "retrylens_ingest_rows_inserted_total 5000.0" in exposed
        assert 'retrylens_ingest_lag_messages{partition="0"} 0.0' in exposed
        assert "retrylens_ingest_batch_rows_count" in exposed and "retrylens_ingest_batch_bytes_sum" in exposed
        time.sleep(1.2)  # at least one status line after the last commit
        consumer.send_signal(signal.SIGTERM)
        out, err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
    assert consumer.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["rows"] == 5_000
    status = [json.loads(line)["status"] for line in err.splitlines() if line.startswith('{"status"')][-1]
    assert (status["rows"], status["lag"], status["keeping_up"]) == (5_000, 0, True)
    assert _store_stats(kafka_settings)["events"] == 5_000


@pytest.fixture
def private_broker(tmp_path: Path) -> LocalBroker:
    broker = LocalBroker(tmp_path / "kafka2", port=19192, controller_port=19193)
    broker.run("start")
    yield broker
    broker.run("stop")


def test_broker_outage_spools_without_blocking_and_delivers_everything_after(
    kafka_settings: Settings, private_broker: LocalBroker
) -> None:
    settings = kafka_settings.model_copy(update={"kafka_bootstrap_servers": private_broker.bootstrap})
    ensure_topics(settings)
    spool_dir = settings.effective_spool_dir / "agent"
    emitter = Emitter(
        sink=KafkaSink(settings, flush_timeout_s=3, max_block_ms=1_000), spool=Spool(spool_dir), max_backoff_s=1.0
    )
    before = make_events(200, seed=1)
    for event in before:
        emitter.emit(event)
    assert emitter.flush(60)

    private_broker.run("kill")
    during = make_events(3_000, seed=2)
    latencies = []
    for i, event in enumerate(during):
        started = time.perf_counter()
        assert emitter.emit(event)
        latencies.append(time.perf_counter() - started)
        if i % 100 == 0:
            time.sleep(0.02)  # agents do work between events
    latencies.sort()
    assert latencies[int(len(latencies) * 0.99)] < 0.001, f"p99 emit {latencies[int(len(latencies) * 0.99)]:.6f}s"
    deadline = time.monotonic() + 20
    while not Spool(spool_dir, writer=False).read(max_records=10):
        assert time.monotonic() < deadline, "nothing was spooled during the outage"
        time.sleep(0.2)

    private_broker.run("start")
    assert emitter.flush(120), "spool was not replayed after the broker came back"
    emitter.close()
    stored = {RetryEvent.from_json_bytes(m.value).event_id for m in read_topic(settings, settings.kafka_topic)}
    assert stored == {e.event_id for e in before + during}
