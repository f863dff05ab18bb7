"""Dashboard fixtures: a store seeded once per module with a simulated fleet, a trained risk
model, an alert that fires and a policy report, and the sources pages read (page runs: dashboard_runs)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dashboard_seed import SEED, seed_fleet
from dashboard_seed import TASKS as SEED_TASKS
from hostile_seed import seed_hostile

from retrylens.analytics import alerts as alerting
from retrylens.analytics.model_store import ModelStore, models_dir
from retrylens.analytics.training import train_from_store
from retrylens.config import Settings, load_settings
from retrylens.dashboard import source as sources
from retrylens.store import EventStore, open_store

#: Candidates of the seeded policy report (changes merged over the fleet's live policy).
CANDIDATES = {"cap-2": {"caps": {"timeout": 2, "server_error": 2}, "budget": {"max_attempts": 3}},
              "patient": {"caps": {"timeout": 5}, "budget": {"max_attempts": 8}}}


def precheck_fleet(store: EventStore, settings: Settings, *, tasks: int = 60) -> None:
    """Pre-check the seeded fleet's first tasks through the real API (stored, joined to their outcomes)."""
    from fastapi.testclient import TestClient

    from retrylens.api.app import create_app
    from retrylens.api.auth import local_token
    from retrylens.simulation import load_scenario
    from retrylens.simulation.tasks import generate_tasks

    app = create_app(settings, store)
    with TestClient(app, headers={"X-API-Key": local_token(settings)}) as http:
        for task in generate_tasks(load_scenario(), SEED_TASKS, SEED)[:tasks]:
            body = {"project": task.template.project, "agent": task.template.agent, "task_input": task.text[:64_000],
                    "task_id": task.task_id}
            assert http.post("/v1/precheck", json=body).status_code == 200


def write_policy_report(store: EventStore, folder: Path) -> None:
    """A real policy report of the stored history (``report policies``' code), few replicates."""
    from retrylens.evaluation.candidates import Candidate, overlay
    from retrylens.evaluation.history import build_history, read_frame
    from retrylens.evaluation.report import build_report, write_report
    from retrylens.evaluation.shadow import compare_shadow
    from retrylens.simulation import fleet_policy, load_scenario

    live = fleet_policy(load_scenario())
    candidates = [Candidate(name, overlay(live, {"id": name, **changes}, source=name), name)
                  for name, changes in CANDIDATES.items()]
    report = build_report(build_history(read_frame(store)), live, candidates, shadow=compare_shadow(store),
                          replicates=50)
    write_report(report, folder)


@pytest.fixture(scope="module")
def seeded(chdb_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EventStore, Settings]]:
    """A fleet of 300 tasks, a model trained on it, one firing alert, one report."""
    data_dir = tmp_path_factory.mktemp("dashboard-data")
    settings = load_settings(data_dir=data_dir, clickhouse_dsn=f"chdb://{chdb_path}",
                             clickhouse_database=f"dash_{uuid.uuid4().hex[:10]}", kafka_bootstrap_servers="")
    store = open_store(settings)
    seed_fleet(store)
    train_from_store(store, model_store=ModelStore(models_dir(settings)))
    alerting.save_rule(store, alerting.AlertRule(name="retry rate above 10%", metric="retry_rate", op=">",
                                                 threshold=0.1, window_minutes=3 * 24 * 60))
    alerting.save_rule(store, alerting.AlertRule(name="budget exhaustions", metric="budget_exhaustions",
                                                 op=">", threshold=5, window_minutes=60))
    alerting.evaluate_alerts(store, now=datetime.now(UTC))
    write_policy_report(store, data_dir / "reports" / "seeded")
    precheck_fleet(store, settings)
    yield store, settings
    store.client.command(f"DROP DATABASE IF EXISTS `{settings.clickhouse_database}`")


@pytest.fixture
def seeded_source(seeded: tuple[EventStore, Settings]) -> Iterator[sources.StoreSource]:
    store, settings = seeded
    source = sources.StoreSource(store, settings=settings, reports_dir=settings.data_dir / "reports")
    sources.use(source)
    yield source
    sources.use(None)


@pytest.fixture
def empty_source(store: EventStore, settings: Settings) -> Iterator[sources.StoreSource]:
    source = sources.StoreSource(store, settings=settings)
    sources.use(source)
    yield source
    sources.use(None)


#: Where the hostile store's images and links point (nothing listens: AppTest runs fetch nothing).
HOSTILE_BASE = "http://127.0.0.1:9"


@pytest.fixture(scope="module")
def hostile_store(chdb_path: Path, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[EventStore, Settings, dict[str, str]]]:
    """Two projects (one hostile in every word, ``hostile_seed``), a firing rule, a policy report."""
    data_dir = tmp_path_factory.mktemp("hostile-data")
    settings = load_settings(data_dir=data_dir, clickhouse_dsn=f"chdb://{chdb_path}",
                             clickhouse_database=f"hostile_{uuid.uuid4().hex[:10]}", kafka_bootstrap_servers="")
    store = open_store(settings)
    values = seed_hostile(store, HOSTILE_BASE, data_dir / "reports")
    yield store, settings, values
    store.client.command(f"DROP DATABASE IF EXISTS `{settings.clickhouse_database}`")


@pytest.fixture
def hostile(hostile_store) -> Iterator[dict[str, str]]:
    store, settings, values = hostile_store
    sources.use(sources.StoreSource(store, settings=settings, reports_dir=settings.data_dir / "reports"))
    yield values
    sources.use(None)
