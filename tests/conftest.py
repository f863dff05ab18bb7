"""Shared fixtures: the real ClickHouse engine (embedded chDB) and the real Kafka broker.

chDB allows one data directory per process, so the whole test session shares one engine
and every test gets a database of its own. Kafka tests get topics and a consumer group of
their own on the broker that ``.ci/run`` starts (``infra/kafka/kafka.sh``); a missing
broker fails those tests rather than skipping them.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import threadpoolctl

# One BLAS/OpenMP thread per test process. CI runs two pytest-xdist workers on two cores;
# with OpenBLAS's default of a thread per core, the classifier's many small fits (a few
# dozen rows, thousands of word features) spend most of their CPU in threads spinning for
# each other: one `train_from_traces` of the 40-trace sample took 11.7 s of CPU, 2.2 s with
# one thread. The variables reach the libraries loaded later and every subprocess a test
# starts (the CLI, the demo, the server); threadpoolctl limits those a pytest plugin has
# already loaded (numpy's). A variable set by the caller is kept.
for _threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")
threadpoolctl.threadpool_limits(int(os.environ["OPENBLAS_NUM_THREADS"]), user_api="blas")
threadpoolctl.threadpool_limits(int(os.environ["OMP_NUM_THREADS"]), user_api="openmp")

from long_modules import LONG_MODULES  # noqa: E402
from store_template import open_copied_store  # noqa: E402

from retrylens.config import Settings, load_settings  # noqa: E402
from retrylens.store import EventStore  # noqa: E402

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


@pytest.fixture(scope="module")
def module_stores(
    tmp_path_factory: pytest.TempPathFactory, chdb_path: Path
) -> Iterator[Callable[[], EventStore]]:
    """Makes migrated stores that live until the module's last test (each dropped then).

    For cases that only read what one set-up wrote: one store loaded (and sealed) once and
    read by every case, instead of a copy, a load and a seal per case.
    """
    made: list[tuple[EventStore, str]] = []

    def make() -> EventStore:
        database = _unique("m")
        settings = load_settings(
            data_dir=tmp_path_factory.mktemp("module-store"),
            clickhouse_dsn=f"chdb://{chdb_path}",
            clickhouse_database=database,
            kafka_bootstrap_servers="",
            batch_max_seconds=0.2,
        )
        made.append((open_copied_store(settings), database))
        return made[-1][0]

    yield make
    for event_store, database in made:
        event_store.client.command(f"DROP DATABASE IF EXISTS `{database}`")


def _reachable(bootstrap: str) -> bool:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


def _kafka_ready_file() -> Path | None:
    """infra/test.sh starts the broker while pytest collects and touches this file once
    ``kafka.sh start`` has seen the broker serve requests (unset outside infra/test.sh)."""
    ready_file = os.environ.get("RETRYLENS_TEST_KAFKA_READY_FILE")
    return Path(ready_file) if ready_file else None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Wait here, after collection and before any test, for a broker start still under way:
    so the wait never counts against a test's timeout. A start that fails or takes longer
    than its own timeout makes the Kafka tests fail (``kafka_bootstrap``), not the others."""
    ready_file = _kafka_ready_file()
    if ready_file is None or not session.items:
        return
    deadline = time.monotonic() + float(os.environ.get("KAFKA_START_TIMEOUT", "90")) + 30
    failed = ready_file.with_name(ready_file.name + ".failed")
    while not ready_file.exists() and not failed.exists() and time.monotonic() < deadline:
        time.sleep(0.2)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    bootstrap = os.environ.get("RETRYLENS_TEST_KAFKA", DEFAULT_TEST_KAFKA)
    ready_file = _kafka_ready_file()
    if ready_file is not None and not ready_file.exists():
        pytest.fail(
            f"the Kafka broker that infra/test.sh starts is not ready (no {ready_file}); "
            "its start log follows the test report"
        )
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long modules first (``LONG_MODULES``), then the rest by number of tests; a module's
    own tests keep their order."""
    module_of = {id(item): item.nodeid.split("::", 1)[0] for item in items}
    sizes: dict[str, int] = {}
    for module in module_of.values():
        sizes[module] = sizes.get(module, 0) + 1
    rank = {module: i for i, module in enumerate(LONG_MODULES)}

    def key(item: pytest.Item) -> tuple[int, int]:
        module = module_of[id(item)]
        return (rank.get(module, len(LONG_MODULES)), -sizes[module])

    items.sort(key=key)
