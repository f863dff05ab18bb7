"""Fixtures of the API tests: settings with two projects' keys, a seeded store, the app, a client."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from apitest_support import KEYS, seed
from fastapi.testclient import TestClient
from serve_support import shared_server_fixture  # noqa: F401 - one real `retrylens serve` per session

from retrylens.api.app import create_app
from retrylens.config import Settings, load_settings
from retrylens.store import EventStore, open_store


@pytest.fixture
def api_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"api_keys": dict(KEYS)})


@pytest.fixture
def seeded(store: EventStore) -> EventStore:
    seed(store)
    return store


@pytest.fixture
def app(api_settings: Settings, seeded: EventStore):
    return create_app(api_settings, seeded)


@pytest.fixture(scope="module")
def bare_client(tmp_path_factory, chdb_path) -> Iterator[TestClient]:
    """One app over an empty store for a whole module: for tests that aim at the API's
    bounds and guards and need no data (a fresh seeded store per test costs seconds)."""
    settings = load_settings(data_dir=tmp_path_factory.mktemp("bare"), clickhouse_dsn=f"chdb://{chdb_path}",
                             clickhouse_database=f"bare_{uuid.uuid4().hex[:8]}", kafka_bootstrap_servers="",
                             api_keys=dict(KEYS))
    store = open_store(settings)
    with TestClient(create_app(settings, store)) as test_client:
        yield test_client
    store.client.command(f"DROP DATABASE IF EXISTS `{settings.clickhouse_database}`")


@pytest.fixture
def client(app) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client
