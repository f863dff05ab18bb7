"""`retrylens train/evaluate/metrics/alerts`: output contracts and clear errors on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analytics_eventset import load
from typer.testing import CliRunner

from retrylens.cli.main import app

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "agent_traces_sample.jsonl"
runner = CliRunner()


@pytest.fixture
def env(settings, monkeypatch):
    monkeypatch.setenv("RETRYLENS_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("RETRYLENS_CLICKHOUSE_DSN", settings.clickhouse_dsn)
    monkeypatch.setenv("RETRYLENS_CLICKHOUSE_DATABASE", settings.clickhouse_database)
    return settings


def test_train_then_evaluate_prints_one_json_object(env):
    trained = runner.invoke(app, ["train", "--traces", str(SAMPLE)])
    assert trained.exit_code == 0, trained.output
    assert json.loads(trained.output)["version"] == "v0001"
    result = runner.invoke(app, ["evaluate", "--traces", str(SAMPLE), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["n"] == 40 and {"roc_auc", "pr_auc", "brier"} <= set(data)


def test_evaluate_without_a_model_says_to_train(env):
    result = runner.invoke(app, ["evaluate", "--traces", str(SAMPLE), "--json"])
    assert result.exit_code == 1 and "retrylens train" in result.output


@pytest.mark.parametrize("command", ["train", "evaluate"])
def test_missing_traces_file(env, command, tmp_path):
    result = runner.invoke(app, [command, "--traces", str(tmp_path / "nope.jsonl"), "--json"][: 3 if command == "train" else 4])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_malformed_traces_line(env, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(SAMPLE.read_text().splitlines()[0] + "\n[1, 2\n")
    result = runner.invoke(app, ["train", "--traces", str(bad)])
    assert result.exit_code == 2 and "bad.jsonl:2: not valid JSON" in result.output
    assert "Traceback" not in result.output


@pytest.mark.clickhouse
def test_metrics_json(env, store):
    load(store)
    result = runner.invoke(app, ["metrics", "--json", "--project", "alpha"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["calls"] == 9 and data["retries"] == 4
    by_agent = json.loads(runner.invoke(app, ["metrics", "--json", "--project", "alpha", "--by", "agent"]).output)
    assert set(by_agent) == {"planner", "coder"}
    bad = runner.invoke(app, ["metrics", "--by", "colour"])
    assert bad.exit_code == 2 and "unknown dimension" in bad.output


@pytest.mark.clickhouse
def test_alerts_add_list_evaluate(env, store):
    added = runner.invoke(app, ["alerts", "add", "--name", "r", "--metric", "retry_rate", "--threshold", "0.3"])
    assert added.exit_code == 0, added.output
    listed = json.loads(runner.invoke(app, ["alerts", "list"]).output)
    assert [r["name"] for r in listed["rules"]] == ["r"]
    evaluated = runner.invoke(app, ["alerts", "evaluate"])
    assert evaluated.exit_code == 0 and json.loads(evaluated.output.strip().splitlines()[-1]) == []
    bad = runner.invoke(app, ["alerts", "add", "--name", "r", "--metric", "nope", "--threshold", "1"])
    assert bad.exit_code == 2 and "unknown metric" in bad.output


@pytest.mark.clickhouse
def test_alerts_add_refuses_a_webhook_into_the_servers_network_and_says_how_to_allow_it(env, store, monkeypatch):
    inward = ["alerts", "add", "--name", "r", "--metric", "retry_rate", "--threshold", "0.3",
              "--webhook", "http://169.254.169.254/latest/meta-data/"]
    refused = runner.invoke(app, inward)
    assert refused.exit_code == 2 and "RETRYLENS_ALERT_WEBHOOK_HOSTS" in refused.output, refused.output
    # the user's argument is refused, not the configuration: the message says so and names the option
    assert refused.output.startswith("invalid argument: --webhook host '169.254.169.254'"), refused.output
    assert json.loads(runner.invoke(app, ["alerts", "list"]).output)["rules"] == []
    monkeypatch.setenv("RETRYLENS_ALERT_WEBHOOK_HOSTS", '["169.254.169.254"]')
    assert runner.invoke(app, inward).exit_code == 0
    rule_id = json.loads(runner.invoke(app, ["alerts", "list"]).output)["rules"][0]["rule_id"]
    monkeypatch.delenv("RETRYLENS_ALERT_WEBHOOK_HOSTS")
    changed = runner.invoke(app, ["alerts", "update", rule_id, "--webhook", "http://10.1.2.3/hook"])
    assert changed.exit_code == 2 and "10.1.2.3" in changed.output, changed.output
    assert changed.output.startswith("invalid argument: --webhook host '10.1.2.3'"), changed.output
