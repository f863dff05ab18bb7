"""Shared fixtures: the real ClickHouse engine (embedded chDB) and the real Kafka broker.

chDB allows one data directory per process, so the whole test session shares one engine
and every test gets a database of its own. Kafka tests get topics and a consumer group of
their own on the broker that ``.ci/run`` starts (``infra/kafka/kafka.sh``); a missing
broker fails those tests rather than skipping them.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_template import open_copied_store

from retrylens.config import Settings, load_settings
from retrylens.store import EventStore

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
DEFAULT_TEST_KAFKA = "127.0.0.1:9092"


@pytest.fixture(scope="session")
def chdb_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chdb-engine")


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def settings(tmp_path: Path, chdb_path: Path) -> Settings:
    """Embedded settings with this test's own database, data dir and spool."""
    return load_settings(
        data_dir=tmp_path / "data",
        clickhouse_dsn=f"chdb://{chdb_path}",
        clickhouse_database=_unique("t"),
        kafka_bootstrap_servers="",
        batch_max_seconds=0.2,
    )


@pytest.fixture
def store(settings: Settings) -> Iterator[EventStore]:
    """A migrated store in this test's database (copied from a template: tests/store_template.py)."""
    event_store = open_copied_store(settings)
    yield event_store
    event_store.client.command(f"DROP DATABASE IF EXISTS `{settings.clickhouse_database}`")


def _reachable(bootstrap: str) -> bool:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    bootstrap = os.environ.get("RETRYLENS_TEST_KAFKA", DEFAULT_TEST_KAFKA)
    if not _reachable(bootstrap):
        pytest.fail(
            f"no Kafka broker at {bootstrap}: start one with `bash infra/kafka/kafka.sh start` "
            "(.ci/run does this) or set RETRYLENS_TEST_KAFKA"
        )
    return bootstrap


@pytest.fixture
def kafka_settings(settings: Settings, kafka_bootstrap: str) -> Settings:
    """``settings`` plus the test broker, with topics and a group of this test's own."""
    topic = _unique("events")
    return settings.model_copy(
        update={
            "kafka_bootstrap_servers": kafka_bootstrap,
            "kafka_topic": topic,
            "kafka_dlq_topic": f"{topic}.dlq",
            "kafka_group": _unique("group"),
            "kafka_topic_partitions": 4,
        }
    )
