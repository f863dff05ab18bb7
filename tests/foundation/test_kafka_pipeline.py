"""Kafka → ClickHouse against the real broker and engine: nothing lost, nothing twice."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest
from factories import make_events, payload
from kafka_drain import consume_to_end
from kafka_helpers import (
    LocalBroker,
    MemberGroup,
    cli_env,
    committed_offset,
    committed_offsets,
    committed_total,
    end_offsets,
    end_offsets_total,
    fast_payloads,
    free_port_block,
    produce,
    read_topic,
    stable_members,
    wait_for,
)
from prometheus_client import REGISTRY
from typer.testing import CliRunner

from retrylens.cli.main import app
from retrylens.config import Settings
from retrylens.errors import InvalidBurstError
from retrylens.ingest.batch import Batch
from retrylens.ingest.consumer import IngestConsumer
from retrylens.ingest.dlq import REPLAYED_HEADER, replay_dead_letters
from retrylens.ingest.kafka_clients import ensure_topics
from retrylens.ingest.processor import InvalidReason
from retrylens.schemas import MAX_EVENT_BYTES
from retrylens.sdk.transport.emitter import Emitter
from retrylens.sdk.transport.kafka import KafkaSink
from retrylens.sdk.transport.spool import Spool
from retrylens.store import EventStore

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]
runner = CliRunner()


def _store_stats(settings: Settings) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "retrylens", "store", "stats"], env=cli_env(settings), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("members", "events"), [(1, 30_000), (3, 20_000)], ids=["one-member-30k", "three-members-20k"]
)
def test_events_emitted_through_kafka_are_stored_exactly_once(
    kafka_settings: Settings, store: EventStore, members: int, events: int
) -> None:
    """One member reads 30k emitted events after the fact; three members (a stable group
    before the first emit, 20k events to keep the suite short) read them as they arrive.

    30k, not 100k (until session 18: 13.1 s of CPU, now 3.6): the emits outrun the pump either
    way, so the queue's overflow and the spool's replay are on the road (asserted for the
    one-member case: 19,000 of 30,000 went through the spool at load 5, 81,000 of 100,000)."""
    ensure_topics(kafka_settings)
    emitted = make_events(events, tasks=2_000)
    group = MemberGroup(kafka_settings, store, members).start() if members > 1 else None
    emitter = Emitter(sink=KafkaSink(kafka_settings), spool=Spool(kafka_settings.effective_spool_dir / "t"))
    for event in emitted:
        assert emitter.emit(event)
    assert emitter.flush(120)
    emitter.close()
    if group is None:
        assert emitter.stats["spooled_queue_full"] > 0, f"the spool's road was not taken: {emitter.stats}"
        stats = consume_to_end(kafka_settings, IngestConsumer(kafka_settings, store))
        assert (stats.messages >= events, stats.dead_letters) == (True, 0)
    else:
        group.finish()
        assert all(group.messages), f"a member read nothing: {group.messages}"
        assert sum(group.messages) >= events
    assert store.count_distinct_events() == events
    assert store.event_ids() == {str(e.event_id) for e in emitted}
    assert committed_total(kafka_settings) == end_offsets_total(kafka_settings)


# The kill scenario's size: 30k events (100k until session 18), produced from a thread while
# the test watches the commits, the kill once 3k are committed, and the kill must leave at least
# a quarter uncommitted for the restart (asserted since session 18, so a kill that lands late
# fails instead of proving nothing). Before, the whole stream was produced first and the watch
# began after: the consumer committed during the production, so the kill landed wherever the
# production ended (68,152 of 100,000 committed at the kill at load 4, with the threshold at 20k;
# 30k produced first had 10-23k committed) and a consumer that kept up would have committed all.
KILL_EVENTS = 30_000
KILL_AFTER_COMMITTED = 3_000
KILL_LEAVES_AT_LEAST = KILL_EVENTS // 4


@pytest.mark.slow
def test_consumer_group_killed_mid_stream_and_restarted_stores_each_event_once(kafka_settings: Settings) -> None:
    """A `consume --members 2` process is SIGKILLed mid-stream once both members hold
    partitions; a restarted process of two members replays what was not committed (the
    single-member road is the same code with one thread)."""
    ensure_topics(kafka_settings)
    env = cli_env(kafka_settings)
    consume = [sys.executable, "-m", "retrylens", "consume", "--members", "2"]
    consumer = subprocess.Popen(consume, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: consumer.poll() is not None or stable_members(kafka_settings) == 2, "the group did not form")
        assert consumer.poll() is None, consumer.stderr.read().decode() if consumer.stderr else ""
        produced: list[BaseException | None] = []

        def produce_all() -> None:
            try:
                produce(kafka_settings, fast_payloads(KILL_EVENTS))
                produced.append(None)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the test below
                produced.append(exc)

        producer = threading.Thread(target=produce_all, name="kill-scenario-producer")
        producer.start()
        deadline = time.monotonic() + 120
        while committed_total(kafka_settings) < KILL_AFTER_COMMITTED:
            assert consumer.poll() is None, consumer.stderr.read().decode() if consumer.stderr else ""
            assert time.monotonic() < deadline, "consumer made no progress"
            time.sleep(0.05)
    finally:
        consumer.send_signal(signal.SIGKILL)
        consumer.wait()
    producer.join(timeout=120)
    assert produced == [None], produced
    # A commit the killed process had already sent may still land after its death: read
    # the committed offsets once they have settled (the restart starts from those).
    at_kill = committed_offsets(kafka_settings)
    for _ in range(20):
        time.sleep(0.5)
        settled = committed_offsets(kafka_settings)
        if settled == at_kill:
            break
        at_kill = settled
    committed_at_kill = sum(at_kill.values())
    assert KILL_AFTER_COMMITTED <= committed_at_kill <= KILL_EVENTS - KILL_LEAVES_AT_LEAST, (
        f"the kill did not land mid-stream: {committed_at_kill} of {KILL_EVENTS} committed")
    restarted = subprocess.run([*consume, "--idle-exit", "3"], env=env, capture_output=True, text=True, timeout=300)
    assert restarted.returncode == 0, restarted.stderr
    result = json.loads(restarted.stdout.strip().splitlines()[-1])
    assert len(result["members"]) == 2 and result["messages"] >= KILL_EVENTS - committed_at_kill
    assert _store_stats(kafka_settings)["events"] == KILL_EVENTS
    assert committed_offsets(kafka_settings) == end_offsets(kafka_settings)


class CrashBeforeCommit(Exception):
    pass


def _crash(batch: Batch) -> None:
    raise CrashBeforeCommit


WORKERS = pytest.mark.parametrize(
    "workers", [0, pytest.param(1, marks=pytest.mark.slow)], ids=["inline", "ingest-worker"]
)


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

    stats = consume_to_end(settings, IngestConsumer(settings, store))
    assert stats.rows == 300  # the batch was written again …
    assert store.count_rows() == 300  # … and ClickHouse dropped it by its token
    assert committed_offset(settings) == 300


def test_batches_of_members_that_all_crashed_before_commit_are_stored_once_by_a_new_group(
    kafka_settings: Settings, store: EventStore
) -> None:
    """Three members (failing alone, as three processes would) each insert a batch and crash
    before committing it; three new members
    replay every partition from the start. Their batches need not line up with the crashed
    ones (partitions move between members), so the copies that slip past the insert token
    collapse by ``event_id`` (exact reads use FINAL)."""
    settings = kafka_settings.model_copy(
        update={"kafka_topic_partitions": 3, "batch_max_rows": 200, "batch_max_seconds": 0.5}
    )
    ensure_topics(settings)
    crashed = MemberGroup(settings, store, 3, before_commit=_crash, halt_together=False).start()
    produce(settings, fast_payloads(1_500))
    assert crashed.group.join(timeout_s=120)
    assert [type(error) for error in crashed.errors] == [CrashBeforeCommit] * 3
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


@pytest.mark.parametrize(
    ("workers", "members"),
    [(0, 1), pytest.param(1, 2, marks=pytest.mark.slow)],
    ids=["inline-one-member", "ingest-worker-two-members"],
)
def test_malformed_messages_go_to_the_dlq_with_reasons_and_valid_ones_are_stored(
    kafka_settings: Settings, store: EventStore, workers: int, members: int
) -> None:
    """Two members (a stable group before the first message) dead-letter what each reads,
    once: a rebalance commits what it flushed, so no letter is sent twice."""
    kafka_settings = kafka_settings.model_copy(update={"ingest_workers": workers})
    # Before any member runs: a running group dead-letters what it reads at once.
    dead_before = REGISTRY.get_sample_value("retrylens_ingest_dead_letters_total", {"reason": "bad_json"}) or 0
    group = MemberGroup(kafka_settings, store, members).start() if members > 1 else None
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
    if group is None:
        stats = consume_to_end(kafka_settings, IngestConsumer(kafka_settings, store))
    else:
        group.finish()  # no member failed, no commit ran ahead of the store
        assert all(group.messages), f"a member read nothing: {group.messages}"
        stats = group.group.stats

    assert stats.dead_letters == 1_000
    assert store.count_distinct_events() == 4_000
    assert committed_offsets(kafka_settings) == end_offsets(kafka_settings)
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


def test_a_burst_of_invalid_messages_stops_the_consumer_without_draining_the_topic(
    kafka_settings: Settings, store: EventStore
) -> None:
    """One member, inline; the worker road with two members is the test below."""
    settings = kafka_settings.model_copy(update={"kafka_topic_partitions": 1, "dlq_max_consecutive": 200})
    produce(settings, fast_payloads(50) + [(b"k", b"{oops %d" % i) for i in range(400)])
    with pytest.raises(InvalidBurstError, match="200 consecutive invalid"):
        IngestConsumer(settings, store).run(idle_exit_s=5)
    assert committed_offset(settings) is None
    assert read_topic(settings, settings.kafka_dlq_topic) == []


@pytest.mark.slow
def test_a_member_that_trips_the_burst_breaker_stops_the_group_without_committing_past_unstored_rows(
    kafka_settings: Settings, store: EventStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`consume --members 2` (one ingest worker each; run in this process on the test's own
    store), one partition each: the member holding partition 0 meets a burst of invalid
    messages there and trips; the whole group stops (the other member neither goes on with
    partition 1 nor takes over partition 0 and drains it), nothing reaches the DLQ, every
    committed offset is covered by stored rows, and the command exits 3 saying why. (One
    partition per member: a member's breaker counts its partitions' messages in the order
    read, so valid chunks of another partition could break the run of invalid ones.)"""
    settings = kafka_settings.model_copy(update={"dlq_max_consecutive": 200, "kafka_topic_partitions": 2})
    ensure_topics(settings)
    env = {
        **cli_env(settings),
        "RETRYLENS_CLICKHOUSE_DSN": settings.clickhouse_dsn,
        "RETRYLENS_CLICKHOUSE_DATABASE": settings.clickhouse_database,
        "RETRYLENS_DLQ_MAX_CONSECUTIVE": "200",
        "RETRYLENS_INGEST_WORKERS": "1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    returned = threading.Event()

    def feed() -> None:
        wait_for(lambda: stable_members(settings) == 2, "the group did not form")
        produce(settings, fast_payloads(50) + [(b"k", b"{oops %d" % i) for i in range(1_000)], partition=0)
        # Partition 1 keeps flowing until the command returns (at most ~2 minutes): a group
        # that went on after the trip would never reach its idle exit while the stream runs,
        # however late the trip comes on a busy machine.
        for _chunk in range(240):
            if returned.is_set():
                return
            produce(settings, fast_payloads(1_500), partition=1)
            time.sleep(0.5)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:  # the command installs its own (in the main thread, where this runs)
        result = runner.invoke(app, ["consume", "--members", "2", "--idle-exit", "30"])
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    stopped_mid_stream = feeder.is_alive()
    returned.set()
    feeder.join(timeout=120)
    assert result.exit_code == 3, result.output
    assert "consumer stopped" in result.output and "200 consecutive invalid" in result.output, result.output
    # Exactly one member tripped: the halt stopped the other before it could take over
    # partition 0 and meet the same burst (without the halt both trip, and this fails).
    trips = re.findall(r"consumer-group member \d of 2 failed: .*consecutive invalid", caplog.text)
    assert len(trips) == 1, caplog.text[-3000:]
    assert read_topic(settings, settings.kafka_dlq_topic) == []  # the topic was not drained
    committed, ends = committed_offsets(settings), end_offsets(settings)
    assert committed.get(0, 0) <= 50, committed  # never past the burst
    for partition, offset in committed.items():
        below = store.client.query(
            store.sql(
                "SELECT uniqExact(kafka_offset) FROM [[db]].events WHERE kafka_partition = {p:Int32} "
                "AND kafka_offset < {o:Int64}"
            ),
            parameters={"p": partition, "o": offset},
        ).result_rows[0][0]
        assert below == offset, f"p{partition} committed to {offset} with {below} rows stored below it"
    assert stopped_mid_stream, f"the group went on with partition 1 after the trip: {committed} of {ends}"
    assert committed.get(1, 0) < ends[1]


def test_dead_letters_are_replayed_into_the_event_topic(kafka_settings: Settings, store: EventStore) -> None:
    bad = [(b"k%d" % i, payload(schema_version=7, decision_reason=str(i))) for i in range(20)]
    produce(kafka_settings, fast_payloads(30) + bad)
    consume_to_end(kafka_settings, IngestConsumer(kafka_settings, store))
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


@pytest.mark.slow
def test_sigterm_stops_every_member_which_commits_and_exits_cleanly_and_stats_say_the_group_keeps_up(
    kafka_settings: Settings,
) -> None:
    """`consume --members 2`: both members read (a stable group before the first message);
    SIGTERM makes each finish its batch, commit and leave; exit code 0; the status lines
    and the metrics cover both members."""
    env = cli_env(kafka_settings)
    ensure_topics(kafka_settings)
    port = _free_port()
    consumer = subprocess.Popen(
        [sys.executable, "-m", "retrylens", "consume", "--members", "2", "--metrics-port", str(port), "--stats", "0.5"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_for(lambda: consumer.poll() is not None or stable_members(kafka_settings) == 2, "the group did not form")
        produce(kafka_settings, fast_payloads(5_000))
        deadline = time.monotonic() + 120
        while committed_total(kafka_settings) < 5_000:
            assert consumer.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        exposed = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        assert "retrylens_ingest_rows_inserted_total 5000.0" in exposed
        for partition in range(kafka_settings.kafka_topic_partitions):
            assert f'retrylens_ingest_lag_messages{{partition="{partition}"}} 0.0' in exposed
        assert "retrylens_ingest_batch_rows_count" in exposed and "retrylens_ingest_batch_bytes_sum" in exposed
        time.sleep(1.2)  # at least one status line after the last commit
        consumer.send_signal(signal.SIGTERM)
        out, err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
    assert consumer.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["rows"] == 5_000
    assert [m["rows"] > 0 for m in result["members"]] == [True, True], result
    status = [json.loads(line)["status"] for line in err.splitlines() if line.startswith('{"status"')][-1]
    assert (status["rows"], status["lag"], status["keeping_up"]) == (5_000, 0, True)
    assert sorted(m["rows"] for m in status["members"]) == sorted(m["rows"] for m in result["members"])
    assert _store_stats(kafka_settings)["events"] == 5_000
    assert committed_offsets(kafka_settings) == end_offsets(kafka_settings)


@pytest.fixture
def private_broker(tmp_path: Path) -> LocalBroker:
    port = int(os.environ.get("RETRYLENS_TEST_BROKER_PORT") or free_port_block(2))
    broker = LocalBroker(tmp_path / "kafka2", port=port, controller_port=port + 1)
    broker.run("start")
    yield broker
    broker.run("stop")


@pytest.mark.slow
def test_broker_outage_spools_without_blocking_and_delivers_everything_after(
    kafka_settings: Settings, private_broker: LocalBroker, store: EventStore
) -> None:
    """The broker dies under agents and a group of two members: emit() does not wait, the
    events are spooled, and once the broker is back the members (which lived through the
    outage) store every event once and commit the whole topic."""
    settings = kafka_settings.model_copy(update={"kafka_bootstrap_servers": private_broker.bootstrap})
    ensure_topics(settings)
    group = MemberGroup(settings, store, 2).start()
    spool_dir = settings.effective_spool_dir / "agent"
    emitter = Emitter(
        sink=KafkaSink(settings, flush_timeout_s=3, max_block_ms=1_000), spool=Spool(spool_dir), max_backoff_s=1.0
    )
    before = make_events(200, seed=1)
    for event in before:
        emitter.emit(event)
    assert emitter.flush(60)
    wait_for(lambda: committed_total(settings) == len(before), "the group did not ingest before the outage")

    private_broker.run("kill")
    during = make_events(3_000, seed=2)
    walls, cpus = [], []
    for i, event in enumerate(during):
        started, started_cpu = time.perf_counter(), time.thread_time()
        assert emitter.emit(event)
        walls.append(time.perf_counter() - started)
        cpus.append(time.thread_time() - started_cpu)
        if i % 100 == 0:
            time.sleep(0.02)  # agents do work between events
    # emit()'s own work in CPU time (a wall-clock p99 counted the preemptions of a loaded
    # machine and the pump thread's hold on the GIL), and no wait in it: an emit that waited
    # for the dead broker (max_block_ms=1,000) would make the median wall time show it.
    cpus.sort()
    assert cpus[int(len(cpus) * 0.99)] < 0.001, f"p99 emit CPU {cpus[int(len(cpus) * 0.99)]:.6f}s"
    assert sorted(walls)[len(walls) // 2] < 0.001, f"median emit {sorted(walls)[len(walls) // 2]:.6f}s"
    deadline = time.monotonic() + 20
    while not Spool(spool_dir, writer=False).read(max_records=10):
        assert time.monotonic() < deadline, "nothing was spooled during the outage"
        time.sleep(0.2)

    private_broker.run("start")
    assert emitter.flush(120), "spool was not replayed after the broker came back"
    emitter.close()
    group.finish()  # no member failed, no commit ran ahead of the store, the topic is committed
    emitted = {str(e.event_id) for e in before + during}
    assert store.event_ids() == emitted
    assert store.count_distinct_events() == len(emitted)
    assert committed_offsets(settings) == end_offsets(settings)
