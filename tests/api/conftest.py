"""Fixtures of the API tests: settings with two projects' keys, a seeded store, the app, a client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from apitest_support import KEYS, seed
from fastapi.testclient import TestClient
from serve_support import shared_server_fixture  # noqa: F401 - one real `retrylens serve` per session

from retrylens.api.app import create_app
from retrylens.config import Settings
from retrylens.store import EventStore


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


@pytest.fixture
def client(app) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client
