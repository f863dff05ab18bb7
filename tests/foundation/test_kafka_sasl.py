"""Kafka as companies run it: SASL logins (PLAIN, SCRAM), ACLs and the tenant binding.

A private broker (``KAFKA_SASL=1 KAFKA_AUTHORIZER=1 infra/kafka/kafka.sh start``) serves
one SASL_PLAINTEXT listener; ``admin`` is a super user, ``alice`` and ``bob`` may only do
what the ACLs below grant. The emitter, the consumer and the DLQ tool are configured by
the same settings an operator sets in the environment, and every assertion reads what
reached the chDB store or a topic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from factories import make_events
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import TopicAuthorizationFailedError
from kafka_drain import consume_to_end, read_to_end
from kafka_helpers import LocalBroker, free_port_block
from typer.testing import CliRunner

from retrylens.cli.main import app
from retrylens.config import Settings, load_settings
from retrylens.errors import ConfigError
from retrylens.ingest.consumer import IngestConsumer
from retrylens.ingest.dlq import replay_dead_letters
from retrylens.ingest.kafka_clients import ensure_topics, make_producer, security
from retrylens.ingest.processor import InvalidReason
from retrylens.sdk.transport.build import build_emitter
from retrylens.sdk.transport.settings import EmitterSettings
from retrylens.sdk.transport.spool import Spool
from retrylens.store import EventStore

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse, pytest.mark.slow]

#: Client, controller and TLS listeners of the private broker: a free block, so two suites
#: side by side (two CI runs on one machine) do not start brokers on the same ports.
PORT = free_port_block(3)
CONTROLLER_PORT, TLS_PORT = PORT + 1, PORT + 2
runner = CliRunner()
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    local = LocalBroker(tmp_path_factory.mktemp("kafka-sasl"), port=PORT, controller_port=CONTROLLER_PORT)
    local.env.update(
        KAFKA_SASL="1",
        KAFKA_AUTHORIZER="1",
        KAFKA_SASL_ADMIN_PASSWORD=PASSWORDS["admin"],
        KAFKA_SASL_USERS=f"alice:{PASSWORDS['alice']} bob:{PASSWORDS['bob']}",
        KAFKA_SSL_PORT=str(TLS_PORT),
    )
    try:
        local.run("start")
        yield local
    finally:
        local.run("stop")


def _unique(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:8]}"


def secured(base: Settings, broker: LocalBroker, user: str, mechanism: str, **extra: object) -> Settings:
    """``base`` logged in as ``user``, through :func:`load_settings` (its checks run)."""
    values = base.model_dump()
    values.update(
        kafka_bootstrap_servers=broker.bootstrap,
        kafka_security_protocol="SASL_PLAINTEXT",
        kafka_sasl_mechanism=mechanism,
        kafka_sasl_username=user,
        kafka_sasl_password=PASSWORDS.get(user, "wrong"),
        kafka_topic_partitions=2,
        kafka_bootstrap_timeout_s=4,
        **extra,
    )
    return load_settings(**values)


def security_env(user: str, password: str, mechanism: str) -> dict[str, str]:
    return {
        "RETRYLENS_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "RETRYLENS_KAFKA_SASL_MECHANISM": mechanism,
        "RETRYLENS_KAFKA_SASL_USERNAME": user,
        "RETRYLENS_KAFKA_SASL_PASSWORD": password,
    }


def allow(admin_settings: Settings, user: str, topic: str, *operations: ACLOperation) -> None:
    """Grant ``operations`` on ``topic`` and wait until the broker's authorizer has them: ACLs
    reach it through the metadata log, and it is what answers a describe (one broker)."""
    acls = [ACL(f"User:{user}", "*", op, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, topic))
            for op in operations]
    granted = ACLFilter(f"User:{user}", None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL))
    admin = KafkaAdminClient(bootstrap_servers=admin_settings.kafka_bootstrap_servers, **security(admin_settings))
    try:
        result = admin.create_acls(acls)
        assert not result["failed"], result
        deadline = time.monotonic() + 30
        while not set(acls) <= set(admin.describe_acls(granted)[0]):
            assert time.monotonic() < deadline, f"the broker did not list {acls} within 30 s"
            time.sleep(0.05)
    finally:
        admin.close()


def read_all(settings: Settings, topic: str) -> list:
    """Every message of ``topic`` up to its end now, read with ``settings``' login."""
    return read_to_end(settings, topic)


def committed(settings: Settings) -> dict[str, int]:
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers, **security(settings))
    try:
        offsets = admin.list_group_offsets(settings.kafka_group).get(settings.kafka_group, {})
    finally:
        admin.close()
    totals: dict[str, int] = {}
    for tp, meta in offsets.items():
        totals[tp.topic] = totals.get(tp.topic, 0) + max(0, meta.offset)
    return totals


def cli_env(settings: Settings) -> dict[str, str]:
    """Environment of a ``retrylens`` command pointed at ``settings`` (own chDB under the data dir)."""
    return {
        "RETRYLENS_DATA_DIR": str(settings.data_dir),
        "KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
        "RETRYLENS_KAFKA_TOPIC": settings.kafka_topic,
        "RETRYLENS_KAFKA_DLQ_TOPIC": settings.kafka_dlq_topic,
        "RETRYLENS_KAFKA_GROUP": settings.kafka_group,
        "RETRYLENS_KAFKA_BOOTSTRAP_TIMEOUT_S": "3",
    }


def cli(settings: Settings, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """A ``retrylens`` command in a process of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "retrylens", *args],
        env={**os.environ, **cli_env(settings), **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    """Exit code and stderr; the timeout is for a loaded machine (imports alone can take 20 s)."""
    _, stderr = process.communicate(timeout=240)
    return process.returncode, stderr


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])  # SCRAM-SHA-512: the tests below
def test_emitter_consumer_and_dlq_replay_log_in_and_events_are_stored(
    broker: LocalBroker, settings: Settings, store: EventStore, monkeypatch: pytest.MonkeyPatch, mechanism: str
) -> None:
    topic = _unique("events.alice")
    ingest = secured(settings, broker, "admin", mechanism, kafka_topic=topic, kafka_dlq_topic=f"{topic}.dlq",
                     kafka_group=_unique("ingest"))
    ensure_topics(ingest)
    allow(ingest, "alice", topic, ACLOperation.WRITE, ACLOperation.DESCRIBE)

    # The agent: alice, configured by environment variables only.
    for name, value in {
        **security_env("alice", PASSWORDS["alice"], mechanism),
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
        "RETRYLENS_KAFKA_TOPIC": topic,
        "RETRYLENS_DATA_DIR": str(settings.data_dir / "agent"),
    }.items():
        monkeypatch.setenv(name, value)
    emitter = build_emitter()
    events = make_events(300, project="alice", seed=3)
    for event in events:
        assert emitter.emit(event)
    assert emitter.flush(30)
    assert emitter.stats["spooled"] == 0, emitter.stats
    emitter.close()
    # And one broken message, sent with alice's own login, for the dead-letter road.
    producer = make_producer(secured(settings, broker, "alice", mechanism, kafka_topic=topic))
    producer.send(topic, key=b"bad", value=b"{not json").get(timeout=10)
    producer.close()

    stats = consume_to_end(ingest, IngestConsumer(ingest, store))
    assert stats.rows == 300 and stats.dead_letters == 1
    assert store.count_distinct_events(project="alice") == 300
    assert store.event_ids() == {str(e.event_id) for e in events}
    letters = read_all(ingest, ingest.kafka_dlq_topic)
    assert [dict(m.headers)["reason"] for m in letters] == [InvalidReason.BAD_JSON.value.encode()]
    assert committed(ingest) == {topic: 301}

    # The DLQ tool logs in the same way: the letter goes back to the event topic.
    result = replay_dead_letters(ingest, idle_timeout_s=2)
    assert result.replayed == 1
    back = [m for m in read_all(ingest, topic) if m.key == b"bad"]
    assert len(back) == 2  # the original and its replay


def test_wrong_password_fails_fast_and_clearly_and_the_emitter_keeps_every_event(
    broker: LocalBroker, settings: Settings, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = _unique("events.alice")
    ingest = secured(settings, broker, "admin", "SCRAM-SHA-256", kafka_topic=topic, kafka_dlq_topic=f"{topic}.dlq",
                     kafka_group=_unique("ingest"))
    ensure_topics(ingest)
    allow(ingest, "alice", topic, ACLOperation.WRITE, ACLOperation.DESCRIBE)

    # The agent with a wrong password: emit() never blocks, every event waits in the spool.
    agent_dir = settings.data_dir / "agent"
    wrong = EmitterSettings.from_env({
        **security_env("alice", "not-her-password", "SCRAM-SHA-256"),
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
        "RETRYLENS_KAFKA_TOPIC": topic,
        "RETRYLENS_DATA_DIR": str(agent_dir),
    })
    emitter = build_emitter(wrong)
    events = make_events(50, project="alice", seed=4)
    # No emit waits on the broker: the sink's shortest wait on one is its max_block_ms (2 s),
    # so each emit's wall time stays under 1 s (the 50 emits' total was bounded at 0.5 s, which
    # a loaded machine's preemptions can pass without any emit waiting).
    slowest = 0.0
    for event in events:
        started = time.monotonic()
        assert emitter.emit(event)
        slowest = max(slowest, time.monotonic() - started)
    assert slowest < 1.0
    assert not emitter.flush(4)  # nothing reached Kafka...
    emitter.close(timeout_s=1)
    spool_dir = wrong.effective_spool_dir / "kafka-default"
    reader = Spool(spool_dir, writer=False)
    assert len(reader.read(max_records=1000)) == 50  # ...and nothing was lost
    reader.close()

    # Fixed password (and the other SCRAM): the same spool is delivered and stored.
    fixed = EmitterSettings.from_env({
        **security_env("alice", PASSWORDS["alice"], "SCRAM-SHA-512"),
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
        "RETRYLENS_KAFKA_TOPIC": topic,
        "RETRYLENS_DATA_DIR": str(agent_dir),
    })
    emitter = build_emitter(fixed)
    assert emitter.flush(30)
    emitter.close()
    consume_to_end(ingest, IngestConsumer(ingest, store))
    assert store.event_ids() == {str(e.event_id) for e in events}

    # The server side: a clear ConfigError once the bootstrap timeout (4 s here) is over...
    bad = ingest.model_copy(update={"kafka_sasl_password": "wrong"})
    for attempt in (lambda: ensure_topics(bad), lambda: replay_dead_letters(bad, idle_timeout_s=1)):
        started = time.monotonic()
        with pytest.raises(ConfigError, match=r"as user 'admin'\) within 4s .* refused the login"):
            attempt()
        assert time.monotonic() - started < 4 + 5
    # ...which the commands print as one line with exit code 2 (consume in a process of its
    # own: it opens a chDB store, and chDB allows one data directory per process).
    bad_login = security_env("admin", "wrong", "SCRAM-SHA-512")
    consume = cli(ingest, "consume", "--idle-exit", "1", env=bad_login)
    for name, value in {**cli_env(ingest), **bad_login}.items():
        monkeypatch.setenv(name, value)
    replay = runner.invoke(app, ["dlq", "replay", "--idle-timeout", "1"])
    assert replay.exit_code == 2 and "configuration error" in replay.output, replay.output
    assert "refused the login" in replay.output
    code, stderr = finish(consume)
    assert code == 2 and "configuration error" in stderr and "refused the login" in stderr, stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"RETRYLENS_KAFKA_SASL_MECHANISM": "SCRAM-SHA-1"}, "kafka_sasl_mechanism"),
        ({"RETRYLENS_KAFKA_SECURITY_PROTOCOL": "SASL"}, "kafka_security_protocol"),
        ({"RETRYLENS_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT"}, "use SASL_PLAINTEXT or SASL_SSL"),
        ({"RETRYLENS_KAFKA_SASL_PASSWORD": ""}, "needs kafka_sasl_password"),
        ({"RETRYLENS_KAFKA_SSL_CAFILE": "/nonexistent/ca.pem"}, "use SSL or SASL_SSL"),
    ],
)
def test_bad_security_settings_are_refused_at_the_boundary(env: dict[str, str], needle: str) -> None:
    full = {
        **security_env("alice", PASSWORDS["alice"], "SCRAM-SHA-256"),
        "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9",  # never contacted: refused before any client
        **env,
    }
    full = {k: v for k, v in full.items() if v}
    with pytest.raises(ConfigError, match=needle):
        EmitterSettings.from_env(full)
    with pytest.raises(ConfigError, match=needle):
        load_settings(**{k.removeprefix("RETRYLENS_").lower(): v for k, v in full.items()})


def test_consume_refuses_bad_security_and_binding_settings_with_exit_code_2(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the environment, as an operator sets them (the binding as JSON)."""
    cases = [
        ({**security_env("admin", "x", "SCRAM-SHA-1")}, "kafka_sasl_mechanism"),
        ({**security_env("admin", "x", "PLAIN"), "RETRYLENS_PROJECT_TOPICS": json.dumps({"alice": []})},
         "project_topics['alice']: expected a non-empty list of topics"),
        ({"RETRYLENS_PROJECT_TOPICS": "{alice"}, "project_topics"),
    ]
    base = settings.model_copy(update={"kafka_bootstrap_servers": "127.0.0.1:9"})
    for env, needle in cases:
        with monkeypatch.context() as patch:
            for name, value in {**cli_env(base), **env}.items():
                patch.setenv(name, value)
            result = runner.invoke(app, ["consume", "--idle-exit", "1"])
        assert result.exit_code == 2, result.output
        assert "configuration error" in result.output and needle in result.output, result.output


def test_a_tenant_cannot_write_another_tenants_events(
    broker: LocalBroker, settings: Settings, store: EventStore
) -> None:
    alice_topic, bob_topic = _unique("events.alice"), _unique("events.bob")
    shared = _unique("events.shared")
    ingest = secured(
        settings, broker, "admin", "SCRAM-SHA-512",
        kafka_topic=shared, kafka_dlq_topic=f"{shared}.dlq", kafka_group=_unique("ingest"),
        project_topics={"alice": [alice_topic], "bob": [bob_topic]},
        ingest_workers=1,  # the binding travels to the decode workers (the inline road: test_binding.py)
    )
    ensure_topics(ingest)  # creates the bound topics too
    allow(ingest, "alice", alice_topic, ACLOperation.WRITE, ACLOperation.DESCRIBE)
    allow(ingest, "bob", bob_topic, ACLOperation.WRITE, ACLOperation.DESCRIBE)
    alice = make_producer(secured(settings, broker, "alice", "SCRAM-SHA-256"))
    bob = make_producer(secured(settings, broker, "bob", "PLAIN"))
    try:
        # Kafka's ACLs: alice may not write bob's topic at all.
        with pytest.raises(TopicAuthorizationFailedError):
            alice.send(bob_topic, value=make_events(1, project="bob")[0].to_json_bytes()).get(timeout=10)
        # The binding: alice's own topic, but events that claim to be bob's.
        own, forged, bobs = (make_events(40, project="alice", seed=5), make_events(7, project="bob", seed=6),
                             make_events(20, project="bob", seed=7))
        for event in [*own, *forged]:
            alice.send(alice_topic, key=event.task_id.encode(), value=event.to_json_bytes())
        for event in bobs:
            bob.send(bob_topic, key=event.task_id.encode(), value=event.to_json_bytes())
        alice.flush(10)
        bob.flush(10)
    finally:
        alice.close()
        bob.close()

    stats = consume_to_end(ingest, IngestConsumer(ingest, store))
    assert (stats.rows, stats.dead_letters) == (60, 7)
    assert store.count_distinct_events(project="alice") == 40
    assert store.count_distinct_events(project="bob") == 20
    assert store.event_ids() == {str(e.event_id) for e in [*own, *bobs]}
    letters = read_all(ingest, ingest.kafka_dlq_topic)
    assert sorted(orjson.loads(m.value)["event_id"] for m in letters) == sorted(str(e.event_id) for e in forged)
    for letter in letters:
        headers = dict(letter.headers)
        assert headers["reason"] == b"project_not_bound_to_topic"
        assert headers["source_topic"] == alice_topic.encode()
        assert b"'bob' is not bound to topic" in headers["detail"]
    offsets = committed(ingest)
    assert (offsets[alice_topic], offsets[bob_topic], offsets.get(shared, 0)) == (47, 20, 0)


def test_tls_listener_carries_the_emitter_and_the_consumer(
    broker: LocalBroker, settings: Settings, store: EventStore, tmp_path: Path
) -> None:
    """SASL_SSL with the broker's self-signed certificate as ``kafka_ssl_cafile``."""
    cafile = str(broker.home / "config" / "tls" / "ca.pem")
    tls = {"kafka_security_protocol": "SASL_SSL", "kafka_ssl_cafile": cafile,
           "kafka_bootstrap_servers": f"127.0.0.1:{TLS_PORT}"}
    topic = _unique("events.alice")
    ingest = secured(settings, broker, "admin", "SCRAM-SHA-512", kafka_topic=topic,
                     kafka_dlq_topic=f"{topic}.dlq", kafka_group=_unique("ingest")).model_copy(update=tls)
    ensure_topics(ingest)
    allow(ingest, "alice", topic, ACLOperation.WRITE, ACLOperation.DESCRIBE)
    agent = EmitterSettings.from_env({
        **security_env("alice", PASSWORDS["alice"], "SCRAM-SHA-256"),
        "RETRYLENS_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "RETRYLENS_KAFKA_SSL_CAFILE": cafile,
        "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{TLS_PORT}",
        "RETRYLENS_KAFKA_TOPIC": topic,
        "RETRYLENS_DATA_DIR": str(settings.data_dir / "agent"),
    })
    emitter = build_emitter(agent)
    events = make_events(100, project="alice", seed=8)
    for event in events:
        assert emitter.emit(event)
    assert emitter.flush(30)
    assert emitter.stats["spooled"] == 0, emitter.stats
    emitter.close()
    consume_to_end(ingest, IngestConsumer(ingest, store))
    assert store.event_ids() == {str(e.event_id) for e in events}

    # A client that trusts another CA (not the broker's) gets the clear error.
    other_ca = tmp_path / "other-ca.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=other", "-days", "1",
         "-keyout", str(tmp_path / "other-key.pem"), "-out", str(other_ca)],
        check=True, capture_output=True, timeout=60,
    )
    with pytest.raises(ConfigError, match="TLS mismatch"):
        ensure_topics(ingest.model_copy(update={"kafka_ssl_cafile": str(other_ca)}))
