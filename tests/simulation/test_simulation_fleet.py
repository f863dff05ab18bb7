"""The simulated fleet: seeded determinism, valid events, an honest naive-vs-governor comparison."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from retrylens.cli.main import app
from retrylens.errors import ConfigError
from retrylens.schemas import EventKind, RetryEvent
from retrylens.sdk.text.features import input_fingerprint
from retrylens.simulation import generate_tasks, load_scenario, run_fleet
from retrylens.simulation.scenario import parse_scenario

START = datetime(2024, 3, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def scenario():  # noqa: ANN201
    return load_scenario()


@pytest.fixture(scope="module")
def governed(scenario):  # noqa: ANN001, ANN201
    events: list[RetryEvent] = []
    result = run_fleet(scenario, tasks=200, seed=11, driver="governor", emit=events.append, start=START)
    return result, events


def test_fleet_is_deterministic_under_a_seed(scenario, governed) -> None:  # noqa: ANN001
    again: list[RetryEvent] = []
    result = run_fleet(scenario, tasks=200, seed=11, driver="governor", emit=again.append, start=START)
    first, events = governed
    assert result.to_dict() == first.to_dict()
    assert [e.model_dump() for e in again] == [e.model_dump() for e in events]


def test_every_event_validates_and_carries_the_required_fields(governed) -> None:  # noqa: ANN001
    result, events = governed
    assert result.events_emitted == len(events)
    for event in events:
        parsed = RetryEvent.from_json_bytes(event.to_json_bytes())
        assert parsed.policy_id and parsed.policy_version and parsed.project and parsed.agent.role
        assert parsed.trace_id and parsed.span_id and parsed.input_fingerprint
        assert START <= parsed.ts <= START.replace(day=3)
        if parsed.kind == EventKind.ATTEMPT_FAILED:
            assert parsed.error_type and parsed.retryable is not None and parsed.error_detail and parsed.dependency
            assert parsed.context_snapshot is not None
        if parsed.kind == EventKind.DECISION:
            assert parsed.decision_reason and parsed.shadow and parsed.propensity
        if parsed.kind == EventKind.SIDE_EFFECT:
            assert parsed.side_effects[0].idempotency_key
    kinds = Counter(e.kind for e in events)
    assert kinds[EventKind.TASK_FINISHED] == 200 and len({e.project for e in events}) >= 5
    assert {e.error_type for e in events if e.error_type} >= {"timeout", "rate_limit", "schema_mismatch", "validation"}


def test_inputs_recur_and_keywords_shift_failure_rates(scenario) -> None:  # noqa: ANN001
    tasks = generate_tasks(scenario, 400, seed=3)
    fingerprints = Counter(input_fingerprint(t.text) for t in tasks)
    assert max(fingerprints.values()) >= 3
    risky = [t for t in tasks if "every" in t.text.split("\n")[0]]
    calm = [t for t in tasks if t.template.name == "research" and "every" not in t.text.split("\n")[0]]
    assert risky and calm and min(t.risk["planning_failure"] for t in risky) > max(
        t.risk["planning_failure"] for t in calm)


def test_governor_beats_naive_on_the_same_seeded_fleet(scenario, governed) -> None:  # noqa: ANN001
    naive = run_fleet(scenario, tasks=200, seed=11, driver="naive", start=START)
    gov = governed[0]
    assert gov.duplicate_side_effects == 0 < naive.duplicate_side_effects
    assert gov.wasted_attempts < naive.wasted_attempts
    assert gov.success_rate >= naive.success_rate
    assert gov.loops < naive.loops and gov.handoffs > 0 == naive.handoffs


def test_malformed_scenario_is_rejected_naming_the_field(scenario) -> None:  # noqa: ANN001
    data = yaml.safe_load(Path(__file__).parents[2].joinpath("simulation/default_scenario.yaml").read_text())
    data["dependencies"]["gpt-4o"]["timeout"] = 1.5
    with pytest.raises(ConfigError, match=r"dependencies\.gpt-4o\.timeout"):
        parse_scenario(data)
    data["dependencies"]["gpt-4o"]["timeout"] = 0.1
    data["templates"][0]["model"] = "gpt-9"
    with pytest.raises(ConfigError, match=r"templates\.0\.model"):
        parse_scenario(data)


def test_simulate_cli_prints_the_comparison_as_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["simulate", "--tasks", "60", "--seed", "5", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    keys = {"success_rate", "attempts", "wasted_attempts", "duplicate_side_effects", "tokens", "cost_usd",
            "handoffs", "loops"}
    assert keys <= set(payload["naive"]) and keys <= set(payload["governor"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndependencies: {}\ntemplates: []\n")
    result = CliRunner().invoke(app, ["simulate", "--tasks", "5", "--scenario", str(bad)])
    assert result.exit_code == 2 and "templates" in result.output


def test_policy_validate_cli(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("id: p\nversion: '3'\ncaps: {timeout: 2}\n")
    bad.write_text("id: p\nbreaker: {failure_ratio: 2}\n")
    ok = CliRunner().invoke(app, ["policy", "validate", str(good)])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["version"] == "3"
    failed = CliRunner().invoke(app, ["policy", "validate", str(bad)])
    assert failed.exit_code == 2 and "breaker.failure_ratio" in failed.output


@pytest.mark.clickhouse
def test_simulate_record_writes_the_governed_fleets_events_into_the_store(settings, store, monkeypatch) -> None:
    """So a fresh install can feed its dashboard: every emitted event stored once, ending now."""
    monkeypatch.setenv("RETRYLENS_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("RETRYLENS_CLICKHOUSE_DSN", settings.clickhouse_dsn)
    monkeypatch.setenv("RETRYLENS_CLICKHOUSE_DATABASE", settings.clickhouse_database)
    monkeypatch.delenv("RETRYLENS_KAFKA_BOOTSTRAP_SERVERS", raising=False)
    result = CliRunner().invoke(app, ["simulate", "--tasks", "30", "--seed", "5", "--unkeyed-tasks", "0",
                                      "--record", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    recorded = payload["recorded"]
    assert recorded["events_emitted"] == payload["governor"]["events_emitted"] > 0
    assert recorded["events_stored"] == recorded["events_emitted"]
    tasks, newest = store.client.query(
        f"SELECT uniqExact(task_id), max(ts) FROM {store.database}.events").result_rows[0]
    assert tasks == 30 and abs((datetime.now(UTC) - newest.replace(tzinfo=UTC)).total_seconds()) < 6 * 3600
