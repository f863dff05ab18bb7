"""The report compares against the policy that produced the history, and says when it cannot."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from retrylens.api.policy_store import PolicyStore
from retrylens.cli.main import app
from retrylens.evaluation.baseline import resolve_baseline
from retrylens.evaluation.ground_truth import history_of
from retrylens.evaluation.planted import LIVE, SETUPS, scenario_of
from retrylens.sdk.core.policy import RetryPolicy, parse_policy
from retrylens.simulation import run_fleet
from retrylens.store.event_table import event_row

runner = CliRunner()
SCENARIO = scenario_of(SETUPS["claims"])


@pytest.fixture(scope="module")
def events():  # noqa: ANN201
    out: list = []
    run_fleet(SCENARIO, tasks=120, seed=4, emit=out.append, validate_events=False)
    return out


def test_without_live_the_stored_policy_the_events_name_is_the_baseline(events) -> None:
    h = history_of(events)
    stored = parse_policy(LIVE)
    baseline = resolve_baseline(h, given=None, fallback=RetryPolicy(), stored=[stored])
    assert baseline.policy == stored and baseline.source == "policy store" and baseline.warnings == []
    assert baseline.history_policies == ["claims-live@1"]


def test_a_history_the_store_cannot_name_falls_back_with_a_warning(events) -> None:
    baseline = resolve_baseline(history_of(events), given=None, fallback=RetryPolicy(), stored=[])
    assert baseline.source == "fallback" and baseline.policy == RetryPolicy()
    assert "claims-live@1" in baseline.warnings[0] and "--live" in baseline.warnings[0]


def test_a_live_policy_other_than_the_logged_one_is_named_in_a_warning(events) -> None:
    other = parse_policy({**LIVE, "version": "7"})
    baseline = resolve_baseline(history_of(events), given=other, fallback=RetryPolicy(), stored=[])
    assert baseline.policy == other and baseline.source == "--live"
    assert "claims-live@7" in baseline.warnings[0] and "claims-live@1" in baseline.warnings[0]


def test_a_history_of_several_versions_says_so_and_takes_the_one_most_tasks_ran(events) -> None:
    later = [e.model_copy(update={"policy_version": "2"}) for e in events if e.task_id.endswith(("0", "1"))]
    kept = [e for e in events if not e.task_id.endswith(("0", "1"))]
    stored = [parse_policy(LIVE), parse_policy({**LIVE, "version": "2"})]
    baseline = resolve_baseline(history_of(kept + later), given=None, fallback=RetryPolicy(), stored=stored)
    assert baseline.policy.version == "1"
    assert any("2 policy versions" in w for w in baseline.warnings)


@pytest.mark.clickhouse
def test_cli_without_live_describes_changes_against_the_stored_logged_policy(settings, store, monkeypatch,
                                                                              tmp_path, events) -> None:
    monkeypatch.setenv("RETRYLENS_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("RETRYLENS_CLICKHOUSE_DSN", settings.clickhouse_dsn)
    monkeypatch.setenv("RETRYLENS_CLICKHOUSE_DATABASE", settings.clickhouse_database)
    monkeypatch.delenv("RETRYLENS_POLICY", raising=False)
    monkeypatch.delenv("RETRYLENS_POLICY_FILE", raising=False)
    store.insert_rows([event_row(e, topic="t", partition=0, offset=i) for i, e in enumerate(events)])
    PolicyStore(store).put("planted", "claims-agent", LIVE)
    candidate = tmp_path / "more-budget.yaml"
    candidate.write_text("budget: {max_attempts: 6}\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["report", "policies", "--candidates", str(candidate), "--out", str(out),
                                 "--replicates", "60"])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "policy_report.json").read_text())
    assert data["baseline"]["source"] == "policy store", data["baseline"]
    assert data["baseline"]["policy"] == "claims-live@1"
    changes = {c["field"]: (c["live"], c["candidate"]) for c in data["candidates"][0]["changes"]}
    # a fixed count of 3 attempts raised to 6 (against the SDK defaults it would read max_retries 20 → 5)
    assert changes == {"budget.max_attempts": (3, 6), "budget.retries": (2, 5), "budget.max_retries": (2, 5)}
    assert "warning:" not in result.output
