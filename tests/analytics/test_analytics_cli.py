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
    trained = runner.invoke(app, ["train", "--traces", str(SAMPLE), "--json"])
    assert trained.exit_code == 0, trained.output
    assert json.loads(trained.stdout)["version"] == "v0001"
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
    listed = json.loads(runner.invoke(app, ["alerts", "list", "--json"]).output)
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
    assert json.loads(runner.invoke(app, ["alerts", "list", "--json"]).output)["rules"] == []
    monkeypatch.setenv("RETRYLENS_ALERT_WEBHOOK_HOSTS", '["169.254.169.254"]')
    assert runner.invoke(app, inward).exit_code == 0
    rule_id = json.loads(runner.invoke(app, ["alerts", "list", "--json"]).output)["rules"][0]["rule_id"]
    monkeypatch.delenv("RETRYLENS_ALERT_WEBHOOK_HOSTS")
    changed = runner.invoke(app, ["alerts", "update", rule_id, "--webhook", "http://10.1.2.3/hook"])
    assert changed.exit_code == 2 and "10.1.2.3" in changed.output, changed.output
    assert changed.output.startswith("invalid argument: --webhook host '10.1.2.3'"), changed.output


def test_train_says_what_it_is_doing_then_prints_a_short_summary(env):
    trained = runner.invoke(app, ["train", "--traces", str(SAMPLE)])
    assert trained.exit_code == 0, trained.output
    lines = trained.stdout.splitlines()
    assert lines[0] == "Trained risk model v0001 from traces:agent_traces_sample.jsonl"
    assert any(line.strip().startswith("held-out: roc_auc") for line in lines) and len(lines) < 12
    assert "training the risk model on" in trained.stderr  # the live line while it works


@pytest.mark.clickhouse
def test_tasks_lists_the_newest_first_with_their_filters(env, store):
    load(store)
    listed = runner.invoke(app, ["tasks", "--project", "alpha", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [r["task_id"] for r in rows] == ["task-E", "task-D", "task-C", "task-B", "task-A"]
    assert [(r["attempts"], r["failures"], r["outcome"]) for r in rows][2] == (3, 2, "succeeded")
    failed = json.loads(runner.invoke(app, ["tasks", "--project", "alpha", "--outcome", "failed", "--json"]).stdout)
    assert [r["task_id"] for r in failed] == ["task-E"]
    retried = json.loads(runner.invoke(app, ["tasks", "--retried", "--agent", "planner", "--json"]).stdout)
    assert sorted((r["project"], r["task_id"]) for r in retried) == [("alpha", "task-A"), ("alpha", "task-B")]
    shown = runner.invoke(app, ["tasks", "--project", "alpha", "--limit", "2"], env={"COLUMNS": "160"})
    assert shown.exit_code == 0 and "task-E" in shown.stdout and "task-C" not in shown.stdout
    assert "attempts" in shown.stdout and "{" not in shown.stdout
    bad = runner.invoke(app, ["tasks", "--outcome", "exploded"])
    assert bad.exit_code == 2 and "unknown outcome 'exploded'" in bad.output


@pytest.mark.clickhouse
def test_alerts_list_is_a_table_and_json_only_when_asked(env, store):
    added = runner.invoke(app, ["alerts", "add", "--name", "slow planner", "--metric", "retry_rate",
                                "--threshold", "0.3", "--project", "alpha",
                                "--webhook", "https://ops:pw@hooks.example/services/T0/B0/secret"])
    assert added.exit_code == 0, added.output
    shown = runner.invoke(app, ["alerts", "list"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "slow planner" in shown.stdout and "retry_rate > 0.3 over 15 min" in shown.stdout
    assert "project=alpha" in shown.stdout and "secret" not in shown.stdout and "{" not in shown.stdout
    data = json.loads(runner.invoke(app, ["alerts", "list", "--json"]).stdout)
    assert [r["name"] for r in data["rules"]] == ["slow planner"]


def test_train_summary_says_whether_the_new_model_became_current_with_both_figures() -> None:
    from retrylens.cli.views import train_summary

    reason = "worse than v0001 (Brier 0.2 vs 0.1 on 30 recent held-out tasks): kept as a candidate; --force makes it current"
    kept = train_summary({"version": "v0002", "promotion": {"promoted": False, "reason": reason}})
    assert f"  kept as a candidate: {reason}" in kept
    made = train_summary({"version": "v0003", "promotion": {"promoted": True, "reason": "no worse than v0001: Brier 0.1 vs 0.1"}})
    assert "  now current: no worse than v0001: Brier 0.1 vs 0.1" in made
    assert not any("candidate" in line or "current" in line for line in train_summary({"version": "v0004"}))
